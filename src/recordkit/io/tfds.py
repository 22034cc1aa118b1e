"""tensorflow-datasets (TFDS) directories, read without TensorFlow or tfds.

A dataset prepared by TFDS is a directory (``~/tensorflow_datasets/mnist/3.0.1/``) holding
``dataset_info.json``, ``features.json`` and the shard files. ``dataset_info.json`` is TFDS's ``DatasetInfo``
protobuf message in protobuf's JSON mapping: field names in lowerCamelCase (the original snake_case names
are accepted too, as protobuf's parser accepts them), 64-bit integers as decimal strings. The fields used
here:

``name``, ``version``
    The dataset's name (``{DATASET}`` in file names) and version (``"major.minor.patch"``).
``fileFormat``
    ``"tfrecord"`` or ``"array_record"`` (read as recordkit's ``arrayrecord`` format); absent or empty in
    older datasets, meaning tfrecord.
``splits``
    One entry per split: ``name`` (``{SPLIT}`` in file names); ``shardLengths``, the number of records in
    each shard, in shard order; ``numBytes``, the serialized records' total size (payloads, without
    framing); ``filepathTemplate``, the shard file names relative to the directory (absent or empty means
    ``{DATASET}-{SPLIT}.{FILEFORMAT}-{SHARD_X_OF_Y}``).

A template is expanded like :meth:`str.format` with ``DATASET``, ``SPLIT``, ``FILEFORMAT`` (the file
format's suffix, ``tfrecord`` or ``array_record``), ``SHARD_INDEX`` and ``NUM_SHARDS`` (zero-padded to at least 5 digits, or
to the digits of the number of shards when it has more) and ``SHARD_X_OF_Y``
(``{SHARD_INDEX}-of-{NUM_SHARDS}``). So the second of three train shards of ``mnist`` is
``mnist-train.tfrecord-00001-of-00003``.

TFDS does not read a split shard after shard: ``builder.as_dataset(split, shuffle_files=False)`` reads 16
shards side by side, 16 records per turn (tf.data's ``interleave`` with ``tfds.ReadConfig``'s defaults).
:class:`ReadOrder` computes that order from the shard lengths, and :func:`read_order` gives it for a split.
A split stored as ``array_record`` is read shard after shard: ``as_dataset`` is not implemented for it, and
its data source (``builder.as_data_source(split)``, ``tfds.data_sources``) numbers the records of the
shards one after the other.

This module sits below the reader (:mod:`recordkit.io.resolve` reads a TFDS directory through it): it
imports neither TensorFlow nor protobuf, and only reads the JSON files; :func:`recordkit.open` reads the
shards. Writing ``dataset_info.json`` for shards recordkit wrote is
:func:`recordkit.datasets.tfds.write_tfds_info`.
"""

from __future__ import annotations

import itertools
import os
import re
import string
from bisect import bisect_right
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from recordkit.errors import ManifestError
from recordkit.io.manifest import Manifest, Shard, _read_json, inside_path

__all__ = [
    "BLOCK_LENGTH",
    "CYCLE_LENGTH",
    "DEFAULT_TEMPLATE",
    "FILE_FORMATS",
    "INFO_NAME",
    "ReadOrder",
    "SHARD_DIGITS",
    "Segment",
    "is_tfds_directory",
    "list_shards",
    "manifest_from_tfds",
    "read_order",
    "shard_size",
]

INFO_NAME = "dataset_info.json"
"""The file that makes a directory a TFDS dataset."""

DEFAULT_TEMPLATE = "{DATASET}-{SPLIT}.{FILEFORMAT}-{SHARD_X_OF_Y}"
"""The shard file name template of a split that names none."""

CYCLE_LENGTH = 16
"""Shards TFDS reads side by side (``tfds.ReadConfig``'s default ``interleave_cycle_length``)."""

BLOCK_LENGTH = 16
"""Records TFDS takes from one shard per turn (``tfds.ReadConfig``'s ``interleave_block_length``)."""

SHARD_DIGITS = 5
"""The fewest digits of a shard's number and count in a TFDS file name (``00001-of-00003``); more when
the count has more."""

FILE_FORMATS = {"tfrecord": "tfrecord", "array_record": "arrayrecord"}
"""TFDS's file formats (``fileFormat``, ``{FILEFORMAT}``) that recordkit reads, and recordkit's name of each."""

_FILE_FORMAT = "tfrecord"
_INT64_MAX = (1 << 63) - 1
_DECIMAL = re.compile(r"-?[0-9]+")


