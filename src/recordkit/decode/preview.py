"""HTML previews of records and parsed batches, for notebooks (the ``_repr_html_`` of readers, datasets and
parsed batches).

Record contents are untrusted: every piece of text is escaped (:func:`html.escape`), and the work is bounded
whatever the input: at most :data:`MAX_RECORDS` records, :data:`MAX_FEATURES` features per record and
:data:`MAX_VALUES` values per feature are shown, text is cut at :data:`MAX_TEXT` characters, a record over
:data:`MAX_PARSED_BYTES` is not decoded, and JPEG and PNG values are embedded as ``<img>`` thumbnails (base64
``data:`` URLs, scaled down by CSS) only up to :data:`MAX_IMAGE_BYTES` each and :data:`MAX_PAGE_IMAGE_BYTES`
per table. Images are not decoded: they are recognised by their magic bytes and their size read from their
headers.

A record is shown as the payload kind :func:`~recordkit.decode.payloads.detect_payload` tells for it (the one
detector, which ``recordkit info`` also reports), decoded by recordkit's own decoders
(:func:`~recordkit.decode.payloads.decode_payload`): a ``tf.train.Example``, a ``tf.train.SequenceExample`` or a
OneFlow ``OFRecord`` (tried first in a file whose format holds OFRecords) feature by feature; any other record
as its bytes, text when printable, else its first bytes in hex.
"""

from __future__ import annotations

import base64
import contextlib
import html
import itertools
import struct
import zlib
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any

from recordkit.decode.messages import DecodedSequenceExample
from recordkit.decode.payloads import (
    RAW_PAYLOAD,
    SEQUENCE_EXAMPLE_PAYLOAD,
    decode_payload,
    detect_payload,
)
from recordkit.decode.schema import list_kind
from recordkit.formats.payloads import EXAMPLE_PAYLOAD, OFRECORD_PAYLOAD
from recordkit.support.signatures import JPEG_SIGNATURE, PNG_SIGNATURE

__all__ = [
    "MAX_FEATURES",
    "MAX_IMAGE_BYTES",
    "MAX_PAGE_IMAGE_BYTES",
    "MAX_PARSED_BYTES",
    "MAX_RECORDS",
    "MAX_TEXT",
    "MAX_VALUES",
    "THUMBNAIL_PX",
    "batch_html",
    "error_text",
    "records_html",
]

MAX_RECORDS = 5
"""The number of records (or batch rows) a preview shows."""
MAX_FEATURES = 32
"""The number of features shown per record (and columns of a batch)."""
MAX_VALUES = 8
"""The number of values shown per feature."""
MAX_TEXT = 80
"""The number of characters of text (and twice the number of hex digits) shown per value."""
MAX_PARSED_BYTES = 16 << 20
"""Records larger than this are not parsed: their size and first bytes are shown."""
MAX_IMAGE_BYTES = 256 << 10
"""An encoded JPEG or PNG value larger than this is described, not embedded."""
MAX_PAGE_IMAGE_BYTES = 2 << 20
"""The encoded bytes of all the images one preview embeds together."""
THUMBNAIL_PX = 96
"""The largest width and height of a thumbnail, in CSS pixels."""

_STYLE = (
    "<style>"
    ".rk-preview{font-family:sans-serif;font-size:12px}"
    ".rk-preview table{border-collapse:collapse;margin:4px 0}"
    ".rk-preview th,.rk-preview td{border:1px solid #ccc;padding:2px 6px;text-align:left;"
    "vertical-align:top}"
    ".rk-preview th{background:#eef2f7}"
    f".rk-preview img{{max-width:{THUMBNAIL_PX}px;max-height:{THUMBNAIL_PX}px;margin:1px;"
    "image-rendering:pixelated}"
    ".rk-preview .rk-error{color:#b00020;font-weight:bold}"
    ".rk-preview code{font-size:11px}"
    "</style>"
)


def _e(text: object) -> str:
    return html.escape(str(text), quote=True)


def _cut(text: str, limit: int = MAX_TEXT) -> str:
    return text if len(text) <= limit else text[:limit] + "…"


def error_text(exc: BaseException) -> str:
    """The HTML (escaped) naming an error's type and message, as a preview shows a damaged record."""
    return f'<span class="rk-error">{_e(type(exc).__name__)}</span>: {_e(_cut(str(exc), 400))}'


