"""The runtime: serves a compiled routing plan. Must never import the compiler, a YAML parser or jinja2."""
