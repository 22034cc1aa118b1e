"""Keep glibc from handing freed batches back to the kernel, so the next batch is not page-faulted in again.

A batch of large records is many fresh ``bytes`` objects from the heap. When a loop drops the batch, glibc
coalesces the freed space into the top of the heap and, once that exceeds its trim threshold (128 KiB by
default), returns it to the kernel; the next batch then faults every page in again, which costs more than
reading the records.

glibc raises that threshold itself, to twice the size, the first time a program frees a memory-mapped block
larger than the current mmap threshold (up to 32 MiB on 64-bit systems); numpy and torch programs do this
routinely. :func:`keep_freed_memory` allocates and frees one such block, once per process, so the raise
happens before the first batch instead of by chance. It touches no page, changes nothing when the user has
set ``MALLOC_TRIM_THRESHOLD_`` or ``MALLOC_MMAP_THRESHOLD_`` (glibc then keeps the user's values), and does
nothing on other C libraries. ``docs/design.md`` compares it with the alternatives.
"""

from __future__ import annotations

import os

__all__ = ["WARM_BLOCK", "keep_freed_memory"]

# Just below glibc's 32 MiB ceiling for the dynamic threshold (the block's chunk header must fit too).
WARM_BLOCK = 31 << 20


def _on_glibc() -> bool:
    try:
        return os.confstr("CS_GNU_LIBC_VERSION") is not None
    except (AttributeError, ValueError, OSError):
        return False


_pending = _on_glibc()


def keep_freed_memory() -> None:
    """Raise glibc's trim threshold once per process (a no-op after the first call, and off glibc).

    ``bytes(n)`` is allocated with ``calloc``, which glibc serves from a fresh map that needs no zeroing, so
    this costs two system calls and touches no memory. A forked child inherits the raised threshold.
    """
    global _pending
    if _pending:
        _pending = False
        block = bytes(WARM_BLOCK)
        del block
