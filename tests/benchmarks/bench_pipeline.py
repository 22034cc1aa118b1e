"""Contenders for the input-pipeline benchmark: TFRecord shards of Examples to parsed batches, end to end.

The data (:func:`write_data`) are 1 KiB ``tf.train.Example``s (an int64 ``label``, 256 float32 ``x``, an int64
``id``) in 8 TFRecord shards, an FFRecord copy of the same records in 8 shards, and 100 KiB Examples (a
``bytes`` feature ``data`` and an int64 ``id``) in 8 TFRecord shards. Every contender delivers every record
of its files once per pass, as batches; a pass returns the number of records delivered.

* the plain loop: ``for record in rk.open(file)`` over the files, batches cut by hand, then
  :func:`recordkit.parse_examples` (what any pipeline adds its cost to);
* ``recordkit.data.Dataset`` pipelines, in the process that times them;
* the plain global-shuffle loop: a permutation of all records, ``reader.read(order[i:i + 256])`` over one
  ``rk.open(files)``, then parse (what ``Dataset(files).shuffle()`` does, without the pipeline);
* tf.data's usual TFRecord pipeline (interleave, shuffle buffer, batch, ``parse_example``, AUTOTUNE), run in
  the TensorFlow worker;
* loaders with worker processes: ``recordkit.integrations.torch.dataloader`` (``to="torch"`` and ``"numpy"``), the
  torch-free ``recordkit.data.loader`` where the installed recordkit has it, a plain torch ``DataLoader``
  over an ``IterableDataset`` running the plain loop, torch's ceiling (workers that yield ready-made tensors
  of the same shapes), and ``dataloader(MapDataset(...), shuffle=True)`` over the FFRecord copy.

This module imports recordkit and torch only inside the contenders, since the TensorFlow worker imports it
too (for :func:`tf_data`).
"""

from __future__ import annotations

import functools
import itertools
import os
from collections.abc import Callable, Iterator
from typing import Any

Pass = Callable[[], int]
BATCH = 256
SHARDS = 8
SMALL_DIR, FFRECORD_DIR, LARGE_DIR = "pipeline-1k", "pipeline-1k-ffr", "pipeline-100k"
LARGE_BYTES = 100 * 1024


def files(directory: str) -> list[str]:
    """The shards in ``directory``, in name order."""
    return sorted(os.path.join(directory, name) for name in os.listdir(directory))


