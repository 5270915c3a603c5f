"""One module per wire format, both sides of the gateway, so that no rule is written twice.

- ``openai_chat``: Chat Completions, the internal form's own shape (its error body, the one every
  OpenAI-shaped answer uses; its stream renderer; the body for an OpenAI-compatible upstream and its
  SSE decoder; the readers every other format uses: tool-call arguments, ids, chunks);
- ``openai_responses``: Responses (its requests into the internal form, answers and typed events out
  of it; the relay to an upstream declared ``responses: true``);
- ``anthropic``: Messages for the adapter (the request, answer and event stream); ``anthropic_caller``
  for the surface (its requests, answers, events and error bodies; the one
  error-type table);
- ``ollama``: Ollama's native API for the adapter (/api/chat and /api/embed); ``ollama_caller`` for the
  surface.

Each format holds its client side (a request into the internal form; an answer, a stream's events
and an error in its own shape; in a module of its own where a plan may serve the format without an
upstream of it) and its upstream side (the internal form into the upstream's request,
the upstream's answer and stream back into OpenAI's shape, the same-format relay's request). Why this
boundary: the same format is read and written on both sides of the gateway (an Ollama client's
``images`` and an Ollama worker's; an Anthropic caller's error types and an Anthropic upstream's),
and a rule kept in two places drifts. The provider border's core types live here too, at the
runtime's bottom: ``base`` (``Endpoint``, ``Native``, ``Relayed``, ``RelayedChunk``, ``ChatStream``,
``StreamRender``, the same-format relay's body), ``sse`` (the SSE reader, headers and frame),
``fields`` (what each adapter does with each request field) and ``error_bodies`` (what an upstream's
status or error object says went wrong). A module here imports ``errors`` and ``asgi``, never a
surface, an adapter or anything else of the runtime; they import it. A surface keeps only what is
its own (the routing checks of a request, which of its format's pieces a request gets), an adapter
only the exchange (what it sends where).
"""