def is_tfds_directory(directory: str | os.PathLike[str]) -> bool:
    """Return whether ``directory`` is a TFDS dataset directory (it holds ``dataset_info.json``)."""
    return os.path.isfile(os.path.join(os.fspath(directory), INFO_NAME))


# -- reading -----------------------------------------------------------------------------------------


def manifest_from_tfds(directory: str | os.PathLike[str], *, split: str | None = None) -> Manifest:
    """Describe a TFDS dataset directory as a recordkit :class:`~recordkit.io.manifest.Manifest`.

    Each shard listed in ``dataset_info.json`` becomes one :class:`~recordkit.io.manifest.Shard`, split
    by split in the file's order and shard by shard in index order: its path relative to ``directory``,
    its record count from ``shardLengths`` and its split name. TFDS records no per-shard byte count or
    checksum, so ``size`` is the file's size on disk at the time of the call and ``sha256`` and ``index``
    are ``None``. The manifest's ``metadata`` holds ``{"tfds": {"name": ..., "version": ..., "interleave":
    {"cycle_length": 16, "block_length": 16}}}``: how TFDS interleaves a split's shards
    (``cycle_length`` is 1 when ``dataset_info.json`` sets ``disableShuffling``), which
    :func:`read_order` turns into the order of a split's records.

    Parameters
    ----------
    directory
        A local directory holding ``dataset_info.json``.
    split
        Describe only this split's shards (the others' files are then not looked at, so a shard missing
        from another split does not matter).

    Returns
    -------
    Manifest
        Format ``"tfrecord"`` or ``"arrayrecord"``, uncompressed.

    Raises
    ------
    FileNotFoundError
        There is no ``dataset_info.json``.
    ManifestError
        A shard it lists is missing (its size cannot be known), ``dataset_info.json`` is not valid JSON, a field is malformed, the file format is neither tfrecord
        nor array_record (``riegeli``, ``parquet``), or a file name template cannot be expanded.
    """
    directory = os.fspath(directory)
    info, listed, names = _listed_shards(directory)
    file_format = info.string("file_format") or _FILE_FORMAT
    if split is not None and split not in names:
        raise info.error(
            f"the dataset has no split {split!r}; it has the splits {', '.join(names)}"
        )
    shards = tuple(
        Shard(
            path=relative, records=records, size=shard_size(directory, relative), split=split_name
        )
        for relative, (records, split_name) in listed.items()
        if split is None or split_name == split
    )
    # TFDS reads a split's shards CYCLE_LENGTH at a time, BLOCK_LENGTH records per turn, unless the
    # dataset disables shuffling: then it reads them one after the other (interleave_cycle_length=1).
    # An array_record split is read shard after shard (its data source numbers them so).
    shuffled = not info.field("disable_shuffling", bool, False, "true or false")
    cycle = CYCLE_LENGTH if shuffled and file_format == _FILE_FORMAT else 1
    interleave = {"cycle_length": cycle, "block_length": BLOCK_LENGTH}
    tfds = {
        "name": info.string("name"),
        "version": info.string("version"),
        "interleave": interleave,
    }
    fmt = FILE_FORMATS[file_format]
    return Manifest(format=fmt, compression="", shards=shards, metadata={"tfds": tfds})


def list_shards(
    directory: str | os.PathLike[str], *, file_format: str | None = None
) -> tuple[dict[str, Any], dict[str, tuple[int, str]]]:
    """Read a TFDS directory's ``dataset_info.json``: return it and the shard files it lists.

    Parameters
    ----------
    directory
        A local directory holding ``dataset_info.json``, stored as tfrecord or array_record.
    file_format
        Name the shards as those of this TFDS file format (``{FILEFORMAT}`` in the templates), for
        example to name the shards of a conversion; default the dataset's own.

    Returns
    -------
    tuple
        The JSON object, its top-level fields spelled in lowerCamelCase as tfds writes them; and
        ``{file name relative to directory: (records, split)}``, split by split, in shard order. No shard
        file is looked at.

    Raises
    ------
    FileNotFoundError, ManifestError
        As :func:`manifest_from_tfds` raises them.
    """
    info, listed, _ = _listed_shards(os.fspath(directory), file_format)
    return {_camel(key): value for key, value in info.value.items()}, listed


