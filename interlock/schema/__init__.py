"""Pydantic models of the source configuration and of the compiled routing plan."""
