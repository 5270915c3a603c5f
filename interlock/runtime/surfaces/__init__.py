"""The surfaces: one module per wire format a caller may speak (``openai``, ``responses``, ``anthropic``,
``ollama``), their shared base (``base``), their documented contract (``contract``) and the one route
table (``table``)."""