def _listed_shards(
    directory: str, file_format: str | None = None
) -> tuple[_Message, dict[str, tuple[int, str]], dict[str, None]]:
    """Read ``dataset_info.json``: return it, ``{shard file name: (records, split)}`` and the split names.

    The shards are named for ``file_format`` (TFDS's name, ``{FILEFORMAT}`` in the templates), by default
    the dataset's own, which must be one recordkit reads.
    """
    info_path = os.path.join(directory, INFO_NAME)
    info = _Message(_read_json(info_path, f"a {INFO_NAME}"), "", info_path)
    own_format = info.string("file_format") or _FILE_FORMAT
    if own_format not in FILE_FORMATS:
        raise info.error(
            f"the shards are {own_format!r} files; recordkit reads TFDS datasets stored as tfrecord "
            "or array_record"
        )
    name = info.string("name")
    splits = info.messages("splits")
    if not splits:
        raise info.error("the dataset has no splits")
    listed: dict[str, tuple[int, str]] = {}
    names: dict[str, None] = {}
    for entry in splits:
        split_name = entry.string("name")
        if not split_name or split_name in names:
            raise entry.error(f"{'a repeated' if split_name else 'no'} split name")
        names[split_name] = None
        values = {"DATASET": name, "SPLIT": split_name, "FILEFORMAT": file_format or own_format}
        for relative, records in _split_files(entry, values):
            if relative in listed:
                raise entry.error(f"two shards have the file name {relative!r}")
            listed[relative] = (records, split_name)
    return info, listed, names


# -- the order of a split's records ---------------------------------------------------------------


@dataclass(frozen=True)
class Segment:
    """Consecutive positions of a :class:`ReadOrder` in which the same shards take full turns.

    ``rounds`` times, each shard of ``shards`` in turn gives ``block`` consecutive records, shard
    ``shards[j]`` from its record ``starts[j]`` on. Position ``start + p`` is record
    ``starts[j] + r * block + p % block`` of shard ``shards[j]``, where
    ``r, q = divmod(p, len(shards) * block)`` and ``j = q // block``.
    """

    start: int
    shards: tuple[int, ...]
    starts: tuple[int, ...]
    rounds: int
    block: int

    def __len__(self) -> int:
        """The number of positions the segment covers."""
        return self.rounds * len(self.shards) * self.block

    def locate(self, position: int) -> tuple[int, int]:
        """Return ``(shard, record)`` at ``position`` (counted from the order's start, not the segment's)."""
        turn, rest = divmod(position - self.start, len(self.shards) * self.block)
        j, offset = divmod(rest, self.block)
        return self.shards[j], self.starts[j] + turn * self.block + offset

    def runs(self) -> Iterator[tuple[int, int, int]]:
        """Yield ``(shard, start, stop)``: the shard records the segment gives, turn by turn."""
        for turn in range(self.rounds):
            for shard, first in zip(self.shards, self.starts, strict=True):
                begin = first + turn * self.block
                yield shard, begin, begin + self.block


class ReadOrder:
    """The order in which tf.data's deterministic ``interleave`` yields the records of several shards.

    ``cycle_length`` shards are read side by side and take turns, giving ``block_length`` consecutive
    records each; when a shard has no record left, its place goes to the next shard the next time the turn
    comes back to it. This is how ``builder.as_dataset(split, shuffle_files=False)`` reads a split of a TFDS
    dataset (16 shards at a time, 16 records per turn, by ``tfds.ReadConfig``'s defaults).

    The order is held as :class:`Segment` s: a few per shard, however many records there are.

    Parameters
    ----------
    lengths
        The number of records of each shard.
    cycle_length, block_length
        As tf.data's ``interleave`` takes them (both at least 1).
    shard_order
        The shards in the order they are opened (default: index order), each at most once.
    """

    def __init__(
        self,
        lengths: Sequence[int],
        cycle_length: int = CYCLE_LENGTH,
        block_length: int = BLOCK_LENGTH,
        shard_order: Sequence[int] | None = None,
    ) -> None:
        if cycle_length < 1 or block_length < 1:
            raise ValueError(
                f"cycle_length and block_length must be at least 1, not {cycle_length}, {block_length}"
            )
        self.lengths = tuple(lengths)
        if any(n < 0 for n in self.lengths):
            raise ValueError(f"a shard cannot hold a negative number of records: {self.lengths}")
        self.cycle_length = cycle_length
        self.block_length = block_length
        order = range(len(self.lengths)) if shard_order is None else shard_order
        self.shard_order = tuple(order)
        if len(set(self.shard_order)) != len(self.shard_order) or not all(
            0 <= shard < len(self.lengths) for shard in self.shard_order
        ):
            raise ValueError(f"shard_order must name shards at most once: {self.shard_order}")
        self.segments = _interleave(self.lengths, self.shard_order, cycle_length, block_length)
        self._starts = [segment.start for segment in self.segments]
        self._total = sum(self.lengths[shard] for shard in self.shard_order)

    def __len__(self) -> int:
        """The number of records in the order."""
        return self._total

    def __repr__(self) -> str:
        return (
            f"ReadOrder({len(self.shard_order)} shards, {self._total} records, "
            f"cycle_length={self.cycle_length}, block_length={self.block_length})"
        )

    def locate(self, position: int) -> tuple[int, int]:
        """Return ``(shard, record)``: where the record at ``position`` (``0 <= position < len``) is."""
        if not 0 <= position < self._total:
            raise IndexError(f"position {position} out of range for {self._total} records")
        return self.segments[bisect_right(self._starts, position) - 1].locate(position)

    def runs(self) -> Iterator[tuple[int, int, int]]:
        """Yield ``(shard, start, stop)`` in order: records ``start`` to ``stop - 1`` of ``shard``."""
        return itertools.chain.from_iterable(segment.runs() for segment in self.segments)


