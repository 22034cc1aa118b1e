"""The old home of :class:`~recordkit.formats.sequential.SequentialFrameReader` (kept while imports move)."""

from recordkit.formats.sequential import SequentialFrameReader

__all__ = ["SequentialFrameReader"]
