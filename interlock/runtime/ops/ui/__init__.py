"""The status page (``GET /ui``): server-rendered HTML of the gateway's live state.

``view`` gathers plain data (no jinja2); ``page`` renders it with jinja2 and is imported on the first
``/ui`` request only, so the gateway's import (and its request path) never loads a template engine.
"""

STATIC = {  # the shipped static files (``static/``) and their media types
    "refresh.js": "text/javascript; charset=utf-8",
    "page.css": "text/css; charset=utf-8",
    "favicon.svg": "image/svg+xml",
}
