# /// script
# requires-python = ">=3.10"
# dependencies = ["recordkit", "numpy"]
# ///
"""Write one MNIST-like dataset in the three formats, each the way its own ecosystem expects.

* TFRecord: ``tf.train.Example`` records, ``image`` as raw bytes and ``label`` as int64, GZIP-compressed,
  in TensorFlow's ``train-00000-of-00002.tfrecord.gz`` shard naming.
* OFRecord: ``oneflow.OFRecord`` records, ``images`` as a float_list of 784 values in [0, 1] and ``labels`` as
  an int32_list, in part files ``part-0``, ``part-1`` (what OneFlow's ``OFRecordReader`` reads).
* FFRecord: one file; each sample is the 784 pixel bytes followed by one label byte.

Run: ``python examples/write_mnist/write_mnist.py [OUTPUT_DIR]``.
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

import numpy as np

import recordkit as rk
from recordkit.decode.messages import float_feature, int32_feature

N_IMAGES = 1_000
SHARDS = 2


def write_tfrecord(folder: Path, images: np.ndarray, labels: np.ndarray) -> list[Path]:
    paths = []
    for shard, (part_images, part_labels) in enumerate(
        zip(np.array_split(images, SHARDS), np.array_split(labels, SHARDS), strict=True)
    ):
        path = folder / f"train-{shard:05d}-of-{SHARDS:05d}.tfrecord.gz"
        with rk.open(path, "w") as writer:
            for image, label in zip(part_images, part_labels, strict=True):
                writer.write(rk.encode_example({"image": image.tobytes(), "label": int(label)}))
        paths.append(path)
    return paths


def write_ofrecord(folder: Path, images: np.ndarray, labels: np.ndarray) -> list[Path]:
    folder.mkdir(exist_ok=True)
    paths = []
    for shard, (part_images, part_labels) in enumerate(
        zip(np.array_split(images, SHARDS), np.array_split(labels, SHARDS), strict=True)
    ):
        path = folder / f"part-{shard}"
        with rk.open(path, "w", format="ofrecord") as writer:
            for image, label in zip(part_images, part_labels, strict=True):
                features = {
                    "images": float_feature(image.reshape(-1) / np.float32(255)),
                    "labels": int32_feature([label]),
                }
                writer.write(rk.encode_ofrecord(features))
        paths.append(path)
    return paths


def write_ffrecord(path: Path, images: np.ndarray, labels: np.ndarray) -> Path:
    with rk.open(path, "w", n=len(images)) as writer:
        for image, label in zip(images, labels, strict=True):
            writer.write(image.tobytes() + bytes([label]))
    return path


def main(out: Path) -> None:
    rng = np.random.default_rng(0)
    images = rng.integers(0, 256, size=(N_IMAGES, 28, 28), dtype=np.uint8)
    labels = rng.integers(0, 10, size=N_IMAGES).astype(np.uint8)

    written = {
        "tfrecord": write_tfrecord(out, images, labels),
        "ofrecord": write_ofrecord(out / "ofrecord", images, labels),
        "ffrecord": [write_ffrecord(out / "mnist.ffr", images, labels)],
    }
    for fmt, paths in written.items():
        size = sum(p.stat().st_size for p in paths)
        print(
            f"{fmt:9} {len(paths)} file(s), {size / 1e6:.2f} MB: {', '.join(p.name for p in paths)}"
        )

    # Read one image back from each format and check it.
    with rk.open(written["tfrecord"][1]) as reader:  # GZIP: sequential reading only
        first = rk.decode_example(next(iter(reader)))
    assert np.frombuffer(first["image"][0], np.uint8).tobytes() == images[N_IMAGES // 2].tobytes()
    with rk.open(written["ofrecord"][0]) as reader:  # no suffix: the content says OFRecord
        record = rk.decode_ofrecord(reader[3])
    assert np.allclose(record["images"] * 255, images[3].reshape(-1))
    assert record["labels"].dtype == np.int32
    assert record["labels"][0] == labels[3]
    with rk.open(written["ffrecord"][0]) as reader:
        sample = reader[-1]
    assert sample[-1] == labels[-1]
    assert sample[:-1] == images[-1].tobytes()
    print("read back one image from each format: identical")


if __name__ == "__main__":
    if len(sys.argv) > 1:
        Path(sys.argv[1]).mkdir(parents=True, exist_ok=True)
        main(Path(sys.argv[1]))
    else:
        with tempfile.TemporaryDirectory() as tmp:
            main(Path(tmp))
