"""The ground floor: the errors, the clock, ASGI types and helpers, periodic loops, lifespan hooks, files
written atomically and the mypyc marker. Imports no other room of the runtime."""
