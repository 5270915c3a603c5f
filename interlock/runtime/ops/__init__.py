"""The ops app: the cold routes (models, health, metadata, metrics, the status page, OpenAPI) as a FastAPI
app. The hot surfaces never pass through it: they stay on the raw ASGI path (``lifecycle``)."""