def _interleave(
    lengths: Sequence[int], order: Sequence[int], cycle: int, block: int
) -> list[Segment]:
    """The segments of tf.data's deterministic interleave over shards of ``lengths`` opened in ``order``.

    tf.data visits the slots in turn; an empty slot is given the next shard; a shard gives up to ``block``
    records and, once it has given ``block``, the turn passes; a shard found without records frees its slot
    and the turn passes. Whole rounds in which every open shard gives a full block are one segment.
    """
    segments: list[Segment] = []
    slots: list[list[int] | None] = [None] * cycle  # [shard, its next record]
    opened = 0
    slot = 0
    position = 0
    while True:
        current = slots[slot]
        if current is None:
            if opened == len(order):
                if all(s is None for s in slots):
                    return segments
                slot = (slot + 1) % cycle
                continue
            current = slots[slot] = [order[opened], 0]
            opened += 1
        if opened == len(order) or all(s is not None for s in slots):
            # No slot will be refilled during whole rounds: take as many as every open shard allows.
            turn = [s for s in slots[slot:] + slots[:slot] if s is not None]
            rounds = min((lengths[shard] - record) // block for shard, record in turn)
            if rounds:
                segment = Segment(
                    position, tuple(s[0] for s in turn), tuple(s[1] for s in turn), rounds, block
                )
                segments.append(segment)
                position += len(segment)
                for s in turn:
                    s[1] += rounds * block
                continue
        shard, record = current
        left = lengths[shard] - record
        if not left:
            slots[slot] = None
            slot = (slot + 1) % cycle
            continue
        take = min(block, left)
        segments.append(Segment(position, (shard,), (record,), 1, take))
        position += take
        current[1] += take
        if take == block:
            slot = (slot + 1) % cycle


def read_order(manifest: Manifest) -> ReadOrder | None:
    """Return the order TFDS reads the records of a TFDS split in, or ``None`` for file after file.

    ``manifest`` is one split of a manifest :func:`manifest_from_tfds` made (its ``metadata["tfds"]`` holds
    how TFDS interleaves the shards). Anything else, a manifest of several splits, and a dataset whose
    ``dataset_info.json`` disables shuffling (TFDS then reads the shards one after the other), give
    ``None``.
    """
    tfds = manifest.metadata.get("tfds")
    interleave = tfds.get("interleave") if isinstance(tfds, Mapping) else None
    if not isinstance(interleave, Mapping):
        return None
    cycle, block = interleave.get("cycle_length"), interleave.get("block_length")
    if not (type(cycle) is int and type(block) is int and cycle >= 1 and block >= 1):
        raise ManifestError(f"metadata.tfds.interleave is malformed: {dict(interleave)!r}")
    if cycle == 1 or len(manifest.shards) < 2 or len({s.split for s in manifest.shards}) > 1:
        return None
    return ReadOrder([shard.records for shard in manifest.shards], cycle, block)


def _split_files(split: _Message, values: Mapping[str, str]) -> list[tuple[str, int]]:
    """Return the file name and record count of each shard of one split, in index order."""
    lengths = split.int64_list("shard_lengths")
    split.int64("num_bytes")
    num_shards = split.int64("num_shards")
    if num_shards and num_shards != len(lengths):
        raise split.error(
            f"numShards says {num_shards} shards, but shardLengths lists {len(lengths)}"
            + ("" if lengths else ": the records of each shard are unknown")
        )
    template = split.string("filepath_template") or DEFAULT_TEMPLATE
    return [
        (_expand(template, values, index, len(lengths), split), records)
        for index, records in enumerate(lengths)
    ]


def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(part.capitalize() for part in rest)


class _Message:
    """One JSON object in protobuf's JSON mapping, with typed field access.

    A field may be spelled in lowerCamelCase or in its original snake_case; ``null`` and an absent field
    both mean the field's default, as in protobuf.
    """

    def __init__(self, value: Any, where: str, path: str) -> None:
        self.where, self.path = where, path
        if not isinstance(value, dict):
            kind = type(value).__name__
            raise ManifestError(
                f"{where or 'the file'} must be a JSON object, not {kind}", path=path
            )
        self.value: dict[str, Any] = value

    def error(self, message: str) -> ManifestError:
        return ManifestError(f"{self.where}: {message}" if self.where else message, path=self.path)

    def field(self, name: str, kind: type = object, default: Any = None, what: str = "") -> Any:
        """The field's value (``default`` when absent or ``null``), which must be a ``kind``."""
        spellings = [key for key in dict.fromkeys((_camel(name), name)) if key in self.value]
        if len(spellings) > 1:
            raise self.error(f"the field {name!r} is given twice, as {' and '.join(spellings)}")
        value = self.value[spellings[0]] if spellings else None
        if value is None:
            return default
        if not isinstance(value, kind):
            raise self.error(f"{_camel(name)!r} must be {what}, not {value!r}")
        return value

    def string(self, name: str) -> str:
        return str(self.field(name, str, "", "a string"))

    def integer(self, value: Any, what: str) -> int:
        """Return a non-negative int64 given as a JSON number or a decimal string."""
        if isinstance(value, str) and _DECIMAL.fullmatch(value):
            value = int(value)
        if not isinstance(value, int) or isinstance(value, bool):
            raise self.error(f"{what} must be an integer, not {value!r}")
        if value < 0 or value > _INT64_MAX:
            raise self.error(f"{what} is out of range ({value})")
        return value

    def int64(self, name: str) -> int:
        value = self.field(name)
        return 0 if value is None else self.integer(value, repr(_camel(name)))

    def int64_list(self, name: str) -> list[int]:
        items = self.field(name, list, [], "a list")
        return [self.integer(item, f"{_camel(name)}[{i}]") for i, item in enumerate(items)]

    def messages(self, name: str) -> list[_Message]:
        key = _camel(name)
        return [
            _Message(item, f"{self.where}.{key}[{i}]" if self.where else f"{key}[{i}]", self.path)
            for i, item in enumerate(self.field(name, list, [], "a list"))
        ]


def _expand(
    template: str, values: Mapping[str, str], index: int, total: int, split: _Message
) -> str:
    """Return the file name of shard ``index`` of ``total`` from a TFDS template."""
    digits = max(SHARD_DIGITS, len(str(total)))
    mapping = dict(values, SHARD_INDEX=f"{index:0{digits}d}", NUM_SHARDS=f"{total:0{digits}d}")
    mapping["SHARD_X_OF_Y"] = f"{mapping['SHARD_INDEX']}-of-{mapping['NUM_SHARDS']}"
    pieces = []
    try:
        for literal, field, spec, conversion in string.Formatter().parse(template):
            pieces.append(literal)
            if field is None:
                continue
            if conversion is not None or field not in mapping:
                raise split.error(f"the filepathTemplate {template!r} uses an unknown {{{field}}}")
            if not mapping[field]:
                raise split.error(
                    f"the filepathTemplate {template!r} uses {{{field}}}, which is empty"
                )
            pieces.append(format(mapping[field], spec or ""))
    except ValueError as exc:
        raise split.error(f"the filepathTemplate {template!r} is malformed ({exc})") from None
    path = "".join(pieces)
    if not inside_path(path):
        raise split.error(f"the shard file {path!r} is not a path inside the dataset's directory")
    return path


def shard_size(directory: str, relative: str, listed_in: str = INFO_NAME) -> int:
    """The size of the shard file ``relative`` (``/``-separated) of the dataset in ``directory``.

    Raises
    ------
    ManifestError
        The shard is missing (``listed_in`` names what lists it).
    """
    path = os.path.join(directory, *relative.split("/"))
    try:
        return os.stat(path).st_size
    except FileNotFoundError:
        raise ManifestError(
            f"the shard {relative} listed in {listed_in} is missing", path=path
        ) from None
