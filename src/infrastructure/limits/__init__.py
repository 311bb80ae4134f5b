"""The limits an operator puts on organizations and API keys: fair share of run slots, and rate limits."""
