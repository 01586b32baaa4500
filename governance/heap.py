"""The cyclic garbage collector around builds of large, long-lived, acyclic results.

A plan of half a million actions is millions of small objects that all live to the end;
the collector would traverse them again and again for nothing (they make no cycles).
"""

from __future__ import annotations

import gc
from collections.abc import Callable, Iterator
from contextlib import contextmanager


@contextmanager
def settled_collections(young: int = 10_000) -> Iterator[Callable[[], None]]:
    """Keep the cyclic GC off what a large result already holds; yields `settle`, to call
    after each piece (a plan's group, a page of rows read).

    Building a plan (with the classification it streams) or reading a saved one allocates
    millions of small objects that live to the end: traversed again by every young and
    full collection, that was a tenth of a large build and half of reading a plan back.
    `settle` moves every object alive between two pieces into the permanent generation
    (`gc.freeze`, constant time), so collections only ever look at the piece in hand;
    the results make no reference cycles, and anything frozen is handed back to the
    oldest generation (`gc.unfreeze`) when the build ends. Young collections
    still run, every `young` allocations instead of 700. When the caller froze objects
    of its own, only the threshold changes (unfreezing would release theirs too).
    """
    old = gc.get_threshold()
    if 0 < old[0] < young:
        gc.set_threshold(young, *old[1:])
    freezing = gc.isenabled() and gc.get_freeze_count() == 0
    try:
        yield gc.freeze if freezing else no_settle
    finally:
        if freezing:
            gc.unfreeze()
        gc.set_threshold(*old)


def no_settle() -> None:
    """`settle` when there is nothing to freeze."""
    return None
