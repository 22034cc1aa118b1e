"""Running an iterator in a background thread, a bounded number of items ahead of its consumer."""

from __future__ import annotations

import queue
import threading
from collections.abc import Iterator
from typing import TypeVar

__all__ = ["End", "Failure", "prefetch", "put_unless_stopped"]

T = TypeVar("T")

_POLL = 0.05
"""Seconds between checks of the stop flag while the queue is full."""


class End:
    """Put on a queue after the last item."""


class Failure:
    """Put on a queue instead of an item when producing it raised ``exc``."""

    def __init__(self, exc: BaseException) -> None:
        self.exc = exc


def put_unless_stopped(out: queue.Queue[object], item: object, stop: threading.Event) -> bool:
    """Put ``item`` unless told to stop first; return whether it was put."""
    while not stop.is_set():
        try:
            out.put(item, timeout=_POLL)
            return True
        except queue.Full:  # noqa: PERF203 - waiting for room, not a hot loop
            continue
    return False


def _produce(source: Iterator[T], out: queue.Queue[object], stop: threading.Event) -> None:
    message: object = End()
    try:
        for item in source:
            if not put_unless_stopped(out, item, stop):
                break
    except BaseException as exc:  # noqa: BLE001 - handed to the consumer, which re-raises it
        message = Failure(exc)
    close = getattr(source, "close", None)
    try:
        if close is not None:
            close()
    except BaseException as exc:  # noqa: BLE001 - same
        if isinstance(message, End):
            message = Failure(exc)
    put_unless_stopped(out, message, stop)


def prefetch(source: Iterator[T], n: int) -> Iterator[T]:
    """Yield the items of ``source``, produced by a background thread up to ``n`` items ahead.

    An exception raised by ``source`` is re-raised in the consumer, at the point where its item would have
    been. When the consumer stops early (``break``, an exception, or closing this generator), the thread is
    told to stop, ``source`` is closed in that thread (so its ``finally`` blocks run there), and the thread is
    joined before this generator returns: no thread outlives the iteration.

    Parameters
    ----------
    source
        The iterator to run in the background; it is used from the background thread only.
    n
        How many items may wait in the queue (at least 1).
    """
    out: queue.Queue[object] = queue.Queue(maxsize=max(1, n))
    stop = threading.Event()
    thread = threading.Thread(
        target=_produce, args=(source, out, stop), name="recordkit-prefetch", daemon=True
    )
    thread.start()
    try:
        while True:
            item = out.get()
            if isinstance(item, End):
                return
            if isinstance(item, Failure):
                raise item.exc
            yield item  # type: ignore[misc]
    finally:
        stop.set()
        thread.join()
