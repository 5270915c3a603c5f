"""The runtime: serves a compiled routing plan. Must never import the compiler, ruamel.yaml or jinja2."""
