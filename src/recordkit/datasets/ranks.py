"""Who is reading: the rank of this process among the training processes, and its DataLoader worker.

A *shard* is one reader of the data: ``rank * num_workers + worker`` among ``world_size * num_workers``
(:func:`shard_of`). :func:`resolve_rank` and :func:`worker_info` find the two halves without importing
torch.
"""

from __future__ import annotations

import os
import sys

__all__ = ["resolve_rank", "shard_of", "worker_info"]


def _env_int(name: str) -> int | None:
    value = os.environ.get(name)
    if value is None or not value.strip():
        return None
    try:
        return int(value)
    except ValueError:
        raise ValueError(f"environment variable {name}={value!r} is not an integer") from None


def resolve_rank(rank: int | None, world_size: int | None) -> tuple[int, int]:
    """Return ``(rank, world_size)``: explicit values, else ``torch.distributed``, else the environment.

    ``torch.distributed`` is consulted only if it is already imported and a process group is initialised;
    then the ``RANK`` and ``WORLD_SIZE`` environment variables; else a single process.

    Raises
    ------
    ValueError
        Only one of the two was given, or the rank is outside ``[0, world_size)``.
    """
    if (rank is None) != (world_size is None):
        raise ValueError("give both rank and world_size, or neither")
    if rank is None or world_size is None:
        rank, world_size = 0, 1
        dist = sys.modules.get("torch.distributed")
        if dist is not None and dist.is_available() and dist.is_initialized():
            rank, world_size = int(dist.get_rank()), int(dist.get_world_size())
        else:
            env_rank, env_world = _env_int("RANK"), _env_int("WORLD_SIZE")
            if env_rank is not None and env_world is not None:
                rank, world_size = env_rank, env_world
    if world_size < 1 or not 0 <= rank < world_size:
        raise ValueError(
            f"rank must be in [0, world_size), got rank={rank}, world_size={world_size}"
        )
    return rank, world_size


def worker_info() -> tuple[int, int]:
    """Return ``(worker_id, num_workers)`` of the PyTorch DataLoader worker running this code, or ``(0, 1)``.

    Never imports torch: if it is not imported, this cannot be a DataLoader worker.
    """
    data = sys.modules.get("torch.utils.data")
    info = data.get_worker_info() if data is not None else None
    if info is None:
        return 0, 1
    return int(info.id), int(info.num_workers)


def shard_of(rank: int, world_size: int, worker: int, num_workers: int) -> tuple[int, int]:
    """Return ``(shard, num_shards)`` for a rank and a worker."""
    return rank * num_workers + worker, world_size * num_workers
