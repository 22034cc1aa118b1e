"""The context-manager protocol of objects that release their resources in ``close()``."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from types import TracebackType

    from typing_extensions import Self

__all__ = ["Closing"]


class Closing:
    """Base of objects that are their own context manager: leaving the ``with`` block calls ``close()``.

    A subclass that must do otherwise when the block raises (a writer discards its file) overrides
    :meth:`_leave`.
    """

    __slots__ = ()

    def close(self) -> None:
        """Release the resources held; subclasses implement it."""
        raise NotImplementedError

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self._leave(failed=exc_type is not None)

    def _leave(self, *, failed: bool) -> None:
        """End the ``with`` block; ``failed`` tells whether it raised."""
        self.close()
