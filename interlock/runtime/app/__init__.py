"""The app and the process runner: the ASGI gateway and the server that runs it."""