class _Budget:
    """What is left of the bytes of images one preview may embed."""

    def __init__(self) -> None:
        self.left = MAX_PAGE_IMAGE_BYTES


# -- values ------------------------------------------------------------------------------------------


def _image_kind(value: bytes) -> str | None:
    if value.startswith(JPEG_SIGNATURE):
        return "jpeg"
    if value.startswith(PNG_SIGNATURE):
        return "png"
    return None


def _png_size(value: bytes) -> tuple[int, int] | None:
    if len(value) >= 24 and value[12:16] == b"IHDR":
        width, height = struct.unpack(">II", value[16:24])
        return width, height
    return None


def _jpeg_size(value: bytes) -> tuple[int, int] | None:
    """The size in a JPEG's first start-of-frame marker, walking at most 64 segments."""
    pos = 2
    for _ in range(64):
        while pos < len(value) and value[pos] == 0xFF:
            pos += 1
        if pos + 3 > len(value):
            return None
        marker = value[pos]
        pos += 1
        if marker in (0xD8, 0x01) or 0xD0 <= marker <= 0xD7:
            continue
        (length,) = struct.unpack(">H", value[pos : pos + 2])
        if 0xC0 <= marker <= 0xCF and marker not in (0xC4, 0xC8, 0xCC):
            if pos + 7 > len(value):
                return None
            height, width = struct.unpack(">HH", value[pos + 3 : pos + 7])
            return width, height
        pos += length
    return None


def _image_html(value: bytes, kind: str, budget: _Budget, label: str | None = None) -> str:
    if label is None:
        size = _png_size(value) if kind == "png" else _jpeg_size(value)
        label = (
            kind.upper() + ("" if size is None else f" {size[0]}x{size[1]}") + f", {len(value)} B"
        )
    if len(value) > MAX_IMAGE_BYTES:
        return f"<i>{_e(label)} (not shown: over {MAX_IMAGE_BYTES >> 10} KiB)</i>"
    if len(value) > budget.left:
        return f"<i>{_e(label)} (not shown: the preview's images are over {MAX_PAGE_IMAGE_BYTES >> 20} MiB)</i>"
    budget.left -= len(value)
    data = base64.b64encode(value).decode("ascii")
    return f'<img src="data:image/{kind};base64,{data}" title="{_e(label)}" alt="{_e(label)}">'


