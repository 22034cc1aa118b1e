"""Encode and decode one ``tf.train.Example``, ``SequenceExample`` or ``OFRecord``.

The public home of the message helpers; they are defined in :mod:`recordkit.decode.messages`.
"""

from recordkit.decode.messages import (
    EMPTY_FEATURE_DTYPE,
    DecodedSequenceExample,
    DecodedValue,
    Feature,
    FeatureKind,
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

__all__ = [
    "DecodedSequenceExample",
    "DecodedValue",
    "EMPTY_FEATURE_DTYPE",
    "Feature",
    "FeatureKind",
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
]
