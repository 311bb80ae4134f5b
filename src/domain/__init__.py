"""Threadline's domain: entities, value objects and their rules. Standard library only."""
