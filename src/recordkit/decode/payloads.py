"""Payload kinds: what the records of a file hold, told from a sample of them.

The kinds are ``"example"`` (``tf.train.Example``), ``"sequence_example"`` (``tf.train.SequenceExample``),
``"ofrecord"`` (OneFlow's ``OFRecord``) and ``"raw"`` (anything else: bytes left as they are).
:func:`detect_payload` is the one detector: ``recordkit info`` and the other commands report its answer,
:func:`recordkit.hf.to_dataset` reads records by it, and the notebook previews (:mod:`recordkit.decode.preview`)
show each record as it tells.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from recordkit.decode.messages import decode_example, decode_ofrecord, decode_sequence_example
from recordkit.errors import DecodeError
from recordkit.formats.payloads import EXAMPLE_PAYLOAD, OFRECORD_PAYLOAD

__all__ = [
    "PAYLOAD_KINDS",
    "RAW_PAYLOAD",
    "SEQUENCE_EXAMPLE_PAYLOAD",
    "decode_payload",
    "detect_payload",
]

RAW_PAYLOAD = "raw"
"""Records that are none of the message kinds: their bytes, not decoded."""

SEQUENCE_EXAMPLE_PAYLOAD = "sequence_example"
"""Records that are ``tf.train.SequenceExample`` messages."""

PAYLOAD_KINDS = (EXAMPLE_PAYLOAD, SEQUENCE_EXAMPLE_PAYLOAD, OFRECORD_PAYLOAD, RAW_PAYLOAD)
"""Every payload kind, ``raw`` meaning "not decoded"."""

_DECODERS: dict[str, Callable[[bytes], Any]] = {
    EXAMPLE_PAYLOAD: decode_example,
    SEQUENCE_EXAMPLE_PAYLOAD: decode_sequence_example,
    OFRECORD_PAYLOAD: decode_ofrecord,
}


def decode_payload(kind: str, record: bytes) -> Any:
    """Decode ``record`` as a payload of ``kind`` (``raw`` returns it unchanged).

    Raises
    ------
    recordkit.DecodeError
        The record is not a valid payload of that kind.
    """
    return record if kind == RAW_PAYLOAD else _DECODERS[kind](record)


def _fits(kind: str, record: bytes) -> bool:
    """Whether ``record`` decodes as ``kind`` into something a person would have written."""
    if not record:
        # Zero bytes is an Example (or SequenceExample) with no features; OneFlow forbids empty OFRecords.
        return kind != OFRECORD_PAYLOAD
    try:
        decoded = _DECODERS[kind](record)
    except DecodeError:
        return False
    names = (
        [*decoded.context, *decoded.feature_lists] if kind == SEQUENCE_EXAMPLE_PAYLOAD else decoded
    )
    # Bytes of one message kind sometimes parse as another, with unknown fields skipped; what comes
    # out then has no features or binary feature names. An empty name is a map entry without a key,
    # which protobuf and recordkit's decoders read as the name "": it is printable, and it fits.
    return bool(names) and all(name.isprintable() for name in names)


def detect_payload(records: Sequence[bytes], *, prefer: str | None = None) -> str | None:
    """Return the payload kind of ``records`` (a sample), or ``None`` when there are none.

    The kind is the first, in the order SequenceExample, Example, OFRecord, that every record decodes
    as; failing that, the kind most records decode as, if more than half do (so that a damaged record
    shows up as a decoding error rather than hiding the file's kind). A SequenceExample is recognised only
    when some record has a feature list (without one it is byte for byte an Example). ``prefer``, the
    payload kind of the file's format (:attr:`recordkit.formats.base.RecordFormat.payload`, ``"ofrecord"``
    for OneFlow's framing), is tried first. ``"raw"`` when nothing fits.

    Examples
    --------
    >>> from recordkit.decode.messages import encode_example
    >>> detect_payload([encode_example({"x": 1})] * 2), detect_payload([b"\\xff\\x00"]), detect_payload([])
    ('example', 'raw', None)
    """
    if not records:
        return None
    order = [SEQUENCE_EXAMPLE_PAYLOAD, EXAMPLE_PAYLOAD, OFRECORD_PAYLOAD]
    # OFRecord first when preferred (a preferred "example" keeps SequenceExample, its special case, first)
    if prefer == OFRECORD_PAYLOAD:
        order.insert(0, order.pop())
    best, best_fits = RAW_PAYLOAD, len(records) // 2
    for kind in order:
        fitting = [record for record in records if _fits(kind, record)]
        if kind == SEQUENCE_EXAMPLE_PAYLOAD and not any(
            record and decode_sequence_example(record).feature_lists for record in fitting
        ):
            continue
        if len(fitting) == len(records):
            return kind
        if len(fitting) > best_fits:
            best, best_fits = kind, len(fitting)
    return best
