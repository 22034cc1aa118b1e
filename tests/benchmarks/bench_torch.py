"""Contenders for the end-to-end benchmark: one epoch of a PyTorch ``DataLoader`` over a TFRecord file.

Both loaders read the Examples of ``bench_parse`` (an int64 ``label``, 784 float32 ``image`` values) and
deliver batches of 256 as tensors, in the loading process (``num_workers=0``: on a 2-core machine worker
processes would mostly measure scheduling):

* ``recordkit.data``: ``Dataset(path).batch(256).map(decode)`` with :func:`recordkit.parse_examples`, through
  :func:`recordkit.integrations.torch.dataloader`;
* vahidk ``tfrecord.torch.TFRecordDataset`` with a description, through ``torch.utils.data.DataLoader``
  (``batch_size=256``, default collate).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

BATCH = 256


def _decode(batch: list[bytes]) -> dict[str, Any]:
    import numpy as np
    import torch

    import recordkit as rk

    spec = {"label": rk.FixedLen((), np.int64), "image": rk.FixedLen((784,), np.float32)}
    columns = rk.parse_examples(batch, spec)
    return {name: torch.from_numpy(values) for name, values in columns.items()}


def recordkit_epoch(path: str) -> Callable[[], int] | None:
    """One epoch of ``recordkit.integrations.torch.dataloader`` over ``path``."""
    try:
        import torch  # noqa: F401
    except ImportError:
        return None
    from recordkit.data import Dataset
    from recordkit.integrations.torch import dataloader

    loader = dataloader(Dataset(path).batch(BATCH).map(_decode))

    def run() -> int:
        count = 0
        for batch in loader:
            count += len(batch["label"])
        return count

    return run


def vahidk_epoch(path: str) -> Callable[[], int] | None:
    """One epoch of vahidk's ``TFRecordDataset`` in a ``torch.utils.data.DataLoader``."""
    try:
        import torch
        from tfrecord.torch.dataset import TFRecordDataset
    except ImportError:
        return None
    dataset = TFRecordDataset(path, None, {"label": "int", "image": "float"})
    loader = torch.utils.data.DataLoader(dataset, batch_size=BATCH)

    def run() -> int:
        count = 0
        for batch in loader:
            count += len(batch["label"])
        return count

    return run
