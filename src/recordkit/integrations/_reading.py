"""What the Ray and Dask readers share: a task's read ranges in blocks of one payload kind, and a feature
spec that parses each block into columns.

Both readers take ``features=`` with one meaning: the records of a block are parsed with
:func:`recordkit.parse_examples` (:func:`recordkit.parse_ofrecords` for the files a worker finds to be
OFRecord files) into one column per feature. Ray puts the columns in an Arrow block; Dask makes one item
per record.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from typing import TYPE_CHECKING, Any

from recordkit.datasets.damage import intact_chunks, open_range_skipping
from recordkit.datasets.ranges import ReadRange, open_range, read_range
from recordkit.formats import get_format
from recordkit.formats.payloads import OFRECORD_PAYLOAD

if TYPE_CHECKING:
    from recordkit.decode.specs import Spec

__all__ = ["BATCH", "BLOCK_BYTES", "blocks", "check_features", "parse_block"]

BATCH = 1024
"""Records per read of a range."""

BLOCK_BYTES = 64 << 20
"""About how many bytes of records a block holds."""


def blocks(
    group: Iterable[ReadRange], *, check_crc: bool, skip: int | None = None
) -> Iterator[tuple[str | None, list[bytes]]]:
    """The records of ``group`` in lists of about :data:`BLOCK_BYTES` (at least one record each), with
    the payload kind of the files they come from (as each opened file says, not its name).

    A list never mixes payload kinds: records of a file of another kind start a new list. ``skip``:
    ``None`` raises on damage, else damaged records are skipped, up to that many (``-1``: no limit), each
    range with its own count and warning.
    """
    pending: list[bytes] = []
    size = 0
    kind: str | None = None
    for item in group:
        if skip is None:
            opened: Any = open_range(item, check_crc=check_crc)
        else:
            limit = None if skip < 0 else skip
            opened = open_range_skipping(item, check_crc=check_crc, max_skipped=limit)
        with opened as reader:
            payload = get_format(reader.format).payload
            if pending and payload != kind:
                yield kind, pending
                pending, size = [], 0
            kind = payload
            for batch in intact_chunks(read_range(item, batch_size=BATCH, reader=reader)):
                pending.extend(batch)
                size += sum(map(len, batch))
                if size >= BLOCK_BYTES:
                    yield kind, pending
                    pending, size = [], 0
    if pending:
        yield kind, pending


def check_features(features: Mapping[str, Spec]) -> None:
    """Refuse the specs a reader cannot give the same shape in every block (raises :class:`TypeError`)."""
    from recordkit.decode.images import Image
    from recordkit.decode.specs import FixedLen, FixedLenSequence, VarLen

    for name, feature in features.items():
        if isinstance(feature, FixedLenSequence):
            raise TypeError(
                f"feature {name!r}: read_records does not take FixedLenSequence specs: each block would "
                "be padded to its own longest record, so the column's shape would differ from block to "
                "block; read it as VarLen and reshape"
            )
        if not isinstance(feature, (FixedLen, VarLen, Image)):
            raise TypeError(
                f"feature {name!r}: read_records takes FixedLen, VarLen and Image specs, not "
                f"{type(feature).__name__}"
            )


def parse_block(
    records: list[bytes], features: Mapping[str, Spec], payload: str | None
) -> dict[str, Any]:
    """Parse ``records`` into columns: OFRecords when their files' format holds them, else Examples."""
    from recordkit.decode.parsing import parse_examples, parse_ofrecords

    parse = parse_ofrecords if payload == OFRECORD_PAYLOAD else parse_examples
    return parse(records, features)
