"""The generated protobuf classes match ``protos/`` and the upstream TensorFlow and OneFlow message layouts.

Only field numbers, types, labels and packing reach the wire, so those are what must equal upstream; the
proto package names differ on purpose (``recordkit.tensorflow``, ``recordkit.oneflow``).
"""

from __future__ import annotations

import subprocess
import sys
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

import pytest
from google.protobuf.descriptor import Descriptor, FieldDescriptor

from recordkit._proto.oneflow import record_pb2
from recordkit._proto.tensorflow import example_pb2, feature_pb2

REPO = Path(__file__).resolve().parent.parent
F = FieldDescriptor

# message -> field -> (number, type, repeated, packed, message type or None, oneof or None).
# From TensorFlow's tensorflow/core/example/{feature,example}.proto.
TENSORFLOW_LAYOUT: dict[str, dict[str, tuple[Any, ...]]] = {
    "BytesList": {"value": (1, F.TYPE_BYTES, True, False, None, None)},
    "FloatList": {"value": (1, F.TYPE_FLOAT, True, True, None, None)},
    "Int64List": {"value": (1, F.TYPE_INT64, True, True, None, None)},
    "Feature": {
        "bytes_list": (1, F.TYPE_MESSAGE, False, False, "BytesList", "kind"),
        "float_list": (2, F.TYPE_MESSAGE, False, False, "FloatList", "kind"),
        "int64_list": (3, F.TYPE_MESSAGE, False, False, "Int64List", "kind"),
    },
    "Features": {"feature": (1, F.TYPE_MESSAGE, True, False, "Features.FeatureEntry", None)},
    "Features.FeatureEntry": {
        "key": (1, F.TYPE_STRING, False, False, None, None),
        "value": (2, F.TYPE_MESSAGE, False, False, "Feature", None),
    },
    "FeatureList": {"feature": (1, F.TYPE_MESSAGE, True, False, "Feature", None)},
    "FeatureLists": {
        "feature_list": (1, F.TYPE_MESSAGE, True, False, "FeatureLists.FeatureListEntry", None)
    },
    "FeatureLists.FeatureListEntry": {
        "key": (1, F.TYPE_STRING, False, False, None, None),
        "value": (2, F.TYPE_MESSAGE, False, False, "FeatureList", None),
    },
    "Example": {"features": (1, F.TYPE_MESSAGE, False, False, "Features", None)},
    "SequenceExample": {
        "context": (1, F.TYPE_MESSAGE, False, False, "Features", None),
        "feature_lists": (2, F.TYPE_MESSAGE, False, False, "FeatureLists", None),
    },
}

# From OneFlow's oneflow/core/record/record.proto (proto2, numeric lists packed).
ONEFLOW_LAYOUT: dict[str, dict[str, tuple[Any, ...]]] = {
    "BytesList": {"value": (1, F.TYPE_BYTES, True, False, None, None)},
    "FloatList": {"value": (1, F.TYPE_FLOAT, True, True, None, None)},
    "DoubleList": {"value": (1, F.TYPE_DOUBLE, True, True, None, None)},
    "Int32List": {"value": (1, F.TYPE_INT32, True, True, None, None)},
    "Int64List": {"value": (1, F.TYPE_INT64, True, True, None, None)},
    "Feature": {
        "bytes_list": (1, F.TYPE_MESSAGE, False, False, "BytesList", "kind"),
        "float_list": (2, F.TYPE_MESSAGE, False, False, "FloatList", "kind"),
        "double_list": (3, F.TYPE_MESSAGE, False, False, "DoubleList", "kind"),
        "int32_list": (4, F.TYPE_MESSAGE, False, False, "Int32List", "kind"),
        "int64_list": (5, F.TYPE_MESSAGE, False, False, "Int64List", "kind"),
    },
    "OFRecord": {"feature": (1, F.TYPE_MESSAGE, True, False, "OFRecord.FeatureEntry", None)},
    "OFRecord.FeatureEntry": {
        "key": (1, F.TYPE_STRING, False, False, None, None),
        "value": (2, F.TYPE_MESSAGE, False, False, "Feature", None),
    },
}


