"""Upstream adapters: OpenAI-compatible and Ollama-native, behind one interface (``base.Adapter``)."""
