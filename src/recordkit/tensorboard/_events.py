"""The summary values of an event file as columns: one row per ``Summary.Value``, found without protobuf.

An event file holds one ``Event`` per record; nearly all of them have one layout: ``wall_time`` (field 1),
``step`` (field 2, absent when 0), then a ``summary`` (field 5) holding one ``value`` with its ``tag``, one
member of the ``value`` oneof (``simple_value``, ``image``, ``histo``, ``audio``, ``tensor``) and, maybe,
its ``metadata``. Such records are read by :func:`index_events` many records at once (chunks of 32768,
whose bytes stay in the processor's cache), each step of the wire walk one numpy operation over every
record of the chunk still on that layout; a record that leaves it anywhere
(several values, another field order, unknown fields, negative steps, events that are not summaries) is
parsed by protobuf instead, so that every record is read exactly as protobuf reads it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt
from google.protobuf.message import DecodeError as ProtobufDecodeError

from recordkit._proto.tensorboard import event_pb2, summary_pb2
from recordkit.errors import DecodeError
from recordkit.support.varints import decode_at

__all__ = ["KIND_FIELDS", "Values", "decode_error", "index_events"]

#: The ``Summary.Value`` oneof member of each field number.
KIND_FIELDS = {
    2: "simple_value",
    3: "obsolete_old_style_histogram",
    4: "image",
    5: "histo",
    6: "audio",
    8: "tensor",
}
_KIND_NUMBERS = {name: number for number, name in KIND_FIELDS.items()}
# Tag bytes of the length-delimited oneof members (fields 3, 4, 5, 6 and 8, wire type 2).
_DELIMITED = np.array([0x1A, 0x22, 0x2A, 0x32, 0x42], np.uint8)
_I64 = np.int64


def decode_error(path: str, record: int, offset: int, why: str) -> DecodeError:
    """A :class:`~recordkit.errors.DecodeError` naming the file, the record and its byte offset."""
    return DecodeError(
        f"{path}: record {record} at byte {offset}: {why}", index=record, path=path, offset=offset
    )


@dataclass
class Values:
    """The summary values of one event file, one row per value, in the order they were written.

    ``kind`` is the field number of the ``Summary.Value`` oneof member set (0: none). Rows read by the
    columnar walk have the position of that member's payload (``kstart``/``kend``; for ``simple_value``
    its 4 bytes) and of the whole value (``vstart``/``vend``) in ``buffer``; rows protobuf parsed have -1
    there and their message in ``parsed``.
    """

    path: str
    buffer: Any
    record: npt.NDArray[np.int64]
    wall_time: npt.NDArray[np.float64]
    step: npt.NDArray[np.int64]
    tag: npt.NDArray[np.int64]
    kind: npt.NDArray[np.int64]
    vstart: npt.NDArray[np.int64]
    vend: npt.NDArray[np.int64]
    kstart: npt.NDArray[np.int64]
    kend: npt.NDArray[np.int64]
    tags: list[str]
    #: Tag -> plugin name, from the first value with metadata naming a plugin.
    plugins: dict[str, str] = field(default_factory=dict)
    parsed: dict[int, Any] = field(default_factory=dict)
    #: File offset of each record's first byte, and the file index of the first record (for errors).
    offsets: npt.NDArray[np.int64] = field(default_factory=lambda: np.zeros(0, _I64))
    first: int = 0

    def value(self, row: int) -> Any:
        """The ``Summary.Value`` message of ``row``."""
        parsed = self.parsed.get(row)
        if parsed is not None:
            return parsed
        start, stop = int(self.vstart[row]), int(self.vend[row])
        try:
            return summary_pb2.Summary.Value.FromString(bytes(self.buffer[start:stop]))
        except ProtobufDecodeError as exc:
            raise self.error(row, f"malformed Summary.Value: {exc}") from None

    def error(self, row: int, why: str) -> DecodeError:
        """A :class:`~recordkit.errors.DecodeError` locating ``row``'s record."""
        return self.record_error(int(self.record[row]), why)

    def record_error(self, record: int, why: str) -> DecodeError:
        """A :class:`~recordkit.errors.DecodeError` locating record ``record`` of the buffer in its file."""
        return decode_error(self.path, self.first + record, int(self.offsets[record]), why)


