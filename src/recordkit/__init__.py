"""recordkit: read and write TFRecord, OFRecord and FFRecord files.

Write a few ``tf.train.Example`` records, then read them back::

    import numpy as np
    import recordkit as rk

    with rk.open("train.tfrecord", "w") as writer:
        for label in range(3):
            writer.write(rk.encode_example({"label": label, "emb": np.zeros(4, np.float32)}))

    with rk.open("train.tfrecord") as reader:
        print(len(reader), rk.decode_example(reader[1])["label"])   # 3 [1]

The top level holds what a first program needs (docs/api.md says which names and why); every other public
name has one home in a subpackage (``recordkit.datasets``, ``recordkit.decode.messages``,
``recordkit.errors``, ...). The names are loaded on first use, so ``import recordkit`` stays cheap and never
imports protobuf, numpy-heavy decoding code or PyTorch until they are needed.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from recordkit._version import __version__
from recordkit.errors import (
    ChecksumError,
    CorruptRecordError,
    DecodeError,
    ManifestError,
    RecordKitError,
    RecordKitWarning,
    TruncatedRecordError,
    UnknownFormatError,
)
from recordkit.support.lazy import lazy_names
from recordkit.support.moved import MOVED, install_finder, moved_attribute

if TYPE_CHECKING:
    from recordkit.datasets import ShardWriter
    from recordkit.decode.images import Image
    from recordkit.decode.messages import (
        decode_example,
        decode_ofrecord,
        decode_sequence_example,
        encode_example,
        encode_ofrecord,
        encode_sequence_example,
    )
    from recordkit.decode.parsing import (
        parse_example,
        parse_examples,
        parse_ofrecords,
        parse_sequence_example,
        parse_sequence_examples,
    )
    from recordkit.decode.specs import FixedLen, FixedLenSequence, Ragged, VarLen
    from recordkit.decode.tables import encode_examples, encode_ofrecords, to_arrow
    from recordkit.formats import available_formats, detect_format, get_format, register_format
    from recordkit.io import RecordReader, RecordWriter, follow, open

# The home of each lazily loaded name (the module whose ``__all__`` lists it); see __getattr__ below.
_HOMES = {
    "recordkit.io": ("open", "RecordReader", "RecordWriter", "follow"),
    "recordkit.datasets": ("ShardWriter",),
    "recordkit.decode.messages": (
        "encode_example",
        "decode_example",
        "encode_sequence_example",
        "decode_sequence_example",
        "encode_ofrecord",
        "decode_ofrecord",
    ),
    "recordkit.decode.parsing": (
        "parse_example",
        "parse_examples",
        "parse_sequence_example",
        "parse_sequence_examples",
        "parse_ofrecords",
    ),
    "recordkit.decode.specs": ("FixedLen", "FixedLenSequence", "VarLen", "Ragged"),
    "recordkit.decode.images": ("Image",),
    "recordkit.decode.tables": ("to_arrow", "encode_examples", "encode_ofrecords"),
    "recordkit.formats": ("register_format", "get_format", "available_formats", "detect_format"),
}
_LAZY = {name: module for module, names in _HOMES.items() for name in names}

__all__ = [
    "ChecksumError",
    "CorruptRecordError",
    "DecodeError",
    "FixedLen",
    "FixedLenSequence",
    "Image",
    "ManifestError",
    "Ragged",
    "RecordKitError",
    "RecordKitWarning",
    "RecordReader",
    "RecordWriter",
    "ShardWriter",
    "TruncatedRecordError",
    "UnknownFormatError",
    "VarLen",
    "__version__",
    "available_formats",
    "decode_example",
    "decode_ofrecord",
    "decode_sequence_example",
    "detect_format",
    "encode_example",
    "encode_examples",
    "encode_ofrecord",
    "encode_ofrecords",
    "encode_sequence_example",
    "follow",
    "get_format",
    "open",
    "parse_example",
    "parse_examples",
    "parse_ofrecords",
    "parse_sequence_example",
    "parse_sequence_examples",
    "register_format",
    "to_arrow",
]


def _subpackage(name: str) -> Any:
    """A public subpackage, so that ``rk.datasets.Manifest`` works after ``import recordkit``.

    A name that moved since 0.2 (``rk.float_feature``) is the object at its new home, with a warning.
    """
    if f"{__name__}.{name}" in MOVED:
        return moved_attribute(__name__, name)
    if not name.startswith("_"):
        try:
            return importlib.import_module(f"recordkit.{name}")
        except ModuleNotFoundError as exc:
            if exc.name != f"recordkit.{name}":
                raise
    raise AttributeError(f"module 'recordkit' has no attribute {name!r}")


__getattr__, __dir__ = lazy_names(__name__, globals(), _LAZY, fallback=_subpackage)

# So that a 0.2 import line of a moved module (``import recordkit.ray``) still works, with a warning.
install_finder()
