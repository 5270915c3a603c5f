"""One module per wire format, holding the rules that its surface (the client side) and its upstream
adapter (the provider side) share, so that no rule is written twice.

- ``openai_chat``: Chat Completions (a tool call's ``arguments`` string and the object it encodes);
- ``anthropic``: Messages (image sources <-> image URLs);
- ``ollama``: Ollama's native API (base64 images <-> ``data:`` URLs).

Why this boundary: the same wire format is read and written on both sides of the gateway (an Ollama
client's ``images`` and an Ollama worker's), and a rule kept in two places drifts. A module here imports
nothing of the runtime; surfaces and adapters import it.
"""
