"""recordkit: read and write TFRecord, OFRecord and FFRecord files.

Write a few ``tf.train.Example`` records, then read them back::

    import numpy as np
    import recordkit as rk

    with rk.open("train.tfrecord", "w") as writer:
        for label in range(3):
            writer.write(rk.encode_example({"label": label, "emb": np.zeros(4, np.float32)}))

    with rk.open("train.tfrecord") as reader:
        print(len(reader), rk.decode_example(reader[1])["label"])   # 3 [1]

The public names are loaded on first use, so ``import recordkit`` stays cheap and never imports protobuf,
numpy-heavy decoding code or PyTorch until they are needed.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from recordkit._version import __version__
from recordkit.errors import (
    ChecksumError,
    CorruptRecordError,
    DataLossWarning,
    DecodeError,
    HeaderError,
    LegacyFormatWarning,
    ManifestError,
    NoLengthError,
    RecordKitError,
    RecordKitWarning,
    SlowCRCWarning,
    StaleIndexError,
    StaleIndexWarning,
    TruncatedRecordError,
    UnknownFormatError,
    UnsafePathError,
    UnsupportedOperationError,
)

if TYPE_CHECKING:
    from recordkit.datasets.writer import ShardWriter
    from recordkit.decode.images import Image
    from recordkit.decode.messages import (
        bytes_feature,
        decode_example,
        decode_ofrecord,
        decode_sequence_example,
        double_feature,
        encode_example,
        encode_ofrecord,
        encode_sequence_example,
        float_feature,
        int32_feature,
        int64_feature,
    )
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
    from recordkit.decode.tables import encode_examples, encode_ofrecords, to_arrow
    from recordkit.formats import (
        available_formats,
        detect_format,
        get_format,
        register_format,
    )
    from recordkit.io import RecordReader, RecordWriter, open

# Public name -> module that defines it. Loaded lazily by __getattr__ below.
_LAZY = {
    **dict.fromkeys(["open", "RecordReader", "RecordWriter"], "recordkit.io"),
    "ShardWriter": "recordkit.datasets.writer",
    "Image": "recordkit.decode.images",
    **dict.fromkeys(
        ["available_formats", "detect_format", "get_format", "register_format"], "recordkit.formats"
    ),
    **dict.fromkeys(
        [
            "bytes_feature",
            "decode_example",
            "decode_ofrecord",
            "decode_sequence_example",
            "double_feature",
            "encode_example",
            "encode_ofrecord",
            "encode_sequence_example",
            "float_feature",
            "int32_feature",
            "int64_feature",
        ],
        "recordkit.decode.messages",
    ),
    **dict.fromkeys(
        [
            "FixedLen",
            "FixedLenSequence",
            "Ragged",
            "VarLen",
            "parse_example",
            "parse_examples",
            "parse_ofrecords",
            "parse_sequence_example",
            "parse_sequence_examples",
        ],
        "recordkit.decode.parsing",
    ),
    **dict.fromkeys(["encode_examples", "encode_ofrecords", "to_arrow"], "recordkit.decode.tables"),
}

__all__ = [
    "ChecksumError",
    "CorruptRecordError",
    "DataLossWarning",
    "DecodeError",
    "FixedLen",
    "FixedLenSequence",
    "HeaderError",
    "Image",
    "LegacyFormatWarning",
    "ManifestError",
    "NoLengthError",
    "Ragged",
    "RecordKitError",
    "RecordKitWarning",
    "RecordReader",
    "RecordWriter",
    "ShardWriter",
    "SlowCRCWarning",
    "StaleIndexError",
    "StaleIndexWarning",
    "TruncatedRecordError",
    "UnknownFormatError",
    "UnsafePathError",
    "UnsupportedOperationError",
    "VarLen",
    "__version__",
    "available_formats",
    "bytes_feature",
    "decode_example",
    "decode_ofrecord",
    "decode_sequence_example",
    "detect_format",
    "double_feature",
    "encode_example",
    "encode_examples",
    "encode_ofrecord",
    "encode_ofrecords",
    "encode_sequence_example",
    "float_feature",
    "get_format",
    "int32_feature",
    "int64_feature",
    "open",
    "parse_example",
    "parse_examples",
    "parse_ofrecords",
    "parse_sequence_example",
    "parse_sequence_examples",
    "register_format",
    "to_arrow",
]


# Public submodules, so that ``rk.example.Feature`` works after a plain ``import recordkit as rk``.
_SUBMODULES = frozenset(
    [
        "cli",
        "data",
        "example",
        "ffrecord",
        "formats",
        "io",
        "ofrecord",
        "parsing",
        "shards",
        "testing",
    ]
)


def __getattr__(name: str) -> Any:
    """Import the module behind a public name on first access (PEP 562)."""
    if name in _SUBMODULES:
        return importlib.import_module(f"recordkit.{name}")
    module_name = _LAZY.get(name)
    if module_name is None:
        raise AttributeError(f"module 'recordkit' has no attribute {name!r}")
    value = getattr(importlib.import_module(module_name), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    """List the public names, including the ones not loaded yet."""
    return sorted(set(globals()) | set(__all__))
