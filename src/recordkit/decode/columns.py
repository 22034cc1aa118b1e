"""Turn a batch of serialized records into per-feature columns of numpy values.

A :class:`Column` holds, for one feature over a batch, the kind each record carries, the number of values
each record has, and the values themselves, flat and in record order (one flat array per kind).

Two paths fill the columns, and both give the same result:

* **template path** -- records of the same length are often laid out identically: the same features in
  the same order, with the same keys and lengths, differing only inside the value payloads. The first
  record of such a group is scanned once, recording where each value payload lies (and the layout is kept
  for the next batches' records of that length, so that shuffled batches need no new scan); every other
  record is then checked to have exactly the same bytes everywhere else (one vectorised comparison), and the
  payloads of the whole group are cut out of a 2-D byte array at once. Records that differ anywhere that
  matters fall back to the scanner.
* **scanner path** -- :mod:`recordkit.decode._wire` walks each record, and the payloads of the batch are joined
  and decoded with one ``np.frombuffer`` or one vectorised varint decode per feature.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

import numpy as np

from recordkit.decode import _wire
from recordkit.errors import DecodeError

if TYPE_CHECKING:
    from collections.abc import Iterable, Sequence

    import numpy.typing as npt

__all__ = [
    "Column",
    "Piece",
    "SequenceColumn",
    "as_records",
    "collect",
    "collect_sequences",
    "merge_pieces",
]

#: Groups smaller than this are not worth the template set-up cost.
_MIN_TEMPLATE_GROUP: Final = 8
#: How many layouts are tried per group of equally long records before the rest are scanned one by one.
_TEMPLATE_ROUNDS: Final = 16
#: Misfits of a round are given another template only if this many remain (else scanning them is cheaper).
_MIN_RETEMPLATE_GROUP: Final = 64

Int64Array = np.ndarray[Any, np.dtype[np.int64]]
# rows (sorted record numbers), values per row, values (flat, or 2-D for rows of equal length)
Piece = tuple[Int64Array, Int64Array, np.ndarray[Any, Any]]


@dataclass
class Column:
    """One feature over a batch of ``n`` records (or of ``n`` time steps, for feature lists).

    Attributes
    ----------
    kinds
        ``(n,)`` int8: the ``Feature`` oneof field number each record carries, 0 when the feature is
        absent or has no kind set.
    counts
        ``(n,)`` int64: the number of values of each record (0 when absent).
    pieces
        kind -> pieces ``(rows, counts, values)``: the records ``rows`` (sorted) of that kind, their value
        counts, and their values (int64, float32, float64, or an object array of ``bytes``) -- flat, or
        2-D ``(len(rows), width)`` when every one of these records has ``width`` values. The pieces of a
        kind cover disjoint records; :func:`merge_pieces` puts them in record order.
    """

    kinds: npt.NDArray[np.int8]
    counts: Int64Array
    pieces: dict[int, list[Piece]]


@dataclass
class SequenceColumn:
    """One feature list over a batch of SequenceExamples.

    Attributes
    ----------
    present
        ``(n,)`` bool: whether the record has a feature list of that name.
    steps
        ``(n,)`` int64: the number of time steps of each record.
    column
        The steps of all records, back to back, as a :class:`Column`.
    """

    present: npt.NDArray[np.bool_]
    steps: Int64Array
    column: Column


def as_records(records: Iterable[Any]) -> list[bytes]:
    """Return the batch as a list of ``bytes``, copying other buffers (see :func:`_wire.as_buffer`) once."""
    if isinstance(records, (bytes, bytearray, memoryview, str)):
        raise TypeError(
            f"records must be an iterable of serialized records, not one {type(records).__name__}"
        )
    out = list(records)
    if set(map(type, out)) <= {bytes}:  # the usual batch: checked without a Python loop
        return out
    return [
        record if type(record) is bytes else _wire.as_buffer(record, "a record") for record in out
    ]


def _record_error(exc: Exception, index: int) -> DecodeError:
    """The error for a record that could not be read, carrying its index."""
    return DecodeError(f"record {index}: {_wire.reason(exc)}", index=index)


def _scanned_pieces(
    found: list[tuple[int, _wire.Slot]], kinds_table: dict[int, int]
) -> dict[int, Piece]:
    """Decode what the scanner found for one feature, ``(row, (kind, chunks))`` per record: one batch per kind."""
    by_kind: dict[int, list[tuple[int, _wire.Slot]]] = {}
    for item in found:
        if item[1][0]:
            by_kind.setdefault(item[1][0], []).append(item)
    out = {}
    for kind, items in by_kind.items():
        rows = np.fromiter((row for row, _ in items), np.int64, len(items))
        out[kind] = _decode_chunks(rows, [slot[1] for _, slot in items], kinds_table[kind])
    return out


def _decode_chunks(rows: Int64Array, chunk_lists: list[list[Any]], encoding: int) -> Piece:
    """Decode the value chunks of the records ``rows`` (all of one kind) in one go."""
    flat = [chunk for chunks in chunk_lists for chunk in chunks]
    if encoding == _wire.BYTES:
        counts = np.fromiter(map(len, chunk_lists), np.int64, len(chunk_lists))
        values = np.empty(len(flat), object)
        values[:] = flat
        return rows, counts, values
    if len(flat) == len(chunk_lists) and min(map(len, chunk_lists)) == 1:
        sizes = np.fromiter(
            map(len, flat), np.int64, len(flat)
        )  # one chunk per record, the usual case
    else:
        sizes = np.fromiter(
            (sum(map(len, chunks)) for chunks in chunk_lists), np.int64, len(chunk_lists)
        )
    data = bytearray().join(flat)  # a bytearray, so that the arrays viewing it are writable
    if encoding in _wire.VARINTS:
        bounds = np.zeros(len(sizes) + 1, np.int64)
        np.cumsum(sizes, out=bounds[1:])
        try:
            values, counts = _wire.decode_varints(np.frombuffer(data, np.uint8), bounds)
        except DecodeError as exc:
            raise _record_error(exc, int(rows[exc.index or 0])) from None
        return rows, counts, _wire.narrow(values, encoding)
    dtype = _wire.FIXED_DTYPES[encoding]
    return rows, sizes // dtype.itemsize, np.frombuffer(data, dtype)


def merge_pieces(pieces: list[Piece]) -> Piece:
    """Merge pieces covering disjoint sets of records into one piece with flat values in record order."""
    if len(pieces) == 1:
        rows, counts, values = pieces[0]
        return rows, counts, values.reshape(-1)
    rows = np.concatenate([p[0] for p in pieces])
    counts = np.concatenate([p[1] for p in pieces])
    values = np.concatenate([p[2].reshape(-1) for p in pieces])
    order = np.argsort(rows, kind="stable")
    starts = np.cumsum(counts) - counts
    sorted_counts = counts[order]
    new_starts = np.cumsum(sorted_counts) - sorted_counts
    gather = np.repeat(starts[order] - new_starts, sorted_counts) + np.arange(int(counts.sum()))
    return rows[order], sorted_counts, values[gather]


def _build_column(n: int, pieces_by_kind: dict[int, list[Piece]]) -> Column:
    kinds = np.zeros(n, np.int8)
    counts = np.zeros(n, np.int64)
    for kind, pieces in pieces_by_kind.items():
        for rows, piece_counts, _ in pieces:
            kinds[rows] = kind
            counts[rows] = piece_counts
    return Column(kinds, counts, pieces_by_kind)


@dataclass(frozen=True)
class _Template:
    """The layout of one record, to find the records laid out the same way.

    Attributes
    ----------
    layout
        Per wanted feature found: its kind and the byte regions of its value payloads.
    checked, expected
        The positions of every byte outside the value payloads, and the template's bytes there.
    varint_ends
        The last byte of each varint payload, which must end a varint in every record that matches.
    """

    layout: dict[bytes, tuple[int, Any]]
    checked: npt.NDArray[np.intp]
    expected: npt.NDArray[np.uint8]
    varint_ends: list[int]

    def matches(self, table: npt.NDArray[np.uint8]) -> npt.NDArray[np.bool_]:
        """Which rows of ``table`` (records as rows of bytes, of the template's length) share its layout."""
        matches: npt.NDArray[np.bool_] = (table[:, self.checked] == self.expected).all(axis=1)
        for end in self.varint_ends:
            matches &= table[:, end] < 0x80
        return matches


_TEMPLATES: dict[tuple[int, frozenset[bytes], int], _Template] = {}
"""The last template made for records of a length and a set of wanted features (and a kinds table): the
next batches' groups are checked against it first, so that a layout is scanned once, not once per batch."""
_TEMPLATES_LIMIT: Final = 256


def _make_template(
    first: bytes, wanted: frozenset[bytes], kinds_table: dict[int, int]
) -> _Template | None:
    """The template of the record ``first``, or ``None`` when it cannot serve as one (unpacked values, or
    malformed: the scanner will then say what is wrong)."""
    dont_care: list[tuple[int, int]] = []
    try:
        layout = _wire.scan_example(first, wanted, kinds_table, dont_care)
    except (_wire.NotTemplatable, DecodeError, IndexError):
        return None
    compare = np.ones(len(first), bool)
    for start, stop in dont_care:
        compare[start:stop] = False
    varint_ends = []
    for kind, regions in layout.values():
        varint = bool(kind) and kinds_table[kind] in _wire.VARINTS
        for start, stop in regions:
            compare[start:stop] = False
            if varint and stop > start:
                varint_ends.append(stop - 1)
    checked = np.flatnonzero(compare)
    expected = np.frombuffer(first, np.uint8)[checked]
    return _Template(layout, checked, expected, varint_ends)


def _template_pieces(
    records: Sequence[bytes],
    rows: list[int],
    wanted: frozenset[bytes],
    kinds_table: dict[int, int],
) -> tuple[list[int], dict[bytes, tuple[int, Piece]]] | None:
    """Decode a group of equally long records that share a layout: the one of the template last made for
    their length, when some of them have it, else the first record's.

    Returns the rows that did not match the layout (to be scanned one by one) and, per wanted feature
    present in the layout, its kind and decoded piece; ``None`` when the first record cannot serve as a
    template (unpacked values, or malformed: the scanner will then say what is wrong).
    """
    length = len(records[rows[0]])
    group = records if len(rows) == len(records) else [records[r] for r in rows]
    table = np.frombuffer(b"".join(group), np.uint8).reshape(len(rows), length)
    key = (length, wanted, id(kinds_table))
    template = _TEMPLATES.get(key)
    matches = template.matches(table) if template is not None else None
    if template is None or matches is None or not matches[0]:
        # The first record decides: a layout it does not share is not this group's.
        template = _make_template(records[rows[0]], wanted, kinds_table)
        if template is None:
            return None
        if len(_TEMPLATES) >= _TEMPLATES_LIMIT:
            _TEMPLATES.clear()
        _TEMPLATES[key] = template
        matches = template.matches(table)
    layout = template.layout
    if not matches.all():
        table = table[matches]
    row_array = np.asarray(rows, np.int64)
    good_rows = row_array[matches]
    misfits = row_array[~matches].tolist()
    out: dict[bytes, tuple[int, Piece]] = {}
    for name, (kind, regions) in layout.items():
        if not kind:
            continue
        spans: list[tuple[int, int]] = regions
        encoding = kinds_table[kind]
        m = len(good_rows)
        if encoding == _wire.BYTES:
            flat = [records[r][a:b] for r in good_rows.tolist() for a, b in spans]
            values = np.empty(len(flat), object)
            values[:] = flat
            out[name] = (kind, (good_rows, np.full(m, len(spans), np.int64), values))
            continue
        if len(spans) == 1:  # a strided view: the payload bytes are copied once, by the consumer
            data = table[:, spans[0][0] : spans[0][1]]
        elif spans:
            data = np.concatenate([table[:, a:b] for a, b in spans], axis=1)
        else:  # present, with an empty list
            data = np.zeros((m, 0), np.uint8)
        if encoding in _wire.VARINTS:
            bounds = np.arange(m + 1, dtype=np.int64) * data.shape[1]
            try:
                ints, counts = _wire.decode_varints(np.ascontiguousarray(data).reshape(-1), bounds)
            except DecodeError:
                return None
            out[name] = (kind, (good_rows, counts, _wire.narrow(ints, encoding)))
        else:
            dtype = _wire.FIXED_DTYPES[encoding]
            width = data.shape[1] // dtype.itemsize
            out[name] = (kind, (good_rows, np.full(m, width, np.int64), data.view(dtype)))
    return misfits, out


def _by_length(records: Sequence[bytes]) -> list[list[int]]:
    """The indexes of the records, grouped by record length (each group in record order)."""
    lengths = np.fromiter(map(len, records), np.int64, len(records))
    if not len(lengths) or lengths.min() == lengths.max():
        return [list(range(len(records)))]
    order = np.argsort(lengths, kind="stable")
    cuts = np.flatnonzero(np.diff(lengths[order])) + 1
    return [group.tolist() for group in np.split(order, cuts)]


def collect(
    records: Sequence[bytes], names: Sequence[str], *, ofrecord: bool = False
) -> dict[str, Column]:
    """Read the features ``names`` from every record of a batch of Examples (or OFRecords).

    Parameters
    ----------
    records
        Serialized ``tf.train.Example`` (or ``oneflow.OFRecord`` with ``ofrecord=True``) messages.
    names
        The features to extract.

    Raises
    ------
    DecodeError
        A record is malformed; ``.index`` says which.
    """
    kinds_table = _wire.OFRECORD_KINDS if ofrecord else _wire.TF_KINDS
    keys = {name.encode(): name for name in names}
    wanted = frozenset(keys)
    pieces: dict[bytes, dict[int, list[Piece]]] = {key: {} for key in keys}

    to_scan: list[int] = []
    for rows in _by_length(records):
        # Records of one length may have several layouts (a longer name beside a shorter list): the first
        # misfit of each round is the next template, for a bounded number of rounds.
        for round_ in range(_TEMPLATE_ROUNDS):
            if len(rows) < (_MIN_TEMPLATE_GROUP if round_ == 0 else _MIN_RETEMPLATE_GROUP):
                break
            result = _template_pieces(records, rows, wanted, kinds_table)
            if result is None:
                break
            misfits, found = result
            for key, (kind, piece) in found.items():
                pieces[key].setdefault(kind, []).append(piece)
            if len(misfits) >= len(rows):
                break
            rows = misfits
        to_scan.extend(rows)

    if to_scan:
        to_scan.sort()
        scanned: dict[bytes, list[tuple[int, _wire.Slot]]] = {key: [] for key in keys}
        i = -1
        try:
            for i in to_scan:
                for key, slot in _wire.scan_example(records[i], wanted, kinds_table).items():
                    scanned[key].append((i, slot))
        except (DecodeError, IndexError) as exc:
            raise _record_error(exc, i) from None
        for key, slots in scanned.items():
            for kind, piece in _scanned_pieces(slots, kinds_table).items():
                pieces[key].setdefault(kind, []).append(piece)

    n = len(records)
    return {name: _build_column(n, pieces[key]) for key, name in keys.items()}


def collect_sequences(
    records: Sequence[bytes], context_names: Sequence[str], sequence_names: Sequence[str]
) -> tuple[dict[str, Column], dict[str, SequenceColumn]]:
    """Read context features and feature lists from a batch of SequenceExamples.

    Raises
    ------
    DecodeError
        A record is malformed; ``.index`` says which.
    """
    context_keys = {name.encode(): name for name in context_names}
    sequence_keys = {name.encode(): name for name in sequence_names}
    context_wanted = frozenset(context_keys)
    sequence_wanted = frozenset(sequence_keys)
    n = len(records)
    context_found: dict[bytes, list[tuple[int, _wire.Slot]]] = {key: [] for key in context_keys}
    step_found: dict[bytes, list[tuple[int, _wire.Slot]]] = {key: [] for key in sequence_keys}
    present = {key: np.zeros(n, bool) for key in sequence_keys}
    steps = {key: np.zeros(n, np.int64) for key in sequence_keys}
    next_step = dict.fromkeys(sequence_keys, 0)
    for i, record in enumerate(records):
        try:
            context, lists = _wire.scan_sequence_example(record, context_wanted, sequence_wanted)
        except (DecodeError, IndexError) as exc:
            raise _record_error(exc, i) from None
        for key, slot in context.items():
            context_found[key].append((i, slot))
        for key, step_slots in lists.items():
            present[key][i] = True
            steps[key][i] = len(step_slots)
            step = next_step[key]
            step_found[key] += enumerate(step_slots, step)
            next_step[key] = step + len(step_slots)

    def column(found: list[tuple[int, _wire.Slot]], size: int) -> Column:
        by_kind = {kind: [piece] for kind, piece in _scanned_pieces(found, _wire.TF_KINDS).items()}
        return _build_column(size, by_kind)

    context_columns = {name: column(context_found[key], n) for key, name in context_keys.items()}
    sequence_columns = {
        name: SequenceColumn(present[key], steps[key], column(step_found[key], next_step[key]))
        for key, name in sequence_keys.items()
    }
    return context_columns, sequence_columns