def _hex(value: bytes) -> str:
    shown = bytes(value[: MAX_TEXT // 2])
    more = "…" if len(value) > len(shown) else ""
    return f"<code>{_e(shown.hex(' '))}{more}</code>"


def _bytes_html(value: bytes, budget: _Budget) -> str:
    kind = _image_kind(value)
    if kind is not None:
        return _image_html(value, kind, budget)
    head = bytes(value[: MAX_TEXT * 4])
    try:
        text = head.decode("utf-8")
    except UnicodeDecodeError:
        text = head[:-3].decode("utf-8", "ignore") if len(value) > len(head) else ""
        if not text:
            return _hex(value)
    if text and not all(c.isprintable() or c in "\t\n" for c in text):
        return _hex(value)
    return f"<code>{_e(repr(_cut(text)))}</code>"


def _number(value: Any, single: bool = False) -> str:
    """A number as text: a float32 (``single``) with the 7 digits it holds, a double in full."""
    if isinstance(value, float):
        return _e(repr(float(f"{value:.7g}")) if single else repr(value))
    return _e(_cut(str(value), 24))


def _values_html(values: Any, budget: _Budget) -> str:
    """The first :data:`MAX_VALUES` of a list or array (a float32 array's with the 7 digits they hold)."""
    head = values[:MAX_VALUES]
    single = str(getattr(values, "dtype", "")) == "float32"
    shown = [
        _bytes_html(v, budget) if isinstance(v, bytes) else _number(v, single)
        for v in (head.tolist() if hasattr(head, "tolist") else head)
    ]
    if len(values) > MAX_VALUES:
        shown.append(f"… ({len(values) - MAX_VALUES} more)")
    return ", ".join(shown)


# -- record payloads -------------------------------------------------------------------------------

_TITLES = {
    EXAMPLE_PAYLOAD: "Example",
    SEQUENCE_EXAMPLE_PAYLOAD: "SequenceExample",
    OFRECORD_PAYLOAD: "OFRecord",
}


def _features_list(features: Mapping[str, Any], budget: _Budget) -> str:
    """Decoded features as lines of ``name kind (length): values``."""
    lines = []
    for name in sorted(features)[:MAX_FEATURES]:
        value = features[name]
        shown = _values_html(value, budget)
        lines.append(
            f"<b>{_e(_cut(name, 40))}</b> <i>{_e(list_kind(value))} ({len(value)})</i>: {shown}"
        )
    if len(features) > MAX_FEATURES:
        lines.append(f"… {len(features) - MAX_FEATURES} more features")
    return "<br>".join(lines)


def _sequence_table(decoded: DecodedSequenceExample, budget: _Budget) -> str:
    context = _features_list(decoded.context, budget)
    rows = []
    for name in sorted(decoded.feature_lists)[:MAX_FEATURES]:
        steps = decoded.feature_lists[name]
        kinds = sorted({list_kind(step) for step in steps[:MAX_VALUES]})
        first = _values_html(steps[0], budget) if steps else ""
        rows.append(
            f"<tr><td><b>{_e(_cut(name, 40))}</b></td><td>{_e('/'.join(kinds))}</td>"
            f"<td>{len(steps)} steps</td><td>step 0: {first}</td></tr>"
        )
    head = "<tr><th>feature list</th><th>kind</th><th>length</th><th>values</th></tr>"
    return (
        f"<i>context</i><br>{context}<br><i>feature lists</i><table>{head}{''.join(rows)}</table>"
    )


def _decode(record: bytes, payload: str | None) -> tuple[str, Any]:
    """``(payload kind, decoded record)``: the kind :func:`detect_payload` tells for this one record
    (``payload`` tried first), or ``raw`` and ``None`` for a record over :data:`MAX_PARSED_BYTES`."""
    if len(record) > MAX_PARSED_BYTES:
        return RAW_PAYLOAD, None
    kind = detect_payload([record], prefer=payload) or RAW_PAYLOAD
    return kind, None if kind == RAW_PAYLOAD else decode_payload(kind, record)


def _column_heads(rows: Sequence[tuple[str, Any]]) -> tuple[list[str], list[str], int]:
    """The feature columns of the records shown (in order of first appearance, each record's names
    sorted), a ``kind, length`` line for each, and the number of names left out."""
    seen: dict[str, tuple[set[str], set[int]]] = {}
    for kind, decoded in rows:
        if decoded is None or kind == SEQUENCE_EXAMPLE_PAYLOAD:
            continue
        for name in sorted(decoded):
            kinds, lengths = seen.setdefault(name, (set(), set()))
            kinds.add(list_kind(decoded[name]))
            lengths.add(len(decoded[name]))
    names = list(seen)[:MAX_FEATURES]
    lines = []
    for name in names:
        kinds, lengths = seen[name]
        low, high = min(lengths), max(lengths)
        lines.append(f"{'/'.join(sorted(kinds))} · {low if low == high else f'{low}-{high}'}")
    return names, lines, len(seen) - len(names)


def _record_cells(
    record: bytes, parsed: tuple[str, Any], names: Sequence[str], budget: _Budget
) -> str:
    kind, decoded = parsed
    span = f'<td colspan="{max(len(names), 1)}">'
    if decoded is None:
        if len(record) > MAX_PARSED_BYTES:
            return f"{span}not parsed (over {MAX_PARSED_BYTES >> 20} MiB): {_hex(record)}</td>"
        return f"{span}{_bytes_html(bytes(record), budget)}</td>"
    if kind == SEQUENCE_EXAMPLE_PAYLOAD:
        return f"{span}{_sequence_table(decoded, budget)}</td>"
    return "".join(
        f"<td>{_values_html(decoded[name], budget)}</td>" if name in decoded else "<td>—</td>"
        for name in names
    )


def _facts_html(title: str, facts: Sequence[tuple[str, object]]) -> str:
    rows = "".join(f"<tr><th>{_e(key)}</th><td>{_e(value)}</td></tr>" for key, value in facts)
    return f"<b>{_e(title)}</b><table>{rows}</table>"


def records_html(
    title: str,
    facts: Sequence[tuple[str, object]],
    records: Iterable[bytes] | None,
    *,
    payload: str | None = None,
    note: str | None = None,
) -> str:
    """An HTML preview: a table of ``facts`` (label, value), then the first :data:`MAX_RECORDS` of
    ``records`` decoded (``None``: no records section).

    An error raised while ``records`` is iterated (a damaged record) ends the table with a row holding its
    type and message; it does not propagate. Each record is shown as the payload kind
    :func:`~recordkit.decode.payloads.detect_payload` tells for it, ``payload`` (the format's own,
    :attr:`~recordkit.formats.base.RecordFormat.payload`) tried first, decoded by
    :func:`~recordkit.decode.payloads.decode_payload`; a record of no message kind as its bytes. ``note`` is shown (escaped) under the records.
    """
    parts = [_STYLE, '<div class="rk-preview">', _facts_html(title, facts)]
    if records is not None:
        parts.append(_records_table(iter(records), payload))
    if note:
        parts.append(f"<p>{_e(note)}</p>")
    parts.append("</div>")
    return "".join(parts)


def _records_table(records: Iterator[bytes], payload: str | None) -> str:
    budget = _Budget()
    read: list[bytes] = []
    end = ""
    while len(read) <= MAX_RECORDS:
        try:
            read.append(next(records))
        except StopIteration:  # noqa: PERF203 - the loop ends at the first exception
            break
        except Exception as exc:  # noqa: BLE001 - a damaged record is shown, never raised from a repr
            end = error_text(exc)
            break
    more = len(read) > MAX_RECORDS
    read = read[:MAX_RECORDS]
    parsed = []
    for record in read:
        try:
            parsed.append(_decode(record, payload))
        except Exception as exc:  # noqa: BLE001, PERF203 - a preview shows what went wrong instead
            parsed.append(("?", exc))
    names, lines, left = _column_heads([p for p in parsed if not isinstance(p[1], Exception)])
    width = 3 + max(len(names), 1) + (1 if left else 0)
    head = "".join(f"<th>{_e(_cut(name, 40))}</th>" for name in names) or "<th>content</th>"
    kinds = "".join(f"<td><i>{_e(line)}</i></td>" for line in lines) or "<td></td>"
    if left:
        head += f'<th rowspan="2">… {left} more features</th>'
    top = '<th rowspan="2">#</th><th rowspan="2">bytes</th><th rowspan="2">payload</th>'
    rows = [f"<tr>{top}{head}</tr><tr>{kinds}</tr>"]
    for i, (record, (kind, decoded)) in enumerate(zip(read, parsed, strict=True)):
        if isinstance(decoded, Exception):
            cells = f'<td colspan="{max(len(names), 1)}">{error_text(decoded)}</td>'
        else:
            cells = _record_cells(record, (kind, decoded), names, budget)
        shown = _e(_TITLES.get(kind, kind))
        rows.append(f"<tr><td>{i}</td><td>{len(record)}</td><td>{shown}</td>{cells}</tr>")
    if end:
        rows.append(f'<tr><td>{len(read)}</td><td colspan="{width - 1}">{end}</td></tr>')
    elif more:
        rows.append(
            f'<tr><td colspan="{width}">… more records (the first {MAX_RECORDS} are shown)</td></tr>'
        )
    elif not read:
        rows.append(f'<tr><td colspan="{width}">no records</td></tr>')
    return f"<table>{''.join(rows)}</table>"


# -- parsed batches ----------------------------------------------------------------------------------


def _png(pixels: bytes, width: int, height: int, channels: int) -> bytes:
    """A PNG file of 8-bit pixels (grey, grey+alpha, RGB or RGBA by ``channels``)."""
    colour = {1: 0, 2: 4, 3: 2, 4: 6}[channels]
    stride = width * channels
    raw = b"".join(b"\x00" + pixels[y * stride : (y + 1) * stride] for y in range(height))

    def chunk(tag: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + tag + data + struct.pack(">I", zlib.crc32(tag + data))

    header = struct.pack(">IIBBBBB", width, height, 8, colour, 0, 0, 0)
    return (
        PNG_SIGNATURE
        + chunk(b"IHDR", header)
        + chunk(b"IDAT", zlib.compress(raw, 6))
        + chunk(b"IEND", b"")
    )


def _is_image_array(value: Any) -> bool:
    shape = getattr(value, "shape", None)
    return (
        str(getattr(value, "dtype", "")) == "uint8"
        and shape is not None
        and len(shape) == 3
        and shape[2] in (1, 2, 3, 4)
        and shape[0] >= 2
        and shape[1] >= 2
    )


def _array_image(value: Any, budget: _Budget) -> str:
    """A thumbnail of an ``(H, W, C)`` uint8 array, taking every n-th pixel to fit THUMBNAIL_PX."""
    height, width, channels = value.shape
    step = max(1, -(-max(height, width) // THUMBNAIL_PX))
    small = value[::step, ::step]
    data = _png(small.tobytes(), small.shape[1], small.shape[0], channels)
    return _image_html(data, "png", budget, f"array {height}x{width}x{channels} uint8")


def _cell(value: Any, budget: _Budget) -> str:
    if _is_image_array(value):
        return _array_image(value, budget)
    if isinstance(value, bytes):
        return _bytes_html(value, budget)
    shape = getattr(value, "shape", None)
    if shape == () and hasattr(value, "item"):
        item = value.item()
        single = str(value.dtype) == "float32"
        return _bytes_html(item, budget) if isinstance(item, bytes) else _number(item, single)
    if shape is not None and hasattr(value, "ravel"):
        shown = _values_html(value.ravel()[:MAX_VALUES], budget)
        return f"[{shown}{', …' if value.size > MAX_VALUES else ''}]"
    if hasattr(value, "dense_shape"):  # a SparseArray row: its entries as index: value
        pairs = zip(
            value.indices[:MAX_VALUES].tolist(), value.values[:MAX_VALUES].tolist(), strict=True
        )
        entries = [f"{_e(str(tuple(i)))}: {_values_html([v], budget)}" for i, v in pairs]
        more = ", …" if len(value.values) > MAX_VALUES else ""
        return "{" + ", ".join(entries) + more + "}"
    if hasattr(value, "row_splits") or isinstance(value, (list, tuple)):
        items = [_cell(item, budget) for item in itertools.islice(value, MAX_VALUES)]
        return f"[{', '.join(items)}{', …' if len(value) > MAX_VALUES else ''}]"
    return _e(_cut(repr(value)))


def _describe(value: Any) -> tuple[str, str]:
    """``(type, shape)`` of a batch column."""
    if hasattr(value, "row_splits"):
        inner = getattr(value, "dtype", "")
        return f"Ragged {inner}", f"({len(value)}, None)"
    if hasattr(value, "dense_shape"):
        return f"SparseArray {value.values.dtype}", str(tuple(value.shape))
    shape = getattr(value, "shape", None)
    if shape is not None:
        return f"{type(value).__name__} {getattr(value, 'dtype', '')}", str(tuple(shape))
    if isinstance(value, (list, tuple)):
        return type(value).__name__, f"({len(value)},)"
    return type(value).__name__, ""


def batch_html(batch: Mapping[str, Any], *, title: str = "parsed batch") -> str:
    """An HTML preview of a parsed batch (feature name -> array, :class:`~recordkit.decode.specs.Ragged` or
    list): each column's type and shape, then the first :data:`MAX_RECORDS` rows; ``(H, W, C)`` uint8
    rows (decoded images) are shown as thumbnails."""
    budget = _Budget()
    names = list(batch)[:MAX_FEATURES]
    rows = []
    length = 0
    for name in names:
        value = batch[name]
        kind, shape = _describe(value)
        with contextlib.suppress(TypeError):
            length = max(length, len(value))
        rows.append(
            f"<tr><th>{_e(_cut(str(name), 40))}</th><td>{_e(kind)}</td><td>{_e(shape)}</td></tr>"
        )
    if len(batch) > MAX_FEATURES:
        rows.append(f'<tr><td colspan="3">… {len(batch) - MAX_FEATURES} more features</td></tr>')
    columns = f"<table><tr><th>feature</th><th>type</th><th>shape</th></tr>{''.join(rows)}</table>"
    head = "<tr><th>#</th>" + "".join(f"<th>{_e(_cut(str(n), 40))}</th>" for n in names) + "</tr>"
    body = []
    for i in range(min(length, MAX_RECORDS)):
        cells = []
        for name in names:
            try:
                cells.append(f"<td>{_cell(batch[name][i], budget)}</td>")
            except Exception as exc:  # noqa: BLE001, PERF203 - a preview shows what went wrong instead
                cells.append(f"<td>{error_text(exc)}</td>")
        body.append(f"<tr><td>{i}</td>{''.join(cells)}</tr>")
    if length > MAX_RECORDS:
        body.append(
            f'<tr><td colspan="{len(names) + 1}">… {length - MAX_RECORDS} more rows</td></tr>'
        )
    summary = f"{len(batch)} features, {length} rows"
    return (
        f'{_STYLE}<div class="rk-preview"><b>{_e(title)}</b> ({_e(summary)}){columns}'
        f"<table>{head}{''.join(body)}</table></div>"
    )
