"""Adapters and entry points: persistence, HTTP, CLI, and the container that wires them."""
