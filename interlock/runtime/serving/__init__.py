"""Serving: the HTTP/1.1 connections (the protocol on httptools, its timeouts and cap), CORS, the
open-file limit, the collector's policy in a serving process. Nothing here knows a wire format or the
app: running the gateway is ``runtime.server``, reading a new plan for a reload ``runtime.reload``, both
beside ``runtime.app``."""
