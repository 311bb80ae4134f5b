"""The process's heap settled once it has started, so that the garbage collector's passes stop walking what
lives as long as the process, and walk what runs hold less often."""

import gc

YOUNG_ALLOCATIONS = 10_000
"""Allocations between two collections of the youngest objects (Python's default: 700)."""
FULL_EVERY = 100
"""Collections of the middle generation between two full ones (Python's default: 10; a full one also waits for
the objects that survived to grow by a quarter)."""


def settle_heap() -> None:
    """Collect once, then move every object alive now (modules, the app, the container's singletons, pools) out
    of the collector's reach: the collections that follow look only at what requests and runs create. A full pass
    over the startup heap took 100-300 ms of CPU on a 2-core machine, and held the event loop.

    Then collect less often. A thousand runs at once hold 300 MB of live objects: with Python's thresholds, ten
    full passes over them (190 ms each) and a thousand young collections took about 2.5 s of the 13 s of CPU such
    a burst cost; with these, about 1.5 s less CPU for the same burst, its peak memory the same."""
    gc.collect()
    gc.freeze()
    gc.set_threshold(YOUNG_ALLOCATIONS, 10, FULL_EVERY)
