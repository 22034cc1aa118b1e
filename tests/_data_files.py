"""Small record files for the pipeline tests, written by recordkit's own writers.

Every record is unique (``b"<file>:<index>"``), so a test can check that a set of shards read each record
exactly once by comparing multisets.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

import recordkit as rk


def write(path: Path, records: list[bytes], **options: object) -> Path:
    """Write ``records`` to ``path`` (format and compression from the suffix)."""
    with rk.open(path, "w", **options) as writer:  # type: ignore[arg-type]
        for record in records:
            writer.write(record)
    return path


def write_label_examples(folder: Path, sizes: list[int]) -> list[str]:
    """Write one TFRecord file of Examples per size; record ``i`` overall has label ``i`` and
    ``x = [i, 2i, 3i]`` (float32). Return the paths."""
    paths, label = [], 0
    for i, n in enumerate(sizes):
        records = []
        for _ in range(n):
            x = np.array([label, 2 * label, 3 * label], np.float32)
            records.append(rk.encode_example({"x": x, "label": label}))
            label += 1
        paths.append(str(write(folder / f"part-{i}.tfrecord", records)))
    return paths


def make_files(
    folder: Path, sizes: list[int], suffixes: list[str]
) -> tuple[list[str], list[bytes]]:
    """Write one file per size, cycling through ``suffixes``; return the paths and every record."""
    paths: list[str] = []
    everything: list[bytes] = []
    for i, n in enumerate(sizes):
        suffix = suffixes[i % len(suffixes)]
        records = [f"{i}:{j}".encode() for j in range(n)]
        paths.append(str(write(folder / f"file-{i:03d}{suffix}", records)))
        everything.extend(records)
    return paths, everything


def write_tfds_directory(
    directory: Path, files: dict[str, list[bytes]], splits: dict[str, list[int]]
) -> Path:
    """Write a tensorflow-datasets directory named ``toy``: the shard files, then a ``dataset_info.json``
    that lists each split's shard lengths (files it does not describe stand for leftovers)."""
    directory.mkdir()
    for name, records in files.items():
        with rk.open(directory / name, "w", format="tfrecord") as writer:
            writer.write_many(records)
    info = {
        "name": "toy",
        "version": "1.0.0",
        "fileFormat": "tfrecord",
        "splits": [
            {"name": name, "shardLengths": [str(n) for n in lengths]}
            for name, lengths in splits.items()
        ],
    }
    (directory / "dataset_info.json").write_text(json.dumps(info), encoding="utf-8")
    return directory
