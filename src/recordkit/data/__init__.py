"""Data pipelines over record files: sharding, shuffling, batching, resuming, PyTorch and OneFlow-style loaders.

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

With PyTorch, :func:`dataloader` builds a ``DataLoader`` that splits the work between its worker processes
and can save and restore its position. PyTorch is imported only when one of ``torch_dataset``,
``dataloader``, ``MapDataset`` or ``RecordLoader`` is first used.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from recordkit.data._dataset import Dataset
from recordkit.data._loader import Loader, loader
from recordkit.data._mix import mix
from recordkit.data._oneflow import OFRecordReader
from recordkit.data._sources import expand_sources, part_files

if TYPE_CHECKING:
    from recordkit.data.torch import MapDataset, RecordLoader, dataloader, torch_dataset

__all__ = [
    "Dataset",
    "Loader",
    "MapDataset",
    "OFRecordReader",
    "RecordLoader",
    "dataloader",
    "expand_sources",
    "loader",
    "mix",
    "part_files",
    "torch_dataset",
]

_TORCH_NAMES = frozenset({"MapDataset", "RecordLoader", "dataloader", "torch_dataset"})


def __getattr__(name: str) -> Any:
    """Load the PyTorch glue on first use of one of its names (PEP 562)."""
    if name in _TORCH_NAMES:
        value = getattr(importlib.import_module("recordkit.data.torch"), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'recordkit.data' has no attribute {name!r}")


def __dir__() -> list[str]:
    """List the public names, including the ones not loaded yet."""
    return sorted(set(globals()) | set(__all__))
