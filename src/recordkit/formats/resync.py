"""Recovery's side of the format contract: finding the intact frames of a damaged file.

:func:`recordkit.recover.scan` asks the file's format for its intact records
(:meth:`recordkit.formats.base.RecordFormat.salvage`). A format whose records follow one another provides a
:class:`Resync` (its ``resync`` hook), and the default ``salvage`` walks the file with it; a format that
locates its records otherwise (by an index in its header) overrides ``salvage`` and reports each damaged
range through a :data:`Skip`.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator
from typing import Any, TypeAlias

__all__ = ["Resync", "Skip"]

Skip: TypeAlias = Callable[..., None]
"""``skip(start, end, reason, index=None)``: how a salvage reports a damaged byte range; ``index`` is the
record number the range stands for when the format knows it (else: the number of records recovered before
it)."""

_TRUNCATED_TAIL = "no intact record up to the end of the file (truncated?)"


class Resync(ABC):
    """Finds the intact frames of a damaged file held whole in ``buffer`` (its first ``size`` bytes).

    :meth:`frames` walks the file with it (and :meth:`salvage` reads the payloads it finds): a frame that
    :meth:`frame` accepts is kept, and after damage the walk goes on at :meth:`next_start` from the next
    byte on.
    """

    def __init__(self, buffer: Any, size: int) -> None:
        self.buffer = buffer
        self.size = size

    @abstractmethod
    def frame(self, pos: int) -> tuple[int, int, int] | None:
        """Return ``(payload start, payload stop, frame end)`` of an intact frame at ``pos``, else ``None``.

        The frame must fit the file and pass every check the format has (length, checksums).
        """

    @abstractmethod
    def next_start(self, pos: int) -> int:
        """Return the first position from ``pos`` on where a frame is trusted after damage, else ``size``."""

    def damage(self, pos: int) -> str:
        """Return why the frame at ``pos`` was not accepted (a reason for the recovery report)."""
        return "no valid record"

    def frames(self, skip: Skip) -> Iterator[tuple[int, int]]:
        """Yield ``(start, stop)``, the byte range of every intact frame's payload in file order, reporting
        each damaged range to ``skip``: the one walk of the file, which :meth:`salvage` reads through."""
        size = self.size
        pos = 0
        while pos < size:
            found = self.frame(pos)
            if found is not None:
                start, stop, pos = found
                yield start, stop
                continue
            # Even when the length looks right, bytes may be missing or added inside the frame: look for
            # the next intact frame from the next byte on rather than trusting the length.
            damaged, pos = pos, self.next_start(pos + 1)
            skip(damaged, pos, self.damage(damaged) if pos < size else _TRUNCATED_TAIL)

    def salvage(self, skip: Skip) -> Iterator[bytes]:
        """Yield the payload of every intact frame in file order, reporting each damaged range to ``skip``."""
        buffer = self.buffer
        for start, stop in self.frames(skip):
            yield buffer[start:stop]
