"""The request path: which alias a name resolves to, retries, resuming a cut stream, keepalives."""
