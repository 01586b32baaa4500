"""Ctrl-C between steps: a long job that writes storage and its journal stops cleanly.

A KeyboardInterrupt may land anywhere, also inside a catalog write: on SQLite, a cursor
cut short in `executemany` kept the write lock (its connection closed, its statement
held by the traceback), and every later write waited for it, so an interrupted apply
hung for a minute and a half, then failed with "database is locked" instead of stopping.
Under `stop_between_steps` the first Ctrl-C only asks to stop: the job calls `check()`
at each safe point (a batch finished and committed) and stops there; a second Ctrl-C
stops at once, as before.
"""

from __future__ import annotations

import signal
import sys
import threading
import traceback
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType


class StopRequest:
    """Whether a stop was asked; `check()` raises KeyboardInterrupt once it has been."""

    def __init__(self) -> None:
        self.asked = False

    def check(self) -> None:
        if self.asked:
            raise KeyboardInterrupt


@contextmanager
def stop_between_steps(what: str) -> Iterator[StopRequest]:
    """Within the block, the first SIGINT sets the request (and says so on stderr), the
    second raises KeyboardInterrupt where it lands. Outside the main thread (a signal
    handler cannot be set there) the request is never set: Ctrl-C acts as usual."""
    request = StopRequest()
    if threading.current_thread() is not threading.main_thread():
        yield request
        return
    previous = signal.getsignal(signal.SIGINT)

    def on_interrupt(signum: int, frame: FrameType | None) -> None:
        if request.asked:
            raise KeyboardInterrupt
        request.asked = True
        sys.stderr.write(f"\nstopping {what} after the step under way (Ctrl-C again: at once)\n")

    signal.signal(signal.SIGINT, on_interrupt)
    try:
        yield request
    finally:
        signal.signal(signal.SIGINT, previous)


def release_frames(exc: BaseException) -> None:
    """Drop the locals of the frames `exc` passed through (not the ones still running):
    a database cursor an interrupt cut short holds its connection's locks while a frame
    of the traceback refers to it."""
    traceback.clear_frames(exc.__traceback__)
