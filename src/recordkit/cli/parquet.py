"""Parquet in ``recordkit convert``: table rows to records, and records to a Parquet table.

* Reading: each row of the Parquet files becomes one Example (an OFRecord with ``--payload ofrecord`` or an
  OFRecord output), through :func:`recordkit.encode_examples`. float64 values that float32 cannot hold
  exactly are refused without ``--lossy``, as in payload conversion.
* Writing: Example and OFRecord payloads are parsed with a schema inferred from every record (one column
  per feature); any other payload is written as one binary column ``record``.

Needs pyarrow (``pip install "recordkit[arrow]"``), imported on first use.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator, Sequence
from typing import Any, Final

import numpy as np

from recordkit.cli.common import CliError
from recordkit.cli.payload import Schema
from recordkit.decode import tables
from recordkit.decode.payloads import detect_payload
from recordkit.formats.payloads import EXAMPLE_PAYLOAD, OFRECORD_PAYLOAD
from recordkit.io.atomic import AtomicFile
from recordkit.support.extras import needs

_BATCH_ROWS: Final = 8192
_SAMPLE: Final = 100
RAW_COLUMN: Final = "record"
"""The column that holds the records of a payload kind that has no table form."""


def is_parquet(path: str) -> bool:
    """Whether ``path`` names a Parquet file (by its suffix)."""
    return path.lower().endswith(".parquet")


def _pyarrow() -> tuple[Any, Any]:
    """pyarrow and pyarrow.parquet, or an error that says how to install them."""
    with needs("converting Parquet", "pyarrow", "arrow", "pyarrow"):
        import pyarrow
        import pyarrow.parquet
    return pyarrow, pyarrow.parquet


def parquet_rows(paths: Sequence[str]) -> int:
    """The number of rows of the Parquet files, from their footers."""
    pq = _pyarrow()[1]
    return sum(int(pq.ParquetFile(path).metadata.num_rows) for path in paths)


def _check_floats(path: str, batch: Any, first_row: int) -> None:
    """Refuse float64 values that a float32 ``float_list`` would round (``--lossy`` allows them)."""
    pa = _pyarrow()[0]
    for name, values in zip(batch.schema.names, batch.columns, strict=True):
        while isinstance(values.type, (pa.ListType, pa.LargeListType, pa.FixedSizeListType)):
            values = values.flatten()
        if values.type != pa.float64():
            continue
        numbers = values.to_numpy(zero_copy_only=False)
        with np.errstate(over="ignore"):
            exact = (numbers.astype(np.float32) == numbers) | np.isnan(numbers)
        if not exact.all():
            raise CliError(
                f"{path}: column {name!r} (rows {first_row}..{first_row + batch.num_rows - 1}) holds "
                "float64 values that a float32 float_list cannot hold exactly; pass --lossy to round them"
            )


def parquet_records(paths: Sequence[str], *, ofrecord: bool, lossy: bool) -> Iterator[bytes]:
    """The rows of the Parquet files as serialized Examples (OFRecords with ``ofrecord``), in order."""
    pq = _pyarrow()[1]
    encode = tables.encode_ofrecords if ofrecord else tables.encode_examples
    for path in paths:
        first_row = 0
        for batch in pq.ParquetFile(path).iter_batches(batch_size=_BATCH_ROWS):
            if not ofrecord and not lossy:
                _check_floats(path, batch, first_row)
            try:
                yield from encode(batch)
            except (TypeError, ValueError) as exc:
                raise CliError(f"{path}: rows from {first_row}: {exc}") from exc
            first_row += batch.num_rows


def write_parquet(path: str, records: Any, *, prefer: str | None) -> int:
    """Write the records that ``records()`` yields (called twice) to the Parquet file ``path``.

    The payload kind is detected from the first records (``prefer``, the input format's payload kind, is
    tried first). Returns the number of rows.
    """
    pa, pq = _pyarrow()
    kind = detect_payload(list(itertools.islice(records(), _SAMPLE)), prefer=prefer)
    specs = None
    if kind in (EXAMPLE_PAYLOAD, OFRECORD_PAYLOAD):
        schema = Schema.of(records(), kind)
        if schema.undecodable:
            raise CliError(f"{schema.undecodable} records do not decode as {kind} payloads")
        specs = schema.specs()

    def table(batch: list[bytes]) -> Any:
        if specs is None:
            return pa.table({RAW_COLUMN: pa.array(batch, pa.binary())})
        return tables.parse_arrow(
            batch, specs, ofrecord=kind == OFRECORD_PAYLOAD, null_missing=True
        )

    output = AtomicFile(path)
    rows = 0
    try:
        # The schema of an empty table: an input with no records gives an empty table with it.
        with pq.ParquetWriter(output.file, table([]).schema) as writer:
            iterator = iter(records())
            while batch := list(itertools.islice(iterator, _BATCH_ROWS)):
                writer.write_table(table(batch))
                rows += len(batch)
        output.commit()
    except BaseException:
        output.discard()
        raise
    return rows
