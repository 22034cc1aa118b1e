# /// script
# requires-python = ">=3.10"
# dependencies = ["recordkit", "numpy"]
# ///
"""recordkit in one minute: write an MNIST-like TFRecord file, read it at random, parse batches, convert.

Run it with ``python examples/quickstart/quickstart.py [OUTPUT_DIR]``. Without an argument the files go to a
temporary directory that is removed at the end.
"""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path

import numpy as np

import recordkit as rk

N_IMAGES = 2_000
BATCH = 256


def make_mnist_like(rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """Random 28x28 uint8 "digits" and their labels 0-9 (stand-ins for MNIST)."""
    labels = rng.integers(0, 10, size=N_IMAGES)
    images = rng.integers(0, 256, size=(N_IMAGES, 28, 28), dtype=np.uint8)
    return images, labels


def write_tfrecord(path: Path, images: np.ndarray, labels: np.ndarray) -> None:
    """One tf.train.Example per image: the raw pixels as bytes, the label as an int64."""
    with rk.open(path, "w") as writer:
        for image, label in zip(images, labels, strict=True):
            writer.write(rk.encode_example({"image": image.tobytes(), "label": int(label)}))


def read_at_random(path: Path, images: np.ndarray, labels: np.ndarray) -> list[int]:
    """Fetch a few records by index, decode them, and check them against what was written."""
    picks = sorted(np.random.default_rng(1).choice(N_IMAGES, size=5, replace=False).tolist())
    with rk.open(path) as reader:
        for i, record in zip(picks, reader.read(picks), strict=True):
            example = rk.decode_example(record)  # {"image": [b"..."], "label": array([7])}
            pixels = np.frombuffer(example["image"][0], np.uint8).reshape(28, 28)
            assert example["label"][0] == labels[i]
            assert np.array_equal(pixels, images[i])
    return picks


def parse_in_batches(path: Path) -> tuple[np.ndarray, np.ndarray, float]:
    """Parse every record into numpy arrays, BATCH records at a time, as tf.io.parse_example would."""
    spec = {"image": rk.FixedLen((), bytes), "label": rk.FixedLen((), np.int64)}
    all_images, all_labels = [], []
    start = time.perf_counter()
    with rk.open(path) as reader:
        for first in range(0, len(reader), BATCH):
            batch = rk.parse_examples(reader[first : first + BATCH], spec)
            pixels = np.frombuffer(b"".join(batch["image"]), np.uint8)
            all_images.append(pixels.reshape(-1, 28, 28))
            all_labels.append(batch["label"])
    seconds = time.perf_counter() - start
    return np.concatenate(all_images), np.concatenate(all_labels), seconds


def convert_to_ffrecord(src: Path, dst: Path) -> None:
    """Copy every record, byte for byte, into an FFRecord file (same as `recordkit convert SRC DST`)."""
    with rk.open(src) as reader, rk.open(dst, "w", n=len(reader)) as writer:
        writer.write_many(reader)


def main(out_dir: Path) -> None:
    """Run the whole tour in ``out_dir``."""
    images, labels = make_mnist_like(np.random.default_rng(0))
    tfrecord = out_dir / "mnist.tfrecord"
    ffrecord = out_dir / "mnist.ffr"

    write_tfrecord(tfrecord, images, labels)
    print(f"wrote   {N_IMAGES} images to {tfrecord.name} ({tfrecord.stat().st_size / 1e6:.1f} MB)")

    picks = read_at_random(tfrecord, images, labels)
    print(f"read    records {picks} at random: pixels and labels match")

    parsed_images, parsed_labels, seconds = parse_in_batches(tfrecord)
    assert np.array_equal(parsed_images, images)
    assert np.array_equal(parsed_labels, labels)
    print(
        f"parsed  {parsed_images.shape[0]} records in batches of {BATCH} in {seconds * 1e3:.0f} ms: "
        f"images {parsed_images.shape} {parsed_images.dtype}, labels {parsed_labels.shape}"
    )

    convert_to_ffrecord(tfrecord, ffrecord)
    with rk.open(tfrecord) as tf_reader, rk.open(ffrecord) as ff_reader:
        assert len(ff_reader) == len(tf_reader)
        assert list(iter(ff_reader)) == list(iter(tf_reader))
        counts = np.bincount(labels, minlength=10).tolist()
        print(
            f"copied  {len(ff_reader)} records to {ffrecord.name} ({ff_reader.format}), same bytes"
        )
    print(f"labels  per digit: {counts}")


if __name__ == "__main__":
    if len(sys.argv) > 1:
        target = Path(sys.argv[1])
        target.mkdir(parents=True, exist_ok=True)
        main(target)
    else:
        with tempfile.TemporaryDirectory() as tmp:
            main(Path(tmp))
