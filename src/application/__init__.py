"""Use cases and the ports they need. No frameworks here."""
