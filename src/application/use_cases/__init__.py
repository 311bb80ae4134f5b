"""One class per use case: ports injected in __init__, one `execute`."""
