"""Serving: the HTTP/1.1 server, its connection handling and corked writes, CORS, the collector's policy
in a serving process, and reading a new plan for a reload. Nothing here knows a wire format."""