def is_repeated(field: FieldDescriptor) -> bool:
    # protobuf 4.x has ``label``; newer runtimes replace it with ``is_repeated``.
    flag = getattr(field, "is_repeated", None)
    if flag is None:
        return bool(field.label == F.LABEL_REPEATED)
    return bool(flag)


def is_packed(field: FieldDescriptor) -> bool:
    # Older upb runtimes lack ``is_packed``; every packed field here declares ``[packed = true]``.
    flag = getattr(field, "is_packed", None)
    if flag is None:
        return bool(field.GetOptions().packed)
    return bool(flag)


def layout(descriptors: dict[str, Descriptor]) -> dict[str, dict[str, tuple[Any, ...]]]:
    """Describe messages (and their nested map entries) as field tuples, with package-relative names."""
    out: dict[str, dict[str, tuple[Any, ...]]] = {}
    pending = list(descriptors.values())
    while pending:
        message = pending.pop()
        package = message.file.package
        name = message.full_name.removeprefix(package + ".")
        fields = {}
        for field in message.fields:
            nested = field.message_type
            fields[field.name] = (
                field.number,
                field.type,
                is_repeated(field),
                is_packed(field) if is_repeated(field) else False,
                None if nested is None else nested.full_name.removeprefix(package + "."),
                None if field.containing_oneof is None else field.containing_oneof.name,
            )
        out[name] = fields
        pending.extend(message.nested_types)
    return out


def recordkit_tensorflow_layout() -> dict[str, dict[str, tuple[Any, ...]]]:
    return layout(
        {
            **feature_pb2.DESCRIPTOR.message_types_by_name,
            **example_pb2.DESCRIPTOR.message_types_by_name,
        }
    )


def test_tensorflow_messages_match_upstream_table() -> None:
    assert recordkit_tensorflow_layout() == TENSORFLOW_LAYOUT
    assert (
        feature_pb2.DESCRIPTOR.package == example_pb2.DESCRIPTOR.package == "recordkit.tensorflow"
    )


def test_oneflow_messages_match_upstream_table() -> None:
    assert layout(dict(record_pb2.DESCRIPTOR.message_types_by_name)) == ONEFLOW_LAYOUT
    assert record_pb2.DESCRIPTOR.package == "recordkit.oneflow"


def test_map_fields_are_map_entries() -> None:
    for message in (feature_pb2.Features, feature_pb2.FeatureLists, record_pb2.OFRecord):
        (field,) = message.DESCRIPTOR.fields
        assert field.message_type.GetOptions().map_entry


@pytest.mark.interop
def test_tensorflow_messages_match_tensorflow_descriptors() -> None:
    pytest.importorskip("tensorflow")
    from tensorflow.core.example import example_pb2 as tf_example_pb2
    from tensorflow.core.example import feature_pb2 as tf_feature_pb2

    upstream = layout(
        {
            **tf_feature_pb2.DESCRIPTOR.message_types_by_name,
            **tf_example_pb2.DESCRIPTOR.message_types_by_name,
        }
    )
    assert tf_feature_pb2.DESCRIPTOR.package == "tensorflow"
    assert recordkit_tensorflow_layout() == upstream


def grpcio_tools_version() -> str | None:
    try:
        return version("grpcio-tools")
    except PackageNotFoundError:
        return None


def test_generated_files_are_up_to_date() -> None:
    tools = grpcio_tools_version()
    if tools is None or not tools.startswith("1.62."):
        pytest.skip(
            f"needs grpcio-tools 1.62.x (protoc 25) to regenerate, found {tools or 'none'}; "
            "CI runs this check in its lowest-protobuf environment"
        )
    result = subprocess.run(
        [sys.executable, str(REPO / "protos" / "generate.py"), "--check"],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr
