"""Data pipelines over record files: sharding, shuffling, batching, resuming, and a loader of their own.

Read many files as one stream, split between distributed ranks and DataLoader workers so that every record
is seen exactly once per epoch, shuffled deterministically from a seed, and resumable mid-epoch::

    from recordkit.data import Dataset, mix

    ds = Dataset("train-*.tfrecord", seed=0).shuffle(4096).map(decode).filter(keep).batch(32)
    for epoch in range(10):
        ds.set_epoch(epoch)
        for batch in ds:
            ...

:func:`mix` samples from several datasets with weights, deterministically and resumably.

:func:`loader` reads a pipeline in worker processes and hands its batches to the training loop through
shared memory, numpy arrays without a copy, with epochs and a resumable position; it needs no PyTorch.

With PyTorch, :func:`recordkit.integrations.torch.dataloader` does the same and hands out tensors.

:mod:`recordkit.data.loading` holds what the loader is built of, for a loader of another framework.
"""

from __future__ import annotations

from typing import Any

from recordkit.data._dataset import Dataset
from recordkit.data._loader import Loader, loader
from recordkit.data._mix import mix
from recordkit.support.moved import moved_attribute

__all__ = [
    "Dataset",
    "Loader",
    "loader",
    "mix",
]


def __getattr__(name: str) -> Any:
    """A name that moved away since 0.2 (``part_files``), with a warning naming its new home (PEP 562)."""
    return moved_attribute(__name__, name)
