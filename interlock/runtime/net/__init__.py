"""HTTP at the runtime's edges: the upstream transport behind its border (``transport.py``) and the
server's client connections (``connections.py``); the framing, pools and timers live here and nothing
above imports them but through ``transport.py`` (adapters) and the ASGI extensions (``asgi.py``)."""
