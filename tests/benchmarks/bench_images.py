"""Measure image decoding: Pillow against simplejpeg for JPEG, and recordkit's Image spec end to end.

* ``jpeg``: for each image size and chroma subsampling, the same JPEG decoded to an RGB uint8 array by
  Pillow (``Image.open`` + ``convert("RGB")`` + ``numpy.asarray``, what :class:`recordkit.Image` does) and
  by ``simplejpeg.decode_jpeg(colorspace="RGB")`` (both call libjpeg-turbo with its accurate integer IDCT
  and fancy upsampling, so the pixels are compared too). The two take turns, one timed pass each, so that
  changes in machine load fall on both alike; each figure is the median over the passes, and the ratio
  printed is Pillow's median time over simplejpeg's (above 1: simplejpeg is faster).
* ``parse``: :func:`recordkit.parse_examples` with ``Image()`` (a list of arrays) and with
  ``Image(size=(224, 224))`` (one stacked, resized batch) over Examples holding 640x480 JPEGs, with
  recordkit's simplejpeg path (when simplejpeg is installed) and with Pillow only.

Run: ``python tests/benchmarks/bench_images.py [--repeat 7] [--count 64]``.
"""

from __future__ import annotations

import argparse
import functools
import io
import statistics
import time
from collections.abc import Callable
from typing import Any

import numpy as np
from PIL import Image as PILImage

import recordkit as rk
from recordkit.decode import images

SIZES = [(256, 256), (480, 640), (1080, 1920)]
SUBSAMPLING = ["4:2:0", "4:4:4"]


def photo_like(height: int, width: int, seed: int = 0) -> np.ndarray:
    """Smooth gradients with noise: compresses like a photograph, unlike pure noise."""
    rng = np.random.default_rng(seed)
    y, x = np.mgrid[0:height, 0:width]
    base = np.stack([x * 255 / width, y * 255 / height, (x + y) % 256], axis=-1)
    noisy = base + rng.normal(0, 12, base.shape)
    return np.clip(noisy, 0, 255).astype(np.uint8)


def encode_jpeg(pixels: np.ndarray, subsampling: str = "4:2:0", quality: int = 90) -> bytes:
    buffer = io.BytesIO()
    PILImage.fromarray(pixels).save(buffer, "JPEG", quality=quality, subsampling=subsampling)
    return buffer.getvalue()


def pillow_decode(data: bytes) -> np.ndarray:
    return np.asarray(PILImage.open(io.BytesIO(data)).convert("RGB"))


def timed(function: Callable[[], Any], count: int) -> float:
    start = time.perf_counter()
    for _ in range(count):
        function()
    return (time.perf_counter() - start) / count


def alternate(
    contenders: dict[str, Callable[[], Any]], count: int, repeat: int
) -> dict[str, float]:
    """Median seconds per call of each contender, the contenders taking turns pass by pass."""
    seconds: dict[str, list[float]] = {name: [] for name in contenders}
    for _ in range(repeat):
        for name, function in contenders.items():
            seconds[name].append(timed(function, count))
    return {name: statistics.median(values) for name, values in seconds.items()}


def bench_jpeg(repeat: int) -> None:
    try:
        import simplejpeg
    except ImportError:
        print("jpeg: simplejpeg is not installed, nothing to compare")
        return
    print(f"{'image':>11} {'chroma':>6} {'Pillow ms':>10} {'simplejpeg ms':>14} {'ratio':>6} same")
    for height, width in SIZES:
        for subsampling in SUBSAMPLING:
            data = encode_jpeg(photo_like(height, width), subsampling)
            same = np.array_equal(
                pillow_decode(data), simplejpeg.decode_jpeg(data, colorspace="RGB")
            )
            count = max(3, 2_000_000 // (height * width))
            medians = alternate(
                {
                    "pillow": lambda data=data: pillow_decode(data),
                    "simplejpeg": lambda data=data: simplejpeg.decode_jpeg(data, colorspace="RGB"),
                },
                count,
                repeat,
            )
            print(
                f"{height:>5}x{width:<5} {subsampling:>6} {medians['pillow'] * 1e3:>10.2f} "
                f"{medians['simplejpeg'] * 1e3:>14.2f} "
                f"{medians['pillow'] / medians['simplejpeg']:>6.2f} {same}"
            )


def pillow_only(function: Callable[[], Any]) -> Callable[[], Any]:
    """``function`` run with recordkit's simplejpeg path switched off: every image goes to Pillow."""

    def run() -> Any:
        saved = images._simplejpeg
        images._simplejpeg = lambda: None  # type: ignore[assignment]
        try:
            return function()
        finally:
            images._simplejpeg = saved

    return run


def bench_parse(repeat: int, count: int) -> None:
    jpegs = [encode_jpeg(photo_like(480, 640, seed)) for seed in range(8)]
    records = [rk.encode_example({"image": jpegs[i % len(jpegs)]}) for i in range(count)]
    contenders: dict[str, Callable[[], Any]] = {}
    for name, spec in {
        "Image()": rk.Image(),
        "Image(size=(224, 224))": rk.Image(size=(224, 224)),
    }.items():
        parse = functools.partial(rk.parse_examples, records, {"image": spec})
        contenders[name] = parse
        contenders[f"{name}, Pillow only"] = pillow_only(parse)
    medians = alternate(contenders, 1, repeat)
    for name, seconds in medians.items():
        print(f"parse_examples {name:<36} {count / seconds:>8.0f} images/s (640x480 JPEG)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--count", type=int, default=64, help="images per parse_examples batch")
    args = parser.parse_args()
    bench_jpeg(args.repeat)
    bench_parse(args.repeat, args.count)


if __name__ == "__main__":
    main()
