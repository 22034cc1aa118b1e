"""Zero-copy reading (``recordkit.open(path, zero_copy=True)``): a file mapped into memory, and its views.

Records are read-only ``memoryview`` slices of the map. Closing the reader releases every view it handed
out, so using one afterwards raises CPython's ``ValueError: operation forbidden on released memoryview
object`` instead of reading unmapped memory. What the caller made from a view (a slice of it, a numpy array
over it) keeps the map alive instead: the map is unmapped once the last such object is gone, never under
it. CPython guarantees that part: an ``mmap`` with live exports refuses to close.
"""

from __future__ import annotations

import contextlib
import mmap
import weakref
from collections.abc import Iterable, Iterator
from typing import IO, Any

__all__ = ["MappedFile", "ViewLedger"]


class ViewLedger:
    """Weak references to the views a reader handed out, so that :meth:`release` can invalidate them.

    Dead references are pruned whenever the list has doubled since the last pruning, so a long iteration
    keeps about as many entries as views are alive.
    """

    _FLOOR = 4096

    def __init__(self) -> None:
        self._refs: list[weakref.ref[Any]] = []
        self._limit = self._FLOOR

    def add(self, view: Any) -> Any:
        """Record ``view`` and return it (a ``bytes`` record as a ``memoryview`` of it, see below)."""
        refs = self._refs
        try:
            refs.append(weakref.ref(view))
        except TypeError:  # bytes: a record the format had to assemble (see _as_view)
            view = _as_view(view)
            refs.append(weakref.ref(view))
        if len(refs) > self._limit:
            self._prune()
        return view

    def add_all(self, views: list[Any]) -> list[Any]:
        """Record every view of ``views`` and return the list (``bytes`` in it replaced by views of them)."""
        try:
            refs = list(map(weakref.ref, views))
        except TypeError:  # bytes among them: see _as_view
            views[:] = map(_as_view, views)
            refs = list(map(weakref.ref, views))
        self._refs.extend(refs)
        if len(self._refs) > self._limit:
            self._prune()
        return views

    def track(self, views: Iterable[Any]) -> Iterator[Any]:
        """Yield ``views``, recording each."""
        add = self.add
        for view in views:
            yield add(view)

    def _prune(self) -> None:
        self._refs = [ref for ref in self._refs if ref() is not None]
        self._limit = max(self._FLOOR, 2 * len(self._refs))

    def release(self) -> None:
        """Release every recorded view that is still alive.

        A view that something else still exports (a numpy array made over it) cannot be released; it stays
        valid, and so does the map under it.
        """
        refs, self._refs = self._refs, []
        for ref in refs:
            view = ref()
            if view is not None:
                with contextlib.suppress(BufferError):
                    view.release()


def _as_view(record: Any) -> memoryview:
    """Return ``record`` as a read-only ``memoryview`` (itself if it is one).

    A zero-copy reader hands out ``memoryview`` slices of the map. A record that is not one contiguous
    range of the file (an ArrayRecord record that a Riegeli block header, one every 64 KiB, splits in two)
    reaches it as ``bytes`` assembled by the format; it is handed out as a view of those bytes, so that every
    record of a zero-copy reader has the same type and the same lifetime (released at ``close()``).
    """
    return record if isinstance(record, memoryview) else memoryview(record).toreadonly()


class MappedFile:
    """A read-only memory map of an open file; :attr:`view` is a ``memoryview`` of the whole file.

    An empty file cannot be mapped; its view is an empty ``memoryview`` of ``b""``.
    """

    def __init__(self, file: IO[bytes], size: int) -> None:
        self._map: mmap.mmap | None = None
        if size:
            self._map = mmap.mmap(file.fileno(), size, access=mmap.ACCESS_READ)
            self.view = memoryview(self._map)
        else:
            self.view = memoryview(b"")

    def close(self) -> None:
        """Release the whole-file view and unmap the file, unless views made from it are still alive.

        Those keep the map: it is unmapped when the last of them is released or collected.
        """
        self.view.release()
        if self._map is not None:
            with contextlib.suppress(BufferError):
                self._map.close()
            self._map = None