def write_data(directory: str, small: int, large: int) -> dict[str, str]:
    """Write the three sets of shards under ``directory``; return their folders by name."""
    import numpy as np

    import recordkit as rk

    rng = np.random.default_rng(7)
    folders = {name: os.path.join(directory, name) for name in (SMALL_DIR, FFRECORD_DIR, LARGE_DIR)}
    for folder in folders.values():
        os.makedirs(folder, exist_ok=True)
    for shard in range(SHARDS):
        ids = np.arange(shard * small // SHARDS, (shard + 1) * small // SHARDS, dtype=np.int64)
        x = rng.random((len(ids), 256), dtype=np.float32)
        # One at a time: encode_examples would be faster but needs pyarrow, which this group does not.
        records = [
            rk.encode_example({"label": int(i % 10), "x": row, "id": int(i)})
            for i, row in zip(ids, x, strict=True)
        ]
        for folder, suffix in ((folders[SMALL_DIR], "tfrecord"), (folders[FFRECORD_DIR], "ffr")):
            with rk.open(os.path.join(folder, f"part-{shard:02d}.{suffix}"), "w") as writer:
                writer.write_many(records)
        del records, x
        big = range(shard * large // SHARDS, (shard + 1) * large // SHARDS)
        with rk.open(os.path.join(folders[LARGE_DIR], f"part-{shard:02d}.tfrecord"), "w") as writer:
            for i in big:
                writer.write(rk.encode_example({"data": rng.bytes(LARGE_BYTES), "id": i}))
    return folders


def record_size(directory: str, path: str | None = None) -> int:
    """The mean size of the first records of ``path``, by default ``directory``'s first shard, in bytes."""
    import recordkit as rk

    with rk.open(path or files(directory)[0]) as reader:
        sizes = [len(record) for record in itertools.islice(reader, 256)]
    return round(sum(sizes) / len(sizes))


# -- parsing: module-level functions, so that worker processes can unpickle them --------------------


@functools.cache
def _spec() -> dict[str, Any]:
    import numpy as np

    import recordkit as rk

    return {
        "label": rk.FixedLen((), np.int64),
        "x": rk.FixedLen((256,), np.float32),
        "id": rk.FixedLen((), np.int64),
    }


def parse(batch: list[bytes]) -> dict[str, Any]:
    """A batch of serialized Examples as numpy columns."""
    import recordkit as rk

    return rk.parse_examples(batch, _spec())


def parse_indexed(indices: list[int], data: list[bytes]) -> dict[str, Any]:
    """``MapDataset``'s ``process``: the batch read for ``indices`` as numpy columns."""
    return parse(data)


def _count(batch: Any) -> int:
    """The number of records in a batch: a dict of columns or a list of records."""
    if isinstance(batch, dict):
        return len(batch["id"])
    return len(batch)


def _plain_batches(paths: list[str], size: int) -> Iterator[list[bytes]]:
    import recordkit as rk

    batch: list[bytes] = []
    for path in paths:
        with rk.open(path) as reader:
            for record in reader:
                batch.append(record)
                if len(batch) == size:
                    yield batch
                    batch = []
    if batch:
        yield batch


def _dataset(
    directory: str, buffer: int | None, global_shuffle: bool, batch: int, parsed: bool
) -> Any:
    from recordkit.data import Dataset

    dataset = Dataset(files(directory), seed=0)
    if global_shuffle:
        dataset = dataset.shuffle()
    elif buffer is not None:
        dataset = dataset.shuffle(buffer)
    dataset = dataset.batch(batch)
    return dataset.map(parse) if parsed else dataset


def _consume(iterable: Any) -> Pass:
    def run() -> int:
        return sum(_count(batch) for batch in iterable)

    return run


# -- in one process ----------------------------------------------------------------------------------


def plain_loop(directory: str, batch: int = BATCH, parsed: bool = True) -> Pass:
    """``for record in rk.open(file)`` over the files, batches of ``batch``, parsed when ``parsed``."""
    paths = files(directory)

    def run() -> int:
        if parsed:
            return sum(len(parse(group)["id"]) for group in _plain_batches(paths, batch))
        return sum(len(group) for group in _plain_batches(paths, batch))

    return run


def plain_permutation(directory: str) -> Pass:
    """A new permutation of every record per pass, ``read`` 256 indexes at a time from ``rk.open(files)``."""
    import numpy as np

    import recordkit as rk

    paths = files(directory)
    rounds = itertools.count()

    def run() -> int:
        delivered = 0
        with rk.open(paths) as reader:
            total = len(reader)
            order = np.random.default_rng(next(rounds)).permutation(total)
            for start in range(0, total, BATCH):
                delivered += len(parse(reader.read(order[start : start + BATCH].tolist()))["id"])
        return delivered

    return run


def dataset(
    directory: str,
    buffer: int | None = None,
    global_shuffle: bool = False,
    batch: int = BATCH,
    parsed: bool = True,
) -> Pass:
    """``Dataset(files)[.shuffle(buffer) | .shuffle()].batch(batch)[.map(parse)]``, iterated in-process."""
    return _consume(_dataset(directory, buffer, global_shuffle, batch, parsed))


def tf_data(directory: str) -> Pass | None:
    """tf.data: shard order shuffled, 8 shards interleaved, shuffle buffer 1024, batch, parse, prefetch."""
    try:
        import tensorflow as tf
    except ImportError:
        return None
    spec = {
        "label": tf.io.FixedLenFeature([], tf.int64),
        "x": tf.io.FixedLenFeature([256], tf.float32),
        "id": tf.io.FixedLenFeature([], tf.int64),
    }
    auto = tf.data.AUTOTUNE
    pipeline = (
        tf.data.Dataset.from_tensor_slices(files(directory))
        .shuffle(SHARDS)
        .interleave(tf.data.TFRecordDataset, cycle_length=SHARDS, num_parallel_calls=auto)
        .shuffle(1024)
        .batch(BATCH)
        .map(lambda b: tf.io.parse_example(b, spec), num_parallel_calls=auto)
        .prefetch(auto)
    )

    def run() -> int:
        return sum(len(batch["id"]) for batch in pipeline.as_numpy_iterator())

    return run


# -- one file in one process: read + parse, against tf.data's plain pipeline ------------------------------

MNIST_DIR = "read-parse"


def write_mnist_like(directory: str, count: int) -> str:
    """``count`` Examples of ``bench_parse`` (int64 ``label``, 784 float32 ``image``, 32-byte ``raw``) in
    one TFRecord file under ``directory``; return its path."""
    import bench_parse

    import recordkit as rk

    path = os.path.join(directory, f"{MNIST_DIR}.tfrecord")
    with rk.open(path, "w") as writer:
        for start in range(0, count, 10_000):
            writer.write_many(bench_parse.make_records(min(10_000, count - start), seed=start))
    return path


@functools.cache
def _mnist_spec() -> dict[str, Any]:
    import bench_parse

    return bench_parse.recordkit_spec()


def parse_mnist(batch: list[bytes]) -> dict[str, Any]:
    """A batch of ``bench_parse``'s Examples as numpy columns."""
    import recordkit as rk

    return rk.parse_examples(batch, _mnist_spec())


def read_parse_plain(path: str) -> Pass:
    """``rk.open(path)``, batches of 256 cut by hand, :func:`recordkit.parse_examples`."""
    import recordkit as rk

    def run() -> int:
        delivered = 0
        with rk.open(path) as reader:
            batch: list[bytes] = []
            for record in reader:
                batch.append(record)
                if len(batch) == BATCH:
                    delivered += len(parse_mnist(batch)["label"])
                    batch = []
            if batch:
                delivered += len(parse_mnist(batch)["label"])
        return delivered

    return run


def read_parse_dataset(path: str) -> Pass:
    """``Dataset(path).batch(256).map(parse)``, iterated in-process with the default settings."""
    from recordkit.data import Dataset

    pipeline = Dataset(path).batch(BATCH).map(parse_mnist)
    return lambda: sum(len(batch["label"]) for batch in pipeline)


def read_parse_tf(path: str) -> Pass | None:
    """``tf.data.TFRecordDataset(path).batch(256).map(parse_example)``, read with ``as_numpy_iterator``."""
    try:
        import tensorflow as tf
    except ImportError:
        return None
    import bench_parse

    spec = bench_parse.tensorflow_spec(tf)
    pipeline = (
        tf.data.TFRecordDataset(path).batch(BATCH).map(lambda b: tf.io.parse_example(b, spec))
    )
    return lambda: sum(len(batch["label"]) for batch in pipeline.as_numpy_iterator())


# -- loaders with worker processes -------------------------------------------------------------------


def _torch_installed() -> bool:
    try:
        import torch  # noqa: F401
    except ImportError:
        return False
    return True


def rk_dataloader(
    directory: str,
    workers: int,
    to: str = "torch",
    buffer: int = 1024,
    batch: int = BATCH,
    parsed: bool = True,
) -> Pass | None:
    """``recordkit.integrations.torch.dataloader(Dataset(files).shuffle(buffer).batch(batch)[.map(parse)])``."""
    if not _torch_installed():
        return None
    from recordkit.integrations.torch import dataloader

    source = _dataset(directory, buffer, False, batch, parsed)
    return _consume(dataloader(source, num_workers=workers, to=to))


def rk_loader(
    directory: str, workers: int, buffer: int = 1024, batch: int = BATCH, parsed: bool = True
) -> Pass:
    """``recordkit.data.loader(Dataset(...), num_workers=workers)``: numpy out, no torch needed."""
    from recordkit.data import loader

    return _consume(loader(_dataset(directory, buffer, False, batch, parsed), num_workers=workers))


def torch_own(
    directory: str, workers: int, buffer: int = 1024, batch: int = BATCH, parsed: bool = True
) -> Pass | None:
    """torch's own ``DataLoader(torch_dataset(ds), batch_size=None)`` over the same pipeline (tensors out)."""
    if not _torch_installed():
        return None
    from torch.utils.data import DataLoader

    from recordkit.integrations.torch import torch_dataset

    source = torch_dataset(_dataset(directory, buffer, False, batch, parsed))
    return _consume(DataLoader(source, batch_size=None, num_workers=workers))


def torch_plain(directory: str, workers: int) -> Pass | None:
    """A torch ``DataLoader(batch_size=None)`` over an ``IterableDataset`` running the plain loop."""
    if not _torch_installed():
        return None
    from torch.utils.data import DataLoader

    return _consume(
        DataLoader(
            _torch_datasets()["PlainBatches"](files(directory)),
            batch_size=None,
            num_workers=workers,
        )
    )


def torch_ceiling(directory: str, workers: int) -> Pass | None:
    """A torch ``DataLoader`` whose workers yield ready-made tensors of the parsed batches' shapes."""
    if not _torch_installed():
        return None
    from torch.utils.data import DataLoader

    import recordkit as rk

    with rk.open(files(directory)) as reader:
        count = len(reader)
    return _consume(
        DataLoader(_torch_datasets()["ReadyBatches"](count), batch_size=None, num_workers=workers)
    )


def ffrecord_loader(directory: str, workers: int) -> Pass | None:
    """``dataloader(MapDataset(files, process=parse_indexed), batch_size=256, shuffle=True)``."""
    if not _torch_installed():
        return None
    from recordkit.integrations.torch import MapDataset, dataloader

    source = MapDataset(files(directory), process=parse_indexed)
    return _consume(dataloader(source, batch_size=BATCH, shuffle=True, num_workers=workers))


@functools.cache
def _torch_datasets() -> dict[str, type]:
    """The ``IterableDataset`` classes, made on first use so that importing this module needs no torch."""
    import numpy as np
    import torch
    from torch.utils.data import IterableDataset, get_worker_info

    def share() -> tuple[int, int]:
        info = get_worker_info()
        return (info.id, info.num_workers) if info is not None else (0, 1)

    class PlainBatches(IterableDataset):  # type: ignore[type-arg]
        """The plain loop as a torch dataset: worker ``w`` of ``k`` reads files ``w, w + k, ...``."""

        def __init__(self, paths: list[str]) -> None:
            self.paths = paths

        def __iter__(self) -> Iterator[dict[str, Any]]:
            worker, workers = share()
            for group in _plain_batches(self.paths[worker::workers], BATCH):
                columns = parse(group)
                yield {name: torch.from_numpy(values) for name, values in columns.items()}

    class ReadyBatches(IterableDataset):  # type: ignore[type-arg]
        """``count`` records in batches of 256 as fresh tensors, made without reading anything."""

        def __init__(self, count: int) -> None:
            self.count = count

        def __iter__(self) -> Iterator[dict[str, Any]]:
            worker, workers = share()
            x = np.random.default_rng(worker).random((BATCH, 256), dtype=np.float32)
            for start in range(worker * BATCH, self.count, workers * BATCH):
                n = min(BATCH, self.count - start)
                yield {
                    "label": torch.arange(n),
                    "x": torch.from_numpy(x[:n].copy()),
                    "id": torch.arange(start, start + n),
                }

    made: dict[str, type] = {"PlainBatches": PlainBatches, "ReadyBatches": ReadyBatches}
    for name, cls in made.items():
        cls.__module__, cls.__qualname__ = __name__, name  # picklable as this module's attributes
    return made


def __getattr__(name: str) -> Any:
    """``PlainBatches`` and ``ReadyBatches``, defined on first access (they need torch)."""
    if name in ("PlainBatches", "ReadyBatches"):
        return _torch_datasets()[name]
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
