"""ArrayRecord files written by the ``array-record`` wheel, the oracle of the ArrayRecord tests.

The tests that use it skip where the wheel (or cramjam, which recordkit decompresses with) is missing.
"""

from __future__ import annotations

import os
from typing import Any

import pytest


def array_record_module() -> Any:
    """Return ``array_record.python.array_record_module``, skipping the test where it or cramjam is missing."""
    module = pytest.importorskip("array_record.python.array_record_module")
    pytest.importorskip("cramjam")
    return module


def write_array_record(path: Any, records: list[bytes], options: str = "") -> str:
    """Write ``records`` to ``path`` with array_record's writer and ``options``; return the path."""
    writer = array_record_module().ArrayRecordWriter(os.fspath(path), options)
    for record in records:
        writer.write(record)
    writer.close()
    return os.fspath(path)
