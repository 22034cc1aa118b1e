"""Record indexes as the readers take them: any iterable of ints, numpy index arrays included."""

from __future__ import annotations

import sys
from collections.abc import Iterable
from typing import Any

__all__ = ["index_list"]


def index_list(indices: Iterable[Any]) -> list[Any]:
    """``indices`` as a list, converting a one-dimensional numpy integer array at C speed.

    ``list(array)`` would give one numpy scalar per index, each checked one by one later; ``tolist()``
    gives Python ints. A boolean array (a mask) raises ``TypeError``: read as a list it would give the
    indexes 0 and 1. numpy is not imported to ask, since an array exists only once it is.
    """
    if type(indices) is list:
        return indices
    numpy = sys.modules.get("numpy")
    if numpy is not None and isinstance(indices, numpy.ndarray):
        if indices.dtype.kind == "b":  # numpy 1.x would read its items as the indexes 0 and 1
            raise TypeError(
                "read() takes record indexes, not a boolean mask: pass numpy.flatnonzero(mask)"
            )
        if indices.ndim == 1 and indices.dtype.kind in "iu":
            return indices.tolist()  # type: ignore[no-any-return]
    return list(indices)
