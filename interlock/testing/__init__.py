"""Real HTTP fake upstreams on loopback, with fault injection, for tests, benchmarks and the demo.

- ``fake_openai.FakeOpenAI``: an OpenAI-compatible upstream (``base_url`` ends in ``/v1``); with
  ``server="vllm" | "sglang" | "llama.cpp"`` it also serves that server's ``/metrics`` (and ``/slots``)
  from ``fake.reported`` (``server_load.Reported``).
- ``fake_anthropic.FakeAnthropic``: an Anthropic Messages upstream (``base_url`` is its ``url``).
- ``fake_ollama.FakeOllama`` with ``ModelSpec``: an Ollama worker (``url``).
- ``faults.Fault``: what to inject (``fake.set_fault(fault, model=None, times=None)``);
  ``fake.refuse_connections()`` / ``accept_connections()`` switch the listener.
- ``replies.Reply``: reply text, chunking and per-chunk delay.
- ``process.FakeProcess``: a fake in its own process, steered over its ``/_fake/`` control routes.
- ``blackhole.SaturatedListener``: a loopback address where connecting hangs (connect timeouts).

Each fake is ``async with``-able (the caller's loop) and ``with``-able (its own thread). Nothing is
imported here, so ``python -m interlock.testing.fake_openai`` runs without a double import.
"""
