"""Whether this process is a DataLoader worker, where processes already share the CPUs between them."""

from __future__ import annotations

import sys

__all__ = ["in_worker_process", "mark_worker_process"]

_WORKER = False


def mark_worker_process() -> None:
    """Record that this process is a worker of recordkit's loader (called when the worker starts)."""
    global _WORKER
    _WORKER = True


def in_worker_process() -> bool:
    """Whether this process is a worker of recordkit's loader or of torch's ``DataLoader``.

    Never imports torch: if it is not imported, this cannot be one of its workers.
    """
    if _WORKER:
        return True
    data = sys.modules.get("torch.utils.data")
    return data is not None and data.get_worker_info() is not None
