"""The result type of :func:`~recordkit.decode.parsing.parse_examples` and
:func:`~recordkit.decode.parsing.parse_ofrecords`."""

from __future__ import annotations

from typing import Any

__all__ = ["ParsedBatch"]


class ParsedBatch(dict[str, Any]):
    """A parsed batch: a ``dict`` of feature name -> array (or :class:`~recordkit.decode.specs.Ragged`, or
    list of images, or :class:`~recordkit.decode.sparse.SparseArray`), in every way a plain ``dict``, which a notebook shows as a table of its columns' types
    and shapes and its first rows (decoded images as thumbnails; see :mod:`recordkit.decode.preview`)."""

    __slots__ = ()

    def _repr_html_(self) -> str:
        """The notebook view of the batch."""
        from recordkit.decode.preview import batch_html

        return batch_html(self)
