"""Parse batches of serialized Examples, SequenceExamples and OFRecords into numpy arrays.

The public home of the specs and batch parsers, defined in :mod:`recordkit.decode.parsing`, whose
``__all__`` this module re-exports.
"""

from recordkit.decode.parsing import *
from recordkit.decode.parsing import __all__ as __all__  # noqa: PLC0414 - re-exported
