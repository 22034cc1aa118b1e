# /// script
# requires-python = ">=3.10"
# dependencies = ["recordkit", "numpy"]
# ///
"""Read OneFlow part files the OneFlow way, without OneFlow.

``recordkit.compat.oneflow.OFRecordReader`` takes the parameters of ``flow.nn.OFRecordReader`` (``data_dir``,
``data_part_num``, ``part_name_prefix``, ``part_name_suffix_length``, shuffling, ``batch_size``) and yields
batches of serialized OFRecords. ``recordkit.compat.oneflow.raw_decoder`` and ``bytes_decoder`` then decode a
feature of the whole batch into numpy, like ``OFRecordRawDecoder`` and ``OFRecordBytesDecoder``.

Run: ``python examples/oneflow_reader/oneflow_reader.py``.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import numpy as np

import recordkit as rk
from recordkit.compat.oneflow import OFRecordReader, bytes_decoder, raw_decoder
from recordkit.decode.messages import bytes_feature, float_feature, int32_feature

N_RECORDS = 600
PARTS = 3


def write_parts(folder: Path) -> None:
    """Write part-00000 .. part-00002: a 784-float image, an int32 label and a file name per record."""
    rng = np.random.default_rng(0)
    per_part = N_RECORDS // PARTS
    for part in range(PARTS):
        with rk.open(folder / f"part-{part:05d}", "w", format="ofrecord") as writer:
            for i in range(part * per_part, (part + 1) * per_part):
                features = {
                    "images": float_feature(rng.random(784, dtype=np.float32)),
                    "labels": int32_feature([i % 10]),
                    "names": bytes_feature([f"img_{i:05d}.png".encode()]),
                }
                writer.write(rk.encode_ofrecord(features))


def main(folder: Path) -> None:
    write_parts(folder)
    reader = OFRecordReader(
        str(folder),
        batch_size=64,
        data_part_num=PARTS,
        part_name_prefix="part-",
        part_name_suffix_length=5,
        random_shuffle=True,
        shuffle_after_epoch=True,
        seed=42,
    )
    seen: list[str] = []
    for step, batch in enumerate(reader):
        images = raw_decoder(batch, "images", (1, 28, 28), np.float32)  # (batch, 1, 28, 28)
        labels = raw_decoder(batch, "labels", (), np.int32)
        names = [name.decode() for name in bytes_decoder(batch, "names")]
        assert all(int(name[4:9]) % 10 == label for name, label in zip(names, labels, strict=True))
        seen.extend(names)
        if step == 0:
            print(
                f"first batch: images {images.shape} {images.dtype}, labels {labels[:8].tolist()}…"
            )
    assert sorted(seen) == [f"img_{i:05d}.png" for i in range(N_RECORDS)]
    print(
        f"one epoch: {len(seen)} records in {len(seen) // 64 + 1} batches, each record once, shuffled "
        f"(first names: {seen[:3]})"
    )


if __name__ == "__main__":
    with tempfile.TemporaryDirectory() as tmp:
        main(Path(tmp))
