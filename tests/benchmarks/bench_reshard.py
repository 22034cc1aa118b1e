"""Contenders for the reshard benchmark: a dataset of 8 TFRecord shards of 1 KiB records written again as 3.

:func:`write_data` writes the dataset (with ``ShardWriter``: sidecar indexes and a manifest). Each pass writes
into a fresh directory and returns the number of records: ``cp -r`` of the dataset's directory (the floor:
the same bytes, copied by the kernel), then :func:`recordkit.datasets.reshard` in order and shuffled.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Callable

Pass = Callable[[], int]
SHARDS, OUT_SHARDS, RECORD = 8, 3, 1024


def write_data(directory: str, count: int) -> str:
    """Write ``count`` records of 1 KiB as a dataset of 8 shards in ``directory``/reshard-1k."""
    import recordkit as rk

    folder = os.path.join(directory, "reshard-1k")
    block = os.urandom(RECORD + 8)
    with rk.ShardWriter(
        os.path.join(folder, "part-{shard:05d}-of-{num_shards:05d}.tfrecord"),
        max_records=-(-count // SHARDS),
    ) as writer:
        writer.write_many(
            block[i % 8 : i % 8 + RECORD - 4] + i.to_bytes(4, "little") for i in range(count)
        )
    return folder


def copy(directory: str, out: str, count: int) -> Pass:
    """``cp -r`` of the dataset directory."""

    def run() -> int:
        shutil.rmtree(out, ignore_errors=True)
        subprocess.run(["cp", "-r", directory, out], check=True)
        return count

    return run


def sha256_floor(directory: str, count: int) -> Pass:
    """The SHA-256 of every file of the dataset, and nothing else: what the manifest of any reshard costs
    (each shard's SHA-256), without reading, checking or writing a record."""
    import hashlib

    def run() -> int:
        for name in sorted(os.listdir(directory)):
            digest = hashlib.sha256()
            with open(os.path.join(directory, name), "rb", buffering=0) as file:
                while block := file.read(16 << 20):
                    digest.update(block)
        return count

    return run


def reshard(directory: str, out: str, shuffle: bool) -> Pass:
    """``recordkit.datasets.reshard(directory, out, shards=3, shuffle=shuffle)``."""
    from recordkit.datasets import reshard as run_reshard

    def run() -> int:
        shutil.rmtree(out, ignore_errors=True)
        manifest = run_reshard(directory, out, shards=OUT_SHARDS, shuffle=shuffle, seed=1)
        return sum(shard.records for shard in manifest.shards)

    return run
