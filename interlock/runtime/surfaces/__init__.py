"""The surfaces: one module per wire format a caller may speak (``openai``, ``responses``, ``anthropic``,
``ollama``), their shared base (``base``) and their documented contract (``contract``). The one route
table that joins them to the lifecycle is ``request.route_table``, above both."""
