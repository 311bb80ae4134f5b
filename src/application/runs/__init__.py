"""The run loop: an agent answers on a thread, calling tools along the way."""
