"""The specs that read several features of a record (:class:`Sparse`, :class:`Partitioned`) beside the others.

The batch parsers ask this module which features a set of specs reads, and read each spec from the
columns of those features.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Union

from recordkit.decode.partitions import Partitioned, read_partitioned
from recordkit.decode.sparse import Sparse, SparseArray, read_sparse
from recordkit.decode.specs import ColumnReader, Parsed, Spec

if TYPE_CHECKING:
    from recordkit.decode.columns import Column

#: Every spec ``parse_examples`` takes.
ExampleSpec = Union[Spec, Sparse, Partitioned]  # noqa: UP007 - a runtime alias on Python 3.10


def column_names(specs: Mapping[str, Any]) -> list[str]:
    """The features to collect for ``specs``, each once, in the order first asked for."""
    names: dict[str, None] = {}
    for name, spec in specs.items():
        for key in spec.keys(name) if isinstance(spec, (Sparse, Partitioned)) else [name]:
            names.setdefault(key)
    return list(names)


def read(
    reader: ColumnReader, name: str, spec: Any, columns: Mapping[str, Column]
) -> Parsed | SparseArray:
    """What ``spec`` (called ``name``) gives for a batch whose collected features are ``columns``."""
    if isinstance(spec, Sparse):
        return read_sparse(reader, name, spec, columns)
    if isinstance(spec, Partitioned):
        return read_partitioned(reader, name, spec, columns)
    return reader.read(name, columns[name], spec)
