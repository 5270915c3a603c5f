"""Ollama native API rules shared by its surface and its upstream adapter: base64 images <-> data URLs."""

from __future__ import annotations

# the first base64 characters of each image type Ollama models read (JPEG, PNG, GIF, WebP)
IMAGE_TYPES = (("/9j/", "image/jpeg"), ("iVBOR", "image/png"), ("R0lG", "image/gif"), ("UklG", "image/webp"))


def data_url(image: str) -> str:
    """A message's base64 ``images`` entry as a ``data:`` URL, its media type sniffed (else PNG)."""
    mime = next((m for prefix, m in IMAGE_TYPES if image.startswith(prefix)), "image/png")
    return f"data:{mime};base64,{image}"


def data_url_base64(url: str) -> str | None:
    """The base64 data of a base64 ``data:`` URL (what Ollama takes in ``images``), else None."""
    if url.startswith("data:"):
        header, comma, data = url.partition(",")
        if comma and header.endswith(";base64"):
            return data
    return None
