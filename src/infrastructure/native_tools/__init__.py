"""Adapters of the native tools that reach outside: web pages, web search, operator commands, Python."""
