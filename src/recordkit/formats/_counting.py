"""The record count of a frame writer, kept by its base class rather than by each format."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

__all__ = ["CountsRecords"]


def _counting(method: Callable[[Any, Any], Any], *, many: bool) -> Callable[[Any, Any], Any]:
    """``write`` (or, ``many``, ``write_many``) of a writer class, counting what it wrote.

    Only the outermost of nested calls counts (a ``write`` calling ``write_many``, or the reverse)."""

    @functools.wraps(method)
    def counted(self: CountsRecords, arg: Any) -> Any:
        if self._writing:
            return method(self, arg)
        self._writing = True
        try:
            result = method(self, arg)
        finally:
            self._writing = False
        self._count += result if many else 1
        return result

    counted._counts_records = True  # type: ignore[attr-defined]
    return counted


class CountsRecords:
    """A writer whose ``count`` is kept here: every ``write`` and ``write_many`` a class defines is wrapped
    when the class is created, so that a record is counted once it was accepted (a ``write`` that raises
    counts nothing; a ``write_many`` counts the number it returns), once, however the two call each other.
    """

    _count: int = 0
    _writing: bool = False

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if "count" in cls.__dict__:
            raise TypeError(f"{cls.__name__} defines count, which its base class keeps: remove it")
        for name in ("write", "write_many"):
            method = cls.__dict__.get(name)
            if callable(method) and not getattr(method, "_counts_records", False):
                setattr(cls, name, _counting(method, many=name == "write_many"))

    @property
    def count(self) -> int:
        """The number of records written so far (kept by this class; subclasses cannot set it)."""
        return self._count
