"""FastAPI runs a dependency that is a plain function in a worker thread: a thread hop (and GIL hand-offs)
per dependency per request. Ours never block: dependency-injector's `Provide[...]` markers only hand
themselves back (the injection happens in the endpoint's wrapper), and the HTTP layer's own sync
dependencies read the request. They are made coroutines, called on the event loop."""

import inspect
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from dependency_injector.wiring import Provide
from fastapi import FastAPI
from fastapi.dependencies.models import Dependant
from fastapi.routing import APIRoute

_OURS = "infrastructure.http"


def _inline(call: Callable[..., Any]) -> Callable[..., Any]:
    async def called(*args: Any, **kwargs: Any) -> Any:
        return call(*args, **kwargs)

    called.__name__ = getattr(call, "__name__", "provide")
    return called


def _trivial(call: Any) -> bool:
    if isinstance(call, Provide):
        return True
    return (
        inspect.isfunction(call)
        and not inspect.iscoroutinefunction(call)
        and not inspect.isgeneratorfunction(call)
        and call.__module__.startswith(_OURS)
    )


def _visit(dependant: Dependant, seen: set[int]) -> None:
    for sub in dependant.dependencies:
        if id(sub) in seen:
            continue
        seen.add(id(sub))
        if _trivial(sub.call):
            sub.call = _inline(sub.call)  # type: ignore[arg-type]
        _visit(sub, seen)


def _dependants(routes: Iterable[Any]) -> Iterator[Dependant]:
    """The dependants requests reach: an included router's routes are rebuilt for each inclusion (FastAPI's
    `_IncludedRouter` and its effective route contexts)."""
    for route in routes:
        if isinstance(route, APIRoute) or isinstance(getattr(route, "dependant", None), Dependant):
            yield route.dependant
        candidates = getattr(route, "effective_candidates", None)
        if candidates is not None:
            yield from _dependants(candidates())


def inline_trivial_dependencies(app: FastAPI) -> None:
    """Call once every router is included."""
    seen: set[int] = set()
    for dependant in _dependants(app.router.routes):
        _visit(dependant, seen)
