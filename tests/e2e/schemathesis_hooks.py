"""Hooks of the schemathesis run of test_schemathesis.py, loaded by `st run` (SCHEMATHESIS_HOOKS).

- Every URL it generates for an MCP integration that the server would resolve and connect to is pointed at
  a loopback port where nothing listens: the run may not reach any other host (nor a DNS server).
- The admin key the run authenticates with is never revoked (a generated revoke of it gets another id), so
  every later request still reaches the route it tests instead of stopping at 401.
"""

import os
import uuid
from typing import Any
from urllib.parse import urlsplit

import schemathesis

CLOSED_URL = os.environ["THREADLINE_FUZZ_CLOSED_URL"]
OWN_KEY_ID = os.environ["THREADLINE_FUZZ_KEY_ID"]


def _would_connect(url: str) -> bool:
    try:
        parts = urlsplit(url)
    except ValueError:
        return False
    return parts.scheme in ("http", "https") and bool(parts.hostname)


@schemathesis.hook
def before_call(context: Any, case: Any, kwargs: dict[str, Any]) -> None:
    body = case.body
    if isinstance(body, dict) and isinstance(body.get("url"), str) and _would_connect(body["url"]):
        body["url"] = CLOSED_URL
    path = case.path_parameters
    if isinstance(path, dict) and path.get("key_id") == OWN_KEY_ID:
        path["key_id"] = str(uuid.uuid4())
