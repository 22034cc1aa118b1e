"""A reader with the parameters of OneFlow's ``OFRecordReader``, which ends its epochs."""

from __future__ import annotations

import os
import secrets
from collections.abc import Iterator, Mapping
from typing import Any

from recordkit.data import Dataset
from recordkit.io import find_dataset, resolve_sources
from recordkit.io.sources import source_exists

__all__ = ["OFRecordReader", "part_files"]


def part_files(
    data_dir: str | os.PathLike[str],
    data_part_num: int,
    part_name_prefix: str = "part-",
    part_name_suffix_length: int = -1,
) -> list[str]:
    """Return OneFlow's part file names: ``data_dir/prefix + str(i).zfill(suffix_length)``.

    Parameters
    ----------
    data_dir
        The folder holding the parts (a local path or an fsspec URL).
    data_part_num
        How many parts there are; parts ``0 .. data_part_num - 1`` are returned in order.
    part_name_prefix
        What each name starts with (OneFlow's default is ``"part-"``).
    part_name_suffix_length
        The width the part number is zero-padded to; ``-1`` (the default) means no padding, as in OneFlow.

    Returns
    -------
    list of str
        The paths of the parts.

    Raises
    ------
    FileNotFoundError
        A part is missing; the message names it.
    ValueError
        ``data_part_num`` is below 1 or ``part_name_suffix_length`` below -1.

    Examples
    --------
    >>> import tempfile, pathlib
    >>> d = tempfile.mkdtemp()
    >>> for name in ("part-00000", "part-00001"):
    ...     _ = (pathlib.Path(d) / name).write_bytes(b"")
    >>> [os.path.basename(p) for p in part_files(d, 2, part_name_suffix_length=5)]
    ['part-00000', 'part-00001']
    """
    if data_part_num < 1:
        raise ValueError(f"data_part_num must be at least 1, not {data_part_num}")
    if part_name_suffix_length < -1:
        raise ValueError(
            f"part_name_suffix_length must be -1 or more, not {part_name_suffix_length}"
        )
    folder = os.fspath(data_dir).rstrip("/")
    paths = []
    for i in range(data_part_num):
        number = str(i) if part_name_suffix_length == -1 else str(i).zfill(part_name_suffix_length)
        path = f"{folder}/{part_name_prefix}{number}"
        if not source_exists(path):
            raise FileNotFoundError(f"OFRecord part {i} is missing: {path}")
        paths.append(path)
    return paths


class OFRecordReader:
    """Batches of raw OFRecord payloads from OneFlow part files, with OneFlow's parameter names.

    Reads ``data_dir/part_name_prefix + str(i).zfill(part_name_suffix_length)`` for ``i`` in
    ``range(data_part_num)`` and yields lists of ``bytes`` (serialized ``oneflow.OFRecord`` messages), ready
    for :func:`recordkit.compat.oneflow.raw_decoder` or :func:`recordkit.decode.parsing.parse_ofrecords`.

    Unlike OneFlow's reader, an iteration ends with the epoch (the last batch may be short unless
    ``drop_last``); pass ``cycle=True`` to go on forever as OneFlow does. Each epoch is shuffled afresh.
    Records are split between distributed ranks (``RANK``/``WORLD_SIZE`` or ``torch.distributed``) so that
    each is read once per epoch, even when there are fewer parts than ranks.

    Parameters
    ----------
    data_dir
        The folder of the part files (local or an fsspec URL). When it holds a manifest (a directory
        ``recordkit convert`` or :class:`~recordkit.ShardWriter` wrote), every part named must be one of
        the shards it lists (a part left over from an earlier write raises
        :class:`~recordkit.errors.ManifestError`), and each is checked against its entry as
        :func:`recordkit.open` checks a dataset's shards.
    batch_size
        Records per batch.
    data_part_num
        How many part files there are.
    part_name_prefix
        What the part names start with.
    part_name_suffix_length
        The width part numbers are zero-padded to; ``-1`` means no padding.
    random_shuffle
        Shuffle the records through a buffer of ``shuffle_buffer_size``.
    shuffle_buffer_size
        The size of that buffer.
    shuffle_after_epoch
        Shuffle the order of the part files each epoch.
    seed
        The seed of the shuffles; ``-1`` (OneFlow's default) draws a random one, kept in :attr:`seed` and in
        :meth:`state_dict` so a run can still be resumed.
    cycle
        Repeat epochs forever instead of ending the iteration with the epoch.
    drop_last
        Leave out the last batch of an epoch when it is short.
    rank, world_size
        This process among the distributed ranks (see :class:`~recordkit.data.Dataset`).

    Examples
    --------
    >>> reader = OFRecordReader("data/", batch_size=32, data_part_num=4,  # doctest: +SKIP
    ...                         part_name_suffix_length=5, random_shuffle=True, seed=0)
    >>> for batch in reader:  # doctest: +SKIP
    ...     images = raw_decoder(batch, "images", shape=(784,), dtype=np.float32)
    """

    def __init__(
        self,
        data_dir: str | os.PathLike[str],
        batch_size: int = 1,
        data_part_num: int = 1,
        part_name_prefix: str = "part-",
        part_name_suffix_length: int = -1,
        random_shuffle: bool = False,
        shuffle_buffer_size: int = 1024,
        shuffle_after_epoch: bool = False,
        seed: int = -1,
        *,
        cycle: bool = False,
        drop_last: bool = False,
        rank: int | None = None,
        world_size: int | None = None,
    ) -> None:
        if shuffle_buffer_size < 1:
            raise ValueError(f"shuffle_buffer_size must be positive, not {shuffle_buffer_size}")
        self._random_seed = seed == -1
        self.seed = secrets.randbits(63) if self._random_seed else int(seed)
        files = part_files(data_dir, data_part_num, part_name_prefix, part_name_suffix_length)
        parts = resolve_sources(files, format="ofrecord")
        if find_dataset(data_dir, all_splits=True) is not None:
            # Read as the manifest describes the directory: every part named must be one of its shards,
            # checked against its entry as recordkit.open checks it.
            parts = resolve_sources(data_dir, format="ofrecord", all_splits=True).only(files)

        def pipeline(seed: int) -> Dataset:
            ds = Dataset(parts, seed=seed, rank=rank, world_size=world_size)
            if random_shuffle or shuffle_after_epoch:
                buffer = shuffle_buffer_size if random_shuffle else 0
                ds = ds.shuffle(buffer, files=shuffle_after_epoch)
            ds = ds.batch(batch_size, drop_last=drop_last)
            return ds.repeat(None) if cycle else ds

        self._pipeline = pipeline
        self._dataset = pipeline(self.seed)
        self.batch_size = batch_size

    @property
    def files(self) -> list[str]:
        """The part files, in order."""
        return self._dataset.files

    @property
    def epoch(self) -> int:
        """The epoch the next iteration starts in."""
        return self._dataset.epoch

    def __iter__(self) -> Iterator[list[bytes]]:
        return iter(self._dataset)

    def set_epoch(self, epoch: int) -> None:
        """Start the next iteration at the beginning of ``epoch``."""
        self._dataset.set_epoch(epoch)

    def state_dict(self) -> dict[str, Any]:
        """The position of the iteration (see :meth:`recordkit.data.Dataset.state_dict`)."""
        return self._dataset.state_dict()

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Continue from a saved position.

        A reader made with ``seed=-1`` takes the saved seed; one made with an explicit seed must match it.
        """
        if self._random_seed and isinstance(state.get("seed"), int):
            self.seed = state["seed"]
            self._dataset = self._pipeline(self.seed)
        self._dataset.load_state_dict(state)