def _varints(
    data: npt.NDArray[np.uint8], pos: npt.NDArray[np.int64], end: npt.NDArray[np.int64]
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64], npt.NDArray[np.bool_]]:
    """Read one varint at each ``pos``: values, the positions after them, and which are good.

    Varints of 10 bytes (negative numbers) and ones running past ``end`` are marked bad (the caller sends
    their records to protobuf), so every good value fits ``int64``.
    """
    value, after, good = decode_at(data, pos, end, max_bytes=9)
    return value.view(_I64), after, good


_CHUNK = 1 << 15  # records walked together


def _walk(
    data: npt.NDArray[np.uint8],
    wall: npt.NDArray[np.float64],
    starts: npt.NDArray[np.int64],
    end: npt.NDArray[np.int64],
    first: int,
) -> dict[str, npt.NDArray[Any]]:
    """The columns of the records on the common layout among records ``first, first + 1, ...`` (payloads
    ``starts``/``end`` in ``data``; ``wall`` views ``data`` as doubles at every byte), and where their
    tags are (``tag_start``, ``tag_length``) and whether their values have metadata (``meta``)."""
    rows = np.arange(len(starts), dtype=_I64)
    keep = end - starts >= 10
    rows = rows[keep]
    keep = data[starts[rows]] == 0x09  # wall_time, a double
    rows = rows[keep]
    s, e = starts[rows], end[rows]
    p = s + 9
    keep = np.ones(len(rows), bool)
    step = np.zeros(len(rows), _I64)
    at = np.flatnonzero(data[p] == 0x10)  # step (p < e: the record is at least 10 bytes)
    if len(at):
        value, after, good = _varints(data, p[at] + 1, e[at])
        step[at] = value
        p[at] = after
        keep[at] = good
    keep &= (p < e) & (data[np.minimum(p, e - 1)] == 0x2A)  # summary
    size, p, ok = _varints(data, p + 1, e)
    keep &= ok & (p + size == e)
    keep &= (p < e) & (data[np.minimum(p, e - 1)] == 0x0A)  # its one value
    size, p, ok = _varints(data, p + 1, e)
    keep &= ok & (p + size == e)
    vstart = p
    keep &= (p < e) & (data[np.minimum(p, e - 1)] == 0x0A)  # the value's tag
    tag_length, tag_start, ok = _varints(data, p + 1, e)
    keep &= ok
    p = tag_start + tag_length
    keep &= p < e  # a oneof member follows
    member = data[np.minimum(p, e - 1)]
    simple = member == 0x15
    delimited = np.isin(member, _DELIMITED)
    keep &= simple | delimited
    size, kstart, ok = _varints(data, p + 1, e)
    keep &= ok | simple
    kstart = np.where(simple, p + 1, kstart)
    kend = np.where(simple, p + 5, kstart + size)
    keep &= kend <= e
    # then nothing, or the metadata (field 9) up to the end
    meta = keep & (kend < e)
    keep &= ~meta | (data[np.minimum(kend, e - 1)] == 0x4A)
    size, after, ok = _varints(data, kend + 1, e)
    keep &= ~meta | (ok & (after + size == e))
    meta &= keep

    return {
        "record": rows[keep] + first,
        "wall_time": wall[s[keep] + 1],
        "step": step[keep],
        "kind": (member[keep] >> 3).astype(_I64),
        "vstart": vstart[keep],
        "vend": e[keep],
        "kstart": kstart[keep],
        "kend": kend[keep],
        "tag_start": tag_start[keep],
        "tag_length": tag_length[keep],
        "meta": meta[keep],
    }


