"""Contenders for the FFRecord side-by-side benchmarks: recordkit against HFAiLab's C++ ffrecord.

The C++ reference runs in a worker process whose ``PYTHONPATH`` holds the build that
:mod:`reference_ffrecord` made; its contenders return ``None`` (reported as skipped) when it is absent.

Batched reads come in two loops, because a batch's memory is what separates them:

* ``keep``: each batch is held until the next one has been read, as a training step holds its batch;
* ``drop``: each batch is dropped as soon as it is read, so its memory is freed before the next is allocated
  (the case where glibc used to hand the memory back to the kernel and fault it in again).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

import numpy as np

Pass = Callable[[], int]
BATCH = 256

# What each API name opens: a function of the path returning ``read(indices)``.
READERS: dict[str, Callable[[str], Callable[[list[int]], list[Any]]]] = {
    "rk.open": lambda path: _recordkit_open(path).read,
    "rk.open zero_copy": lambda path: _recordkit_open(path, zero_copy=True).read,
    "recordkit.compat.ffrecord": lambda path: _recordkit_drop_in(path).read,
    "ffrecord C++": lambda path: _reference(path).read,
}


def _recordkit_open(path: str, zero_copy: bool = False) -> Any:
    import recordkit as rk

    return rk.open(path, zero_copy=zero_copy)


def _recordkit_drop_in(path: str) -> Any:
    from recordkit.compat.ffrecord import FileReader

    return FileReader(path, check_data=True)


def _reference(path: str) -> Any:
    import ffrecord

    return ffrecord.FileReader(path, check_data=True)


def _reference_installed() -> bool:
    try:
        import ffrecord._ffrecord_cpp  # noqa: F401
    except ImportError:
        return False
    return True


def _batches(count: int, order: str) -> list[list[int]]:
    if order == "random":
        indexes = np.random.default_rng(1).permutation(count).tolist()
    else:
        indexes = list(range(count))
    return [indexes[i : i + BATCH] for i in range(0, count, BATCH)]


def read_batches(
    api: str, path: str, count: int, order: str = "random", loop: str = "keep"
) -> Pass | None:
    """``read(256)`` over every record once per pass, with the API named ``api``."""
    if api == "ffrecord C++" and not _reference_installed():
        return None
    read = READERS[api](path)
    batches = _batches(count, order)

    def keep() -> int:
        total = 0
        held = None
        for group in batches:
            held = read(group)
            total += len(held)
        del held
        return total

    def drop() -> int:
        total = 0
        for group in batches:
            total += len(read(group))
        return total

    return keep if loop == "keep" else drop


def write(api: str, directory: str, count: int, size: int) -> Pass | None:
    """Write ``count`` records of ``size`` bytes into a fresh file per pass."""
    if api == "ffrecord C++" and not _reference_installed():
        return None
    os.makedirs(directory, exist_ok=True)
    blob = np.random.default_rng(2).bytes(count * size)
    records = [blob[i * size : (i + 1) * size] for i in range(count)]
    path = os.path.join(directory, f"{api.replace(' ', '_').replace('.', '_')}.ffr")

    def run() -> int:
        if api == "rk.open (no n)":
            import recordkit as rk

            with rk.open(path, "w", format="ffrecord") as writer:
                writer.write_many(records)
        else:
            if api == "ffrecord C++":
                from ffrecord import FileWriter
            else:
                from recordkit.compat.ffrecord import FileWriter
            writer = FileWriter(path, count)
            for record in records:
                writer.write_one(record)
            writer.close()
        os.remove(path)
        return count

    return run


def _stack(samples: list[Any]) -> Any:
    """One uint8 tensor of shape (batch, record size) from a batch of equal-sized records."""
    import torch

    joined = bytearray(b"".join(samples))  # writable: torch warns about read-only arrays
    return torch.from_numpy(np.frombuffer(joined, np.uint8).reshape(len(samples), -1))


def _stack_batch(indices: list[int], data: list[Any]) -> Any:
    return _stack(data)


def _identity(batch: Any) -> Any:
    return batch


def _reference_dataset(path: str) -> Any:
    import ffrecord.torch

    class Raw(ffrecord.torch.Dataset):  # type: ignore[misc]
        def __getitem__(self, indices: list[int]) -> Any:
            return self.reader.read(indices)

    return Raw(path, check_data=True)


def dataloader_epoch(api: str, path: str, workers: int) -> Pass | None:
    """One shuffled epoch of a DataLoader delivering (256, size) uint8 tensors of the raw records."""
    try:
        import torch  # noqa: F401
    except ImportError:
        return None
    if api == "ffrecord C++":
        if not _reference_installed():
            return None
        import ffrecord.torch

        loader: Any = ffrecord.torch.DataLoader(
            _reference_dataset(path),
            batch_size=BATCH,
            shuffle=True,
            num_workers=workers,
            collate_fn=_stack,
            persistent_workers=workers > 0,
        )
    else:
        from recordkit.integrations.torch import MapDataset, dataloader

        loader = dataloader(
            MapDataset(path, process=_stack_batch),
            batch_size=BATCH,
            shuffle=True,
            num_workers=workers,
            collate_fn=_identity,
        )

    def run() -> int:
        return sum(len(batch) for batch in loader)

    return run
