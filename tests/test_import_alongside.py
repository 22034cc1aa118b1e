"""recordkit's protobuf classes live in their own proto packages, so they load beside TensorFlow's or vahidk
tfrecord's (which both claim ``tensorflow.Example`` and cannot share a process with each other).

Each case runs in a fresh interpreter, importing the peers in the given order, then creates and parses
messages with both.
"""

from __future__ import annotations

import importlib.util
import subprocess
import sys
import textwrap

import pytest

pytestmark = pytest.mark.interop

SCRIPT = textwrap.dedent(
    """
    import importlib
    import sys

    for name in sys.argv[1:]:
        importlib.import_module("recordkit.decode.messages" if name == "recordkit" else name)

    import recordkit as rk

    data = rk.encode_example({"x": [1, 2], "s": "héllo"})
    if "tensorflow" in sys.argv:
        import tensorflow as tf

        peer_example = tf.train.Example
        peer_features = tf.train.Features
        peer_feature = tf.train.Feature
        peer_list = tf.train.Int64List
    else:
        from tfrecord import example_pb2 as peer

        peer_example = peer.Example
        peer_features = peer.Features
        peer_feature = peer.Feature
        peer_list = peer.Int64List

    parsed = peer_example.FromString(data)
    assert list(parsed.features.feature["x"].int64_list.value) == [1, 2]
    assert list(parsed.features.feature["s"].bytes_list.value) == ["héllo".encode()]
    theirs = peer_example(
        features=peer_features(feature={"y": peer_feature(int64_list=peer_list(value=[-5]))})
    ).SerializeToString()
    assert rk.decode_example(theirs)["y"].tolist() == [-5]
    assert rk.decode_ofrecord(rk.encode_ofrecord({"z": 1.5}))["z"].tolist() == [1.5]
    print("ok")
    """
)


def available(module: str) -> bool:
    return importlib.util.find_spec(module) is not None


@pytest.mark.parametrize(
    "order",
    [
        ("recordkit", "tensorflow"),
        ("tensorflow", "recordkit"),
        ("recordkit", "tfrecord"),
        ("tfrecord", "recordkit"),
    ],
    ids="-then-".join,
)
def test_import_alongside_peer(order: tuple[str, str]) -> None:
    for module in order:
        if not available(module):
            pytest.skip(f"{module} is not installed")
    result = subprocess.run(
        [sys.executable, "-c", SCRIPT, *order],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.strip().endswith("ok")


def test_recordkit_registers_its_own_proto_names() -> None:
    """The generated files are registered under recordkit-owned file and package names."""
    from google.protobuf import descriptor_pool

    import recordkit.decode.messages  # noqa: F401  (registers the generated classes)

    pool = descriptor_pool.Default()
    for full_name in (
        "recordkit.tensorflow.Example",
        "recordkit.tensorflow.SequenceExample",
        "recordkit.oneflow.OFRecord",
    ):
        file_name = pool.FindMessageTypeByName(full_name).file.name
        assert file_name.startswith("recordkit/_proto/")
