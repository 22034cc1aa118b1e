"""Images from TFRecord shards to training batches: recordkit's ``Image`` spec against tf.data.

The data: JPEGs of 320 x 256 (photograph-like: gradients and noise, quality 90) in Examples with an
int64 ``label``, in 4 TFRecord shards. Every pipeline decodes them to RGB ``uint8``, brings them to
224 x 224 and delivers batches of 64 as numpy arrays:

* tf.data: ``interleave(TFRecordDataset)``, ``parse_single_example``, ``decode_jpeg``,
  ``tf.image.resize`` (its default: bilinear, ``antialias=False``), ``batch(64)``, ``prefetch``, every
  stage with ``AUTOTUNE``; and the training form with ``sample_distorted_bounding_box`` (area 0.08-1,
  ratio 3/4-4/3), ``decode_and_crop_jpeg``, ``random_flip_left_right`` and the resize.
* recordkit: ``Dataset(files).batch(64).map(Parse(...))`` with ``rk.Image(size=(224, 224), ...)``, in one
  process (the images of a batch decoded on the default thread pool) and through
  ``recordkit.data.loader(..., num_workers=W)``.

``run.py --only images`` runs these side by side, each contender in a fresh process per round.
"""

from __future__ import annotations

import io
import os
from collections.abc import Callable
from typing import Any

import numpy as np

SHARDS = 4
BATCH = 64
HEIGHT, WIDTH = 256, 320
OUT = (224, 224)

Pass = Callable[[], int]


def write_data(directory: str, count: int) -> str:
    """Write ``count`` JPEG Examples in :data:`SHARDS` shards under ``directory/images``; return it."""
    from PIL import Image as PILImage

    import recordkit as rk

    folder = os.path.join(directory, "images")
    os.makedirs(folder, exist_ok=True)
    rng = np.random.default_rng(3)
    y, x = np.mgrid[0:HEIGHT, 0:WIDTH]
    for shard in range(SHARDS):
        with rk.open(os.path.join(folder, f"part-{shard}.tfrecord"), "w") as writer:
            for i in range(shard * count // SHARDS, (shard + 1) * count // SHARDS):
                phase = rng.uniform(0, 6.28, 3)
                base = np.stack(
                    [
                        (x * 0.8 + 40 * np.sin(y / 7 + phase[0])) % 256,
                        (y + 30 * np.cos(x / 11 + phase[1])) % 256,
                        ((x + y) / 2.5 + 50 * phase[2]) % 256,
                    ],
                    axis=-1,
                )
                pixels = np.clip(base + rng.normal(0, 12, base.shape), 0, 255).astype(np.uint8)
                jpeg = io.BytesIO()
                PILImage.fromarray(pixels).save(jpeg, "JPEG", quality=90)
                writer.write(rk.encode_example({"image": jpeg.getvalue(), "label": i % 1000}))
    return folder


def files(folder: str) -> list[str]:
    """The shards in ``folder``, in name order."""
    return sorted(os.path.join(folder, name) for name in os.listdir(folder))


class Parse:
    """``parse_examples`` of a batch with ``rk.Image(size=(224, 224), **options)`` (picklable)."""

    def __init__(self, **options: Any) -> None:
        self.options = options

    def __call__(self, batch: list[bytes]) -> dict[str, Any]:
        import recordkit as rk

        spec = {"image": rk.Image(size=OUT, **self.options), "label": rk.FixedLen((), np.int64)}
        return rk.parse_examples(batch, spec)


def _count(batches: Any) -> int:
    return sum(len(batch["label"]) for batch in batches)


def recordkit_one_process(folder: str, **options: Any) -> Pass:
    """``Dataset(files).batch(64).map(Parse(**options))`` iterated in this process."""
    from recordkit.data import Dataset

    pipeline = Dataset(files(folder)).batch(BATCH).map(Parse(**options))
    return lambda: _count(pipeline)


def recordkit_loader(folder: str, workers: int, **options: Any) -> Pass:
    """The same pipeline through ``recordkit.data.loader(..., num_workers=workers)``."""
    from recordkit.data import Dataset, loader

    pipeline = Dataset(files(folder)).batch(BATCH).map(Parse(**options))
    return lambda: _count(loader(pipeline, num_workers=workers))


def tf_data(folder: str, crop: bool = False) -> Pass | None:
    """tf.data's image pipeline, tuned with AUTOTUNE; with ``crop``, its random-crop training form."""
    try:
        import tensorflow as tf
    except ImportError:
        return None
    autotune = tf.data.AUTOTUNE
    spec = {
        "image": tf.io.FixedLenFeature([], tf.string),
        "label": tf.io.FixedLenFeature([], tf.int64),
    }

    def decode(record: Any) -> Any:
        example = tf.io.parse_single_example(record, spec)
        data = example["image"]
        if crop:
            box = tf.image.sample_distorted_bounding_box(
                tf.io.extract_jpeg_shape(data),
                bounding_boxes=tf.constant([0.0, 0.0, 1.0, 1.0], shape=[1, 1, 4]),
                area_range=(0.08, 1.0),
                aspect_ratio_range=(3 / 4, 4 / 3),
                max_attempts=10,
                use_image_if_no_bounding_boxes=True,
            )
            begin, size, _ = box
            window = tf.stack([begin[0], begin[1], size[0], size[1]])
            image = tf.io.decode_and_crop_jpeg(data, window, channels=3)
            image = tf.image.random_flip_left_right(image)
        else:
            image = tf.io.decode_jpeg(data, channels=3)
        image = tf.cast(tf.image.resize(image, OUT), tf.uint8)
        return {"image": image, "label": example["label"]}

    pipeline = (
        tf.data.Dataset.from_tensor_slices(files(folder))
        .interleave(tf.data.TFRecordDataset, cycle_length=SHARDS, num_parallel_calls=autotune)
        .map(decode, num_parallel_calls=autotune)
        .batch(BATCH)
        .prefetch(autotune)
    )
    return lambda: _count(pipeline.as_numpy_iterator())
