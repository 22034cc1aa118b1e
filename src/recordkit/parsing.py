"""Parse batches of serialized Examples, SequenceExamples and OFRecords into numpy arrays.

The public home of the specs and batch parsers; they are defined in :mod:`recordkit.decode.parsing`.
"""

from recordkit.decode.images import Image
from recordkit.decode.parsing import (
    FixedLen,
    FixedLenSequence,
    Ragged,
    VarLen,
    parse_example,
    parse_examples,
    parse_ofrecords,
    parse_sequence_example,
    parse_sequence_examples,
)

__all__ = [
    "FixedLen",
    "FixedLenSequence",
    "Image",
    "Ragged",
    "VarLen",
    "parse_example",
    "parse_examples",
    "parse_ofrecords",
    "parse_sequence_example",
    "parse_sequence_examples",
]