def index_events(
    buffer: Any,
    starts: npt.NDArray[np.int64],
    lengths: npt.NDArray[np.int64],
    path: str,
    *,
    first: int = 0,
    offsets: npt.NDArray[np.int64] | None = None,
) -> Values:
    """Read the summary values of the event records at ``starts``/``lengths`` in ``buffer``.

    Errors name record ``first + i`` at file offset ``offsets[i]`` (default: the buffer is the file from
    its start, TFRecord-framed, and each record starts 12 bytes before its payload). At least 8 bytes must
    follow the last payload in ``buffer`` (a TFRecord file's last checksum, or padding).
    """
    data = np.frombuffer(buffer, np.uint8)
    n = len(starts)
    end = starts + lengths
    wall = np.ndarray((max(len(data) - 7, 0),), "<f8", buffer, 0, (1,))
    # The records in chunks whose bytes stay in the processor's cache through the walk's many steps.
    parts = [
        _walk(data, wall, starts[i : i + _CHUNK], end[i : i + _CHUNK], i)
        for i in range(0, max(n, 1), _CHUNK)
    ]
    found = {key: np.concatenate([part[key] for part in parts]) for key in parts[0]}
    regular = found["record"]
    values = Values(
        path=path,
        buffer=buffer,
        record=regular,
        wall_time=found["wall_time"],
        step=found["step"],
        tag=np.zeros(0, _I64),
        kind=found["kind"],
        vstart=found["vstart"],
        vend=found["vend"],
        kstart=found["kstart"],
        kend=found["kend"],
        tags=[],
        offsets=starts - 12 if offsets is None else offsets,
        first=first,
    )
    values.tag, values.tags = _tag_ids(
        values, data, found["tag_start"], found["tag_length"], regular
    )
    with_meta = np.flatnonzero(found["meta"])
    if len(with_meta):
        # The first value of each tag that carries metadata names the tag's plugin.
        _, firsts = np.unique(values.tag[with_meta], return_index=True)
        for row in with_meta[np.sort(firsts)].tolist():
            _note_plugin(values, values.tags[int(values.tag[row])], values.value(row))
    irregular = np.ones(n, bool)
    irregular[regular] = False
    others = np.flatnonzero(irregular)
    if len(others):
        _parse_irregular(values, buffer, others, starts, end)
    return values


def _note_plugin(values: Values, tag: str, value: Any) -> None:
    if tag not in values.plugins and value.HasField("metadata"):
        name = value.metadata.plugin_data.plugin_name
        if name:
            values.plugins[tag] = name


