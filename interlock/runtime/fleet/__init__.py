"""The fleet: what is known about workers, gathered outside the request path, and worker choice.

Probes and metadata (``probes``, ``metadata``, ``facts``; the fetch both fetchers share: ``fetcher``),
OpenAI-compatible servers' own load (``signals``: llama.cpp, vLLM, SGLang), learned speeds (``speeds``),
what a candidate can do on a route (``fit``), scoring (``scoring``), sticky sessions (``sticky``) and the
fleet line (``line``): read on the request path with dictionary lookups only."""
