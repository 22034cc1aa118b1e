"""The notebook view of a :class:`~recordkit.data.Dataset` (its ``_repr_html_``).

It shows the pipeline (the dataset's ``repr``), its files, and the first records of its first file as they are
stored. It does not run the pipeline: a global shuffle plans a whole epoch, and ``map`` calls the user's
functions, neither of which a look at a dataset should start.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from typing import TYPE_CHECKING

from recordkit.decode.preview import MAX_RECORDS, records_html
from recordkit.formats import get_format

if TYPE_CHECKING:
    from recordkit.data._readers import Catalog

_SHOWN_FILES = 3


def dataset_html(pipeline: str, catalogs: Sequence[Catalog]) -> str:
    """The HTML preview of a dataset: ``pipeline``, its ``repr``, then the files of ``catalogs`` (those of
    the files it reads, or of the datasets it mixes) and the first records of the first file."""
    files = [name for catalog in catalogs for name in catalog.files]
    shown = ", ".join(files[:_SHOWN_FILES]) + (
        f", … ({len(files)} files)" if len(files) > _SHOWN_FILES else ""
    )
    facts: list[tuple[str, object]] = [("pipeline", pipeline), ("files", shown or "none")]
    counts = [count for catalog in catalogs for count in catalog.counts]
    if files and None not in counts:
        facts.append(("records (from the manifest)", sum(c or 0 for c in counts)))
    if not files:
        return records_html("Dataset", facts, None)
    catalog = catalogs[0]
    note = (
        f"The first records of {files[0]} as stored, before the pipeline's stages (the preview does not run "
        "the pipeline)."
    )
    try:
        reader = catalog.open(0)
    except Exception as exc:  # noqa: BLE001 - shown, never raised from a repr
        facts.append(("first file", f"not opened: {type(exc).__name__}: {exc}"))
        return records_html("Dataset", facts, None)
    with reader:
        facts.append(("format", reader.format))
        records = itertools.islice(iter(reader), MAX_RECORDS + 1)
        payload = get_format(reader.format).payload
        return records_html("Dataset", facts, records, payload=payload, note=note)