def _tag_ids(
    values: Values,
    data: npt.NDArray[np.uint8],
    starts: npt.NDArray[np.int64],
    lengths: npt.NDArray[np.int64],
    records: npt.NDArray[np.int64],
) -> tuple[npt.NDArray[np.int64], list[str]]:
    """Number the distinct tags: each tag is read as 8-byte words (at least 9 bytes follow every tag in
    the buffer: a oneof member and the record's checksum or padding), hashed, and checked word by word
    against the first tag with its hash."""
    buffer = values.buffer
    ids = np.zeros(len(starts), _I64)
    tags: list[str] = []
    numbers: dict[str, int] = {}
    if not len(starts):
        return ids, tags
    words_view = np.ndarray((max(len(data) - 7, 0),), "<u8", buffer, 0, (1,))
    longest = int(lengths.max())
    distinct = np.flatnonzero(np.bincount(lengths)) if longest < 4096 else np.unique(lengths)
    for length in distinct.tolist():
        group = np.flatnonzero(lengths == length)
        at = starts[group]
        count = max(1, -(-length // 8))
        words = np.empty((len(group), count), np.uint64)
        for j in range(count):
            word = words_view[at + 8 * j]
            left = length - 8 * j
            if left < 8:
                word = word & np.uint64((1 << (8 * max(left, 0))) - 1)
            words[:, j] = word
        few = _few_distinct(words)
        if few is not None:
            first, inverse = few
        else:
            _, first, inverse = np.unique(_keys(words), return_index=True, return_inverse=True)
            if count > 1 and not (words == words[first[inverse]]).all():  # a hash collision
                first, inverse = _by_bytes(words, True)
        local = np.empty(len(first), _I64)
        for k, row in enumerate(first.tolist()):
            start = int(at[row])
            raw = bytes(buffer[start : start + length])
            try:
                name = raw.decode("utf-8")
            except UnicodeDecodeError:
                raise values.record_error(
                    int(records[group[row]]), f"tag {raw!r} is not UTF-8"
                ) from None
            local[k] = numbers.setdefault(name, len(numbers))
        ids[group] = local[inverse.ravel()]
    tags = list(numbers)
    return ids, tags


def _keys(words: npt.NDArray[np.uint64]) -> npt.NDArray[np.uint64]:
    """A hash of each row of ``words`` (the row itself when it is one word)."""
    key: npt.NDArray[np.uint64] = words[:, 0].copy()
    for j in range(1, words.shape[1]):
        key = key * np.uint64(0x9E3779B97F4A7C15) + words[:, j]
    return key


def _by_bytes(words: npt.NDArray[np.uint64], inverse: bool) -> tuple[Any, Any]:
    """np.unique's ``first`` (and ``inverse``) of the rows of ``words`` ordered by their bytes."""
    rows = words.view(f"V{8 * words.shape[1]}").ravel()
    if inverse:
        _, first, where = np.unique(rows, return_index=True, return_inverse=True)
        return first, where
    return np.unique(rows, return_index=True)[1], None


def _few_distinct(
    words: npt.NDArray[np.uint64], limit: int = 8
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]] | None:
    """What ``np.unique(_keys(words), return_index=True, return_inverse=True)`` gives for ``first`` and
    ``inverse`` (the rows ordered by their bytes after a hash collision), found without sorting by comparing
    every row with the first row of each distinct one; ``None`` when there are more than ``limit``."""
    owner = np.empty(len(words), _I64)
    firsts: list[int] = []
    left: npt.NDArray[np.int64] | None = None  # None: all rows
    while left is None or len(left):
        if len(firsts) == limit:
            return None
        row = 0 if left is None else int(left[0])
        same = ((words if left is None else words[left]) == words[row]).all(axis=1)
        if left is None:
            owner[same] = len(firsts)
            left = np.flatnonzero(~same)
        else:
            owner[left[same]] = len(firsts)
            left = left[~same]
        firsts.append(row)
    reps = np.array(firsts, _I64)
    keys = _keys(words[reps])
    if len(np.unique(keys)) == len(reps):
        order = np.argsort(keys, kind="stable")
    else:  # a hash collision
        order = _by_bytes(words[reps], False)[0]
    rank = np.empty(len(reps), _I64)
    rank[order] = np.arange(len(reps))
    return reps[order], rank[owner]


def _parse_irregular(
    values: Values,
    buffer: Any,
    records: npt.NDArray[np.int64],
    starts: npt.NDArray[np.int64],
    end: npt.NDArray[np.int64],
) -> None:
    """Parse the records off the common layout with protobuf and merge their values in, in file order."""
    numbers = {tag: i for i, tag in enumerate(values.tags)}
    found: dict[str, list[Any]] = {
        key: [] for key in ("record", "wall_time", "step", "tag", "kind")
    }
    parsed: list[Any] = []
    for record in records.tolist():
        start, stop = int(starts[record]), int(end[record])
        try:
            event = event_pb2.Event.FromString(bytes(buffer[start:stop]))
        except ProtobufDecodeError as exc:
            raise values.record_error(record, f"malformed Event: {exc}") from None
        if event.WhichOneof("what") != "summary":
            continue
        for value in event.summary.value:
            found["record"].append(record)
            found["wall_time"].append(event.wall_time)
            found["step"].append(event.step)
            found["tag"].append(numbers.setdefault(value.tag, len(numbers)))
            member = value.WhichOneof("value")
            found["kind"].append(_KIND_NUMBERS.get(member, 0) if member else 0)
            parsed.append(value)
    if not parsed:
        return
    values.tags = list(numbers)
    extra = len(parsed)
    merged_record = np.concatenate((values.record, np.array(found["record"], _I64)))
    order = np.argsort(merged_record, kind="stable")
    minus = np.full(extra, -1, _I64)
    columns = {
        "record": merged_record,
        "wall_time": np.concatenate((values.wall_time, np.array(found["wall_time"], np.float64))),
        "step": np.concatenate((values.step, np.array(found["step"], _I64))),
        "tag": np.concatenate((values.tag, np.array(found["tag"], _I64))),
        "kind": np.concatenate((values.kind, np.array(found["kind"], _I64))),
        "vstart": np.concatenate((values.vstart, minus)),
        "vend": np.concatenate((values.vend, minus)),
        "kstart": np.concatenate((values.kstart, minus)),
        "kend": np.concatenate((values.kend, minus)),
    }
    for name, column in columns.items():
        setattr(values, name, column[order])
    position = np.empty(len(order), _I64)
    position[order] = np.arange(len(order))
    base = len(merged_record) - extra
    values.parsed = {int(position[base + i]): value for i, value in enumerate(parsed)}
    # A tag's plugin: the first metadata seen (rows of the columnar walk first; differing metadata for
    # one tag does not occur in what the writers write).
    for row in sorted(values.parsed):
        value = values.parsed[row]
        _note_plugin(values, value.tag, value)
