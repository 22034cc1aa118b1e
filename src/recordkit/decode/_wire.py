"""A lean reader of the protobuf wire format of Example, SequenceExample and OFRecord payloads.

The scanner walks one serialized message and, for each *wanted* feature, records its kind (the field
number of the ``Feature`` oneof that is set) and its values as raw chunks, without building protobuf
objects:

* a numeric list becomes the bytes of its packed payload: a packed chunk is taken whole, and values that
  were written unpacked (one tag per value) are taken one by one. Joined, these chunks are exactly the
  packed encoding, so one ``np.frombuffer`` (fixed-width) or one vectorised varint decode
  (:func:`decode_varints`) turns a whole batch into an array;
* a bytes list becomes its values.

Protobuf's merge rules are followed: map entries may come in any order and the last entry with a given
key wins; the occurrences of a sub-message are read as one message, as if their bytes were concatenated, so
of the ``Feature`` oneof the last kind set wins (even when set in a later occurrence) and the values of
repeated occurrences of the same kind are concatenated. Values a oneof switch or a repeated key discards are
still checked, as protobuf checks them. Unknown fields, and known ones of another wire type than their
type's (which protobuf keeps as unknown fields), are skipped by wire type, except inside a map entry (upb
drops such an entry, TensorFlow rejects the record; recordkit raises). Features that are not wanted are
skipped by their length without looking inside.

Anything malformed (a tag or length over 5 bytes or above 2**32 - 1, another varint over 10 bytes, a
length past the end of its message, a field number 0 outside a group (inside one, protobuf skips it as any
other field), a map entry's key or value of another wire type, groups nested deeper than protobuf allows, a
truncated message, a feature name that is not UTF-8 in an Example) raises
:class:`~recordkit.errors.DecodeError`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Final

import numpy as np

from recordkit.errors import DecodeError
from recordkit.support.varints import VarintError, decode_all

if TYPE_CHECKING:
    from collections.abc import Container, Iterator

    import numpy.typing as npt

__all__ = [
    "BYTES",
    "FIXED32",
    "FIXED64",
    "OFRECORD_KINDS",
    "TF_KINDS",
    "VARINT",
    "VARINT32",
    "VARINTS",
    "Chunk",
    "NotTemplatable",
    "Slot",
    "FIXED_DTYPES",
    "as_buffer",
    "decode_chunks",
    "decode_varints",
    "narrow",
    "reason",
    "scan_example",
    "scan_features",
    "scan_sequence_example",
]

# How the values of a list are encoded on the wire. The fixed-width encodings come last (``>= FIXED32``).
BYTES: Final = 0
VARINT: Final = 1
#: A varint of an ``int32`` field: protobuf keeps its low 32 bits, sign-extended.
VARINT32: Final = 2
FIXED32: Final = 3
FIXED64: Final = 4
#: The encodings whose values are varints.
VARINTS: Final = frozenset({VARINT, VARINT32})

#: Field number of each ``Feature`` oneof member -> value encoding, for tf.train.Example.
TF_KINDS: Final[dict[int, int]] = {1: BYTES, 2: FIXED32, 3: VARINT}
#: The same for oneflow.OFRecord (bytes, float, double, int32, int64).
OFRECORD_KINDS: Final[dict[int, int]] = {
    1: BYTES,
    2: FIXED32,
    3: FIXED64,
    4: VARINT32,
    5: VARINT,
}

#: The dtype of the values of each fixed-width encoding, as stored on the wire.
FIXED_DTYPES: Final[dict[int, np.dtype[Any]]] = {FIXED32: np.dtype("<f4"), FIXED64: np.dtype("<f8")}

_NATIVE: Final[dict[int, np.dtype[Any]]] = {
    VARINT: np.dtype(np.int64),
    VARINT32: np.dtype(np.int32),
    **{encoding: dtype.newbyteorder("=") for encoding, dtype in FIXED_DTYPES.items()},
}
#: Up to this many bytes of varints, one record's values are decoded by a Python loop.
_FEW_VARINT_BYTES: Final = 24

_UNPACKED_WIRE_TYPE: Final[dict[int, int]] = {VARINT: 0, VARINT32: 0, FIXED32: 5, FIXED64: 1}
_WIDTH: Final = {FIXED32: 4, FIXED64: 8}
#: How deeply protobuf lets messages and groups nest (upb's default limit).
_MAX_DEPTH: Final = 100

#: A value chunk: the bytes themselves, or their ``(start, stop)`` position in the message when the
#: scanner records positions (the batch template path).
Chunk = bytes | tuple[int, int]
#: What the scanner found for one feature: ``(kind, chunks)``; kind 0 means no oneof member was set.
Slot = tuple[int, list[Chunk]]


class NotTemplatable(Exception):
    """Raised in position-recording mode when a record cannot serve as a batch template."""


# Every loop below reads its tags (and, in the per-feature loops, its lengths) inline, with a call only for a
# multi-byte varint: these loops run per field of every record, and a helper call per field costs more than
# the work it would share.


def _varint_tail(buf: bytes, pos: int, first: int) -> tuple[int, int]:
    """Finish reading a tag or a length whose first byte ``first`` (>= 0x80) was at ``pos - 1``.

    As protobuf, at most 5 bytes and a value below 2**32 (a longer or larger one is corrupt).
    """
    result = first & 0x7F
    shift = 7
    while True:
        byte = buf[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if byte < 0x80:
            if result >> 32:
                raise DecodeError("malformed protobuf: tag or length above 2**32 - 1")
            return result, pos
        shift += 7
        if shift >= 35:
            raise DecodeError("malformed protobuf: tag or length varint longer than 5 bytes")


def _length(buf: bytes, pos: int, end: int) -> tuple[int, int]:
    """Read a length prefix at ``pos``; return ``(stop, start)`` of the bytes it delimits, bounds-checked."""
    n = buf[pos]
    pos += 1
    if n >= 0x80:
        n, pos = _varint_tail(buf, pos, n)
    stop = pos + n
    if stop > end:
        raise DecodeError("malformed protobuf: length runs past the end of its message")
    return stop, pos


def _skip(buf: bytes, pos: int, end: int, tag: int, depth: int = 0, in_group: bool = False) -> int:
    """Skip the value of an unknown field with ``tag`` starting at ``pos``; return the position after it.

    ``depth`` is how deep the enclosing message is nested (0 for the record itself): protobuf's limit of
    :data:`_MAX_DEPTH` nested messages and groups counts the messages around a group too. ``in_group``: the
    field is inside a group, where protobuf's parser skips a field number 0 as any other (in a message it
    refuses it).
    """
    wire_type = tag & 7
    if tag >> 3 == 0 and not in_group:
        raise DecodeError("malformed protobuf: field number 0")
    if wire_type == 0:
        start = pos
        while buf[pos] >= 0x80:
            pos += 1
            if pos > end:
                break
        pos += 1
        if pos - start > 10:
            raise DecodeError("malformed protobuf: varint longer than 10 bytes")
    elif wire_type == 1:
        pos += 8
    elif wire_type == 2:
        pos, _ = _length(buf, pos, end)
    elif wire_type == 5:
        pos += 4
    elif wire_type == 3:
        pos = _skip_group(buf, pos, end, tag >> 3, _MAX_DEPTH - depth)
    else:
        raise DecodeError(f"malformed protobuf: invalid wire type {wire_type}")
    if pos > end:
        raise DecodeError("malformed protobuf: field runs past the end of its message")
    return pos


def _skip_group(buf: bytes, pos: int, end: int, field: int, limit: int) -> int:
    """Skip a (deprecated) group up to its matching end-group tag, iteratively, nesting at most ``limit``."""
    if limit < 1:
        raise DecodeError("malformed protobuf: groups nested too deeply")
    open_groups = [field]
    while open_groups:
        if pos >= end:
            raise DecodeError("malformed protobuf: unterminated group")
        tag = buf[pos]
        pos += 1
        if tag >= 0x80:
            tag, pos = _varint_tail(buf, pos, tag)
        if tag & 7 == 4:
            if tag >> 3 != open_groups.pop():
                raise DecodeError("malformed protobuf: mismatched end-group tag")
        elif tag & 7 == 3:
            if len(open_groups) >= limit:
                raise DecodeError("malformed protobuf: groups nested too deeply")
            open_groups.append(tag >> 3)
        else:
            pos = _skip(buf, pos, end, tag, in_group=True)
    return pos


def _scan_feature(
    buf: bytes,
    pos: int,
    end: int,
    kinds: dict[int, int],
    positions: bool,
    depth: int,
    state: Slot | None = None,
) -> Slot:
    """Read one ``Feature`` message in ``buf[pos:end]`` (the list messages inside it are read inline).

    ``depth`` is the nesting depth of the ``Feature`` (see :func:`_skip`). ``state`` is what earlier
    occurrences of the same ``Feature`` left (protobuf reads them as if their bytes were concatenated);
    its chunk list is extended in place.
    """
    kind, chunks = state if state is not None else (0, [])
    while pos < end:
        tag = buf[pos]
        pos += 1
        if tag >= 0x80:
            tag, pos = _varint_tail(buf, pos, tag)
        field = tag >> 3
        encoding = kinds.get(field)
        if encoding is None or tag & 7 != 2:  # unknown, or known with another wire type: skipped
            pos = _skip(buf, pos, end, tag, depth)
            continue
        n = buf[pos]
        pos += 1
        if n >= 0x80:
            n, pos = _varint_tail(buf, pos, n)
        stop = pos + n
        if stop > end:
            raise DecodeError("malformed protobuf: length runs past the end of its message")
        if field != kind:  # a oneof: setting another member clears the previous one
            if chunks:
                _drop(buf, kinds, (kind, chunks))
            kind = field
            chunks = []
        while pos < stop:  # the BytesList / FloatList / ... message
            tag = buf[pos]
            pos += 1
            if tag >= 0x80:
                tag, pos = _varint_tail(buf, pos, tag)
            if tag == 0x0A:  # field 1, length-delimited: a bytes value or a packed run of numbers
                n = buf[pos]
                pos += 1
                if n >= 0x80:
                    n, pos = _varint_tail(buf, pos, n)
                value_stop = pos + n
                if value_stop > stop:
                    raise DecodeError("malformed protobuf: length runs past the end of its message")
                if encoding >= FIXED32 and n % _WIDTH[encoding]:
                    raise DecodeError(
                        f"malformed protobuf: packed payload of {n} bytes is not a whole number "
                        f"of {_WIDTH[encoding]}-byte values"
                    )
                if BYTES < encoding < FIXED32 and n and buf[value_stop - 1] >= 0x80:
                    # Checked run by run: joined with the next run, the varint would run on into it.
                    raise DecodeError("malformed protobuf: packed varints end inside a varint")
                chunks.append((pos, value_stop) if positions else buf[pos:value_stop])
                pos = value_stop
            elif tag >> 3 == 1 and tag & 7 == _UNPACKED_WIRE_TYPE.get(encoding):
                pos = _unpacked_value(buf, pos, stop, encoding, chunks, positions)
            else:
                pos = _skip(buf, pos, stop, tag, depth + 1)
        pos = stop
    return kind, chunks


def _unpacked_value(
    buf: bytes, pos: int, end: int, encoding: int, chunks: list[Chunk], positions: bool
) -> int:
    """Append one value written unpacked (its own tag) to ``chunks``; return the position after it."""
    if positions:
        raise NotTemplatable
    start = pos
    if encoding in VARINTS:
        while buf[pos] >= 0x80:
            pos += 1
            if pos - start >= 10:
                raise DecodeError("malformed protobuf: varint longer than 10 bytes")
        pos += 1
    else:
        pos += _WIDTH[encoding]
    if pos > end:
        raise DecodeError("malformed protobuf: value runs past the end of its list")
    chunks.append(buf[start:pos])
    return pos


def _drop(buf: bytes, kinds: dict[int, int], slot: Slot) -> None:
    """Check the values of a slot about to be discarded (protobuf refuses a record with a broken one anywhere)."""
    kind, chunks = slot
    if not chunks or kinds[kind] not in VARINTS:
        return  # fixed-width runs are checked as they are found, bytes need no check
    for chunk in chunks:
        data = buf[chunk[0] : chunk[1]] if isinstance(chunk, tuple) else chunk
        decode_varints(np.frombuffer(data, np.uint8), np.array([0, len(data)], np.int64))


def _check_name(key: bytes) -> None:
    """Refuse a feature name that is not UTF-8, as protobuf does for a ``string`` map key."""
    try:
        key.decode("utf-8")
    except UnicodeDecodeError:
        raise DecodeError(f"malformed protobuf: feature name {key!r} is not valid UTF-8") from None


def _map_entry(
    buf: bytes, pos: int, end: int, check_names: bool = True
) -> tuple[bytes, list[tuple[int, int]]]:
    """Read a map entry: its key and the ``(start, stop)`` of each occurrence of its value field.

    ``check_names``: refuse a key that is not UTF-8 (a proto3 ``string``; OFRecord's proto2 keys are not
    checked by protobuf).
    """
    key = b""
    values: list[tuple[int, int]] = []
    while pos < end:
        tag = buf[pos]
        pos += 1
        if tag >= 0x80:
            tag, pos = _varint_tail(buf, pos, tag)
        if tag == 0x0A:
            stop, pos = _length(buf, pos, end)
            key = buf[pos:stop]
            if check_names and not key.isascii():
                _check_name(key)
        elif tag == 0x12:
            stop, pos = _length(buf, pos, end)
            values.append((pos, stop))
        elif tag >> 3 in (1, 2):
            raise DecodeError(f"malformed protobuf: a map entry field has wire type {tag & 7}")
        else:
            # protobuf's runtime drops such an entry and TensorFlow rejects the record: neither reading
            # is safe to guess, so it is an error.
            raise DecodeError(
                f"malformed protobuf: unexpected field {tag >> 3} in a feature map entry"
            )
        pos = stop
    return key, values


def scan_features(
    buf: bytes,
    pos: int,
    end: int,
    wanted: Container[bytes] | None,
    kinds: dict[int, int],
    out: dict[bytes, Slot],
    dont_care: list[tuple[int, int]] | None = None,
    *,
    depth: int = 1,
) -> None:
    """Read a ``Features`` (or ``OFRecord``) message in ``buf[pos:end]`` into ``out``.

    Parameters
    ----------
    buf, pos, end
        The serialized message and the part of it to read.
    wanted
        The feature names (UTF-8 bytes) to extract, the others being skipped by length; ``None`` for all.
    kinds
        :data:`TF_KINDS` or :data:`OFRECORD_KINDS`.
    out
        Receives ``name -> (kind, chunks)``; a later entry with the same name replaces an earlier one.
    dont_care
        When given, chunks are ``(start, stop)`` positions instead of bytes, the value regions of features
        that are not wanted are appended here, and :class:`NotTemplatable` is raised for unpacked values.
    depth
        How deeply the message is nested in the record (0 for an OFRecord, 1 for the ``Features`` of an
        Example); see :func:`_skip`.
    """
    positions = dont_care is not None
    feature_depth = depth + 2
    check_names = kinds is TF_KINDS
    while pos < end:
        tag = buf[pos]
        pos += 1
        if tag >= 0x80:
            tag, pos = _varint_tail(buf, pos, tag)
        if tag != 0x0A:
            pos = _skip(buf, pos, end, tag, depth)
            continue
        n = buf[pos]
        pos += 1
        if n >= 0x80:
            n, pos = _varint_tail(buf, pos, n)
        stop = pos + n
        if stop > end:
            raise DecodeError("malformed protobuf: length runs past the end of its message")
        key = None
        if n > 1 and buf[pos] == 0x0A and buf[pos + 1] < 0x80:
            # The usual layout, read inline: key, then one value, filling the entry. (An entry of 0 or 1
            # bytes is read by _map_entry: looking at its first two bytes would look past it.)
            key_stop = pos + 2 + buf[pos + 1]
            if key_stop < stop and buf[key_stop] == 0x12:
                n = buf[key_stop + 1]
                value_start = key_stop + 2
                if n >= 0x80:
                    n, value_start = _varint_tail(buf, value_start, n)
                if value_start + n == stop:
                    key = buf[pos + 2 : key_stop]
                    values = [(value_start, stop)]
        if key is None:
            key, values = _map_entry(buf, pos, stop, check_names)
        if wanted is None or key in wanted:
            # Several values are merged as protobuf merges them: as if their bytes were concatenated.
            slot = None
            for start, value_stop in values:
                slot = _scan_feature(buf, start, value_stop, kinds, positions, feature_depth, slot)
            if key in out:
                _drop(buf, kinds, out[key])
            out[key] = slot or (0, [])
        else:
            if check_names and not key.isascii():
                _check_name(key)
            if dont_care is not None:
                dont_care.extend(values)
        pos = stop


def scan_example(
    buf: bytes,
    wanted: Container[bytes] | None,
    kinds: dict[int, int],
    dont_care: list[tuple[int, int]] | None = None,
) -> dict[bytes, Slot]:
    """Read a serialized ``tf.train.Example`` (or, with :data:`OFRECORD_KINDS`, an ``OFRecord``).

    Returns ``name -> (kind, chunks)`` for the wanted features; see :func:`scan_features` for the arguments.
    """
    out: dict[bytes, Slot] = {}
    pos = 0
    end = len(buf)
    if kinds is OFRECORD_KINDS:  # an OFRecord is its feature map
        scan_features(buf, 0, end, wanted, kinds, out, dont_care, depth=0)
        return out
    while pos < end:
        tag = buf[pos]
        pos += 1
        if tag >= 0x80:
            tag, pos = _varint_tail(buf, pos, tag)
        if tag == 0x0A:
            stop, pos = _length(buf, pos, end)
            scan_features(buf, pos, stop, wanted, kinds, out, dont_care, depth=1)
            pos = stop
        else:
            pos = _skip(buf, pos, end, tag)
    return out


def _field_1(buf: bytes, pos: int, end: int, depth: int) -> Iterator[tuple[int, int]]:
    """The ``(start, stop)`` of each length-delimited field 1 in ``buf[pos:end]``, other fields skipped."""
    while pos < end:
        tag = buf[pos]
        pos += 1
        if tag >= 0x80:
            tag, pos = _varint_tail(buf, pos, tag)
        if tag == 0x0A:
            stop, pos = _length(buf, pos, end)
            yield pos, stop
            pos = stop
        else:
            pos = _skip(buf, pos, end, tag, depth)


def scan_sequence_example(
    buf: bytes, context: Container[bytes] | None, sequence: Container[bytes] | None
) -> tuple[dict[bytes, Slot], dict[bytes, list[Slot]]]:
    """Read a serialized ``tf.train.SequenceExample`` (the wanted names as for :func:`scan_features`).

    Returns
    -------
    context, feature_lists
        ``name -> (kind, chunks)`` for the wanted context features, and ``name -> [(kind, chunks), ...]``
        (one slot per time step) for the wanted feature lists.
    """
    ctx: dict[bytes, Slot] = {}
    lists: dict[bytes, list[Slot]] = {}
    pos = 0
    end = len(buf)
    while pos < end:
        tag = buf[pos]
        pos += 1
        if tag >= 0x80:
            tag, pos = _varint_tail(buf, pos, tag)
        if tag == 0x0A:
            stop, pos = _length(buf, pos, end)
            scan_features(buf, pos, stop, context, TF_KINDS, ctx, depth=1)
        elif tag == 0x12:
            stop, pos = _length(buf, pos, end)
            for entry, entry_stop in _field_1(buf, pos, stop, 1):
                key, values = _map_entry(buf, entry, entry_stop)
                if sequence is None or key in sequence:
                    # a FeatureList (3 deep) in one or more parts, concatenated; its steps are 4 deep
                    steps = [
                        _scan_feature(buf, start, step_stop, TF_KINDS, False, 4)
                        for part, part_stop in values
                        for start, step_stop in _field_1(buf, part, part_stop, 3)
                    ]
                    for old in lists.get(key, ()):
                        _drop(buf, TF_KINDS, old)
                    lists[key] = steps
        else:
            stop = _skip(buf, pos, end, tag)
        pos = stop
    return ctx, lists


def reason(exc: Exception) -> str:
    """What is wrong with a message the scanner stopped on (an ``IndexError``: it ended too soon)."""
    return str(exc) if isinstance(exc, DecodeError) else "malformed protobuf: message truncated"


def as_buffer(data: object, what: str) -> bytes:
    """Return ``data`` as ``bytes``: any object exporting a 1-D, C-contiguous buffer of single bytes.

    Accepted are ``bytes`` (returned as is), ``bytearray``, ``memoryview``, ``mmap`` objects, numpy arrays
    of ``uint8``/``int8`` and the like; anything else raises a ``TypeError`` naming its type.
    """
    if type(data) is bytes:
        return data
    if isinstance(data, str):
        raise TypeError(f"{what} must be bytes-like, not str (encode it first)")
    try:
        view = memoryview(data)  # type: ignore[arg-type]
    except TypeError:
        raise TypeError(f"{what} must be bytes-like, not {type(data).__name__}") from None
    with view:
        if view.itemsize != 1 or view.ndim > 1 or not view.c_contiguous:
            layout = "" if view.c_contiguous else ", not contiguous"
            raise TypeError(
                f"{what} must be a 1-D C-contiguous buffer of bytes; this {type(data).__name__} has "
                f"{view.ndim} dimension(s) and {view.itemsize}-byte items{layout}"
            )
        return view.tobytes()


def decode_varints(
    data: npt.NDArray[np.uint8], bounds: npt.NDArray[np.int64]
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    """Decode the concatenated packed varint payloads of many records at once.

    Parameters
    ----------
    data
        The payload bytes of all records, back to back.
    bounds
        Byte offsets: record ``i`` owns ``data[bounds[i]:bounds[i + 1]]``.

    Returns
    -------
    values, counts
        All values as int64 (two's complement, as protobuf's int64 and int32), and the number of values
        in each record.

    Raises
    ------
    DecodeError
        A record's payload does not end at the end of a varint, or a varint is longer than 10 bytes;
        ``.index`` is the position of that record in ``bounds``.
    """
    sizes = np.diff(bounds)
    nonempty = np.flatnonzero(sizes)
    unfinished = data[bounds[1:][nonempty] - 1] >= 0x80
    if unfinished.any():
        index = int(nonempty[np.argmax(unfinished)])
        raise DecodeError("malformed protobuf: packed varints end inside a varint", index=index)
    try:
        values, starts = decode_all(data)
    except VarintError as exc:  # every record ends a varint (checked above): one is too long
        index = int(np.searchsorted(bounds, exc.offset, side="right") - 1)
        raise DecodeError("malformed protobuf: varint longer than 10 bytes", index=index) from None
    return values.view(np.int64), np.diff(np.searchsorted(starts, bounds))


def narrow(values: npt.NDArray[np.int64], encoding: int) -> npt.NDArray[Any]:
    """The varints of an ``int32`` field cut to their low 32 bits, as protobuf reads them."""
    return values.astype(np.int32) if encoding == VARINT32 else values


def decode_chunks(chunks: list[bytes], encoding: int) -> list[bytes] | npt.NDArray[Any]:
    """The values of one feature of one record, from the chunks the scanner found for it.

    Returns the ``bytes`` values themselves, or a fresh, writable 1-D array in native byte order: int64,
    int32 (``VARINT32``), float32 or float64, every float bit pattern kept.
    """
    if encoding == BYTES:
        return chunks
    data = b"".join(chunks)
    if encoding >= FIXED32:
        return np.frombuffer(data, FIXED_DTYPES[encoding]).astype(_NATIVE[encoding])
    if data.isascii():  # every value below 128, one byte each (labels, flags, small counts)
        return np.frombuffer(data, np.uint8).astype(_NATIVE[encoding])
    if len(data) > _FEW_VARINT_BYTES:
        bounds = np.array([0, len(data)], np.int64)
        return narrow(decode_varints(np.frombuffer(data, np.uint8), bounds)[0], encoding)
    values = []  # a few values: a loop beats the vectorised decode's set-up
    value = shift = 0
    # The scanner checked that the last varint ends; the length of each is checked here.
    for byte in data:
        value |= (byte & 0x7F) << shift
        shift += 7
        if byte < 0x80:
            values.append(value & 0xFFFFFFFFFFFFFFFF)
            value = shift = 0
        elif shift >= 70:
            raise DecodeError("malformed protobuf: varint longer than 10 bytes")
    return narrow(np.array(values, np.uint64).view(np.int64), encoding)
