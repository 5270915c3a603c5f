"""One module per wire format, both sides of the gateway, so that no rule is written twice.

- ``openai_chat``: Chat Completions, the internal form's own shape (tool-call arguments, ids, the
  answer readers every other format uses);
- ``openai_responses``: Responses (its requests into the internal form and answers out of it; the
  relay to an upstream declared ``responses: true``);
- ``anthropic``: Messages (its requests and answers for the surface; the Messages request, answer and
  event stream for the adapter);
- ``ollama``: Ollama's native API (likewise, for /api/chat and /api/embed).

Each holds its surface's client side (a request into the internal form, an answer in its own shape)
and its adapter's upstream side (the internal form into the upstream's request, the upstream's answer
and stream back into OpenAI's shape, the same-format relay's request). Why this boundary: the same
format is read and written on both sides of the gateway (an Ollama client's ``images`` and an Ollama
worker's), and a rule kept in two places drifts. The provider border's core types live here too, at the
runtime's bottom: ``base`` (``Endpoint``, ``Native``, ``Relayed``, ``RelayedChunk``, ``ChatStream``),
``sse`` (the SSE reader), ``fields`` (what each adapter does with each request field) and
``error_bodies`` (what an upstream's status or error object says went wrong). A module here imports
``errors`` and ``asgi.json_type``, never a surface, an adapter or anything else of the runtime; they
import it. A surface keeps its request checks and its stream renderer (the event sequence's
state), an adapter only sends.
"""
