"""Which part of an image to keep: crop windows, and the random numbers that choose them.

Three rules give a window of a ``height x width`` image:

* :func:`random_resized_crop_window`: torchvision's ``RandomResizedCrop``, the training crop of
  ``rk.Image(crop="random")``;
* :func:`center_crop_window`: a short-side resize and a centre crop, the evaluation crop of
  ``rk.Image(crop="center")``, expressed in the source image's pixels;
* :func:`random_crop_window`: OneFlow's ``OFRecordImageDecoderRandomCrop`` (public as
  ``recordkit.decode.images.random_crop_window``, with :class:`CropWindow`, since 0.2).

Random choices are made per record from a generator :func:`record_rng` seeds with the seed that
:func:`~recordkit.support.seeding.seeded` sets (a :class:`~recordkit.data.Dataset` sets its seed and epoch around its ``map`` stages)
and the record's own bytes, so the same record gets the same crop in the same epoch, whatever the batch,
the worker or a resume.

Examples
--------
>>> import numpy as np
>>> random_resized_crop_window(100, 200, np.random.default_rng(0)).height <= 100
True
>>> center_crop_window(256, 320, (224, 224), 0.875)
CropWindow(top=16, left=48, height=224, width=224, fallback=False)
"""

from __future__ import annotations

import math
import zlib
from collections.abc import Sequence
from typing import NamedTuple

import numpy as np

__all__ = [
    "center_crop_window",
    "check_crop_ranges",
    "random_resized_crop_window",
    "record_rng",
]


class CropWindow(NamedTuple):
    """A crop window of an image: its top-left corner, its size, and whether the fallback gave it."""

    top: int
    left: int
    height: int
    width: int
    fallback: bool


def record_rng(
    data: bytes | memoryview, seed: int | None, fresh: np.random.Generator | None
) -> np.random.Generator:
    """The generator of one record's random choices: seeded by ``seed`` and the record's bytes, or,
    without a seed, ``fresh`` (one generator of new entropy per batch)."""
    if seed is None:
        assert fresh is not None
        return fresh
    return np.random.default_rng((seed % 2**64, zlib.crc32(data), len(data)))


def check_crop_ranges(
    num_attempts: int,
    random_area: Sequence[float],
    random_aspect_ratio: Sequence[float],
    names: tuple[str, str] = ("random_area", "random_aspect_ratio"),
) -> tuple[tuple[float, float], tuple[float, float]]:
    """Validate the random-crop parameters (area fractions, aspect ratios) and return them as tuples.

    ``names`` are the two ranges' names in the errors: OneFlow's by default, torchvision's
    ``("scale", "ratio")`` for :class:`~recordkit.decode.images.Image`.
    """
    if isinstance(num_attempts, bool) or not isinstance(num_attempts, (int, np.integer)):
        raise TypeError(f"num_attempts must be an int, not {type(num_attempts).__name__}")
    if num_attempts < 1:
        raise ValueError(f"num_attempts must be at least 1, not {num_attempts}")
    area = tuple(float(v) for v in random_area)
    ratio = tuple(float(v) for v in random_aspect_ratio)
    if len(area) != 2 or not 0.0 <= area[0] <= area[1] <= 1.0 or area[1] == 0.0:
        raise ValueError(
            f"{names[0]} is (min, max) with 0 <= min <= max <= 1 and max > 0, not {random_area!r}"
        )
    if len(ratio) != 2 or not 0.0 < ratio[0] <= ratio[1] or not math.isfinite(ratio[1]):
        raise ValueError(
            f"{names[1]} is (min, max) with 0 < min <= max, not {random_aspect_ratio!r}"
        )
    return (area[0], area[1]), (ratio[0], ratio[1])


def _draw(
    total: int, rng: np.random.Generator, area: tuple[float, float], ratio: tuple[float, float]
) -> tuple[int, int]:
    """One candidate window ``(height, width)``: an area fraction drawn uniformly from ``area``, an aspect
    ratio (width / height) log-uniformly from ``ratio``, the sides rounded to whole pixels."""
    target = rng.uniform(*area) * total
    aspect = math.exp(rng.uniform(math.log(ratio[0]), math.log(ratio[1])))
    return round(math.sqrt(target / aspect)), round(math.sqrt(target * aspect))


def random_resized_crop_window(
    height: int,
    width: int,
    rng: np.random.Generator,
    *,
    scale: Sequence[float] = (0.08, 1.0),
    ratio: Sequence[float] = (3 / 4, 4 / 3),
    num_attempts: int = 10,
) -> CropWindow:
    """Pick a crop window of a ``height x width`` image by torchvision's ``RandomResizedCrop`` rule.

    Up to ``num_attempts`` times, draw a window (:func:`_draw`: area fraction uniform in ``scale``, aspect
    ratio log-uniform in ``ratio``, sides rounded); the first one of at least one pixel that fits in the
    image is placed uniformly at random in it. If none fits, the fallback is the largest centred window
    whose aspect ratio is clamped into ``ratio`` (the whole image when its own ratio is in range).

    Parameters
    ----------
    height, width
        The image's size, at least 1 each.
    rng
        The generator drawn from.
    scale, ratio, num_attempts
        As ``torchvision.transforms.RandomResizedCrop`` (which makes 10 attempts).
    """
    area, ratios = check_crop_ranges(num_attempts, scale, ratio, ("scale", "ratio"))
    for _ in range(num_attempts):
        crop_h, crop_w = _draw(height * width, rng, area, ratios)
        if 0 < crop_w <= width and 0 < crop_h <= height:
            top = int(rng.integers(0, height - crop_h + 1))
            left = int(rng.integers(0, width - crop_w + 1))
            return CropWindow(top, left, crop_h, crop_w, False)
    crop_h, crop_w = height, width
    if width / height < ratios[0]:
        crop_h = max(1, min(height, round(width / ratios[0])))
    elif width / height > ratios[1]:
        crop_w = max(1, min(width, round(height * ratios[1])))
    return CropWindow((height - crop_h) // 2, (width - crop_w) // 2, crop_h, crop_w, True)


def center_crop_window(
    height: int, width: int, size: tuple[int, int], fraction: float
) -> CropWindow:
    """The window of a ``height x width`` image that a short-side resize and a centre crop keep.

    torchvision's evaluation transform ``Resize(round(max(size) / fraction))`` then ``CenterCrop(size)``
    (``Resize(256)``, ``CenterCrop(224)`` for ``fraction`` 0.875) keeps this window of the source image,
    so cropping it first and resizing it to ``size`` touches each pixel once. The window is centred (its
    corner rounded down) and never larger than the image.
    """
    if not 0.0 < fraction <= 1.0:
        raise ValueError(f"the centre crop fraction must be in (0, 1], not {fraction!r}")
    shorter = max(size) / fraction  # the short side's length after the resize
    factor = min(height, width) / shorter  # source pixels per resized pixel
    crop_h = max(1, min(height, round(size[0] * factor)))
    crop_w = max(1, min(width, round(size[1] * factor)))
    return CropWindow((height - crop_h) // 2, (width - crop_w) // 2, crop_h, crop_w, False)


def random_crop_window(
    height: int,
    width: int,
    rng: np.random.Generator,
    *,
    num_attempts: int = 10,
    random_area: Sequence[float] = (0.08, 1.0),
    random_aspect_ratio: Sequence[float] = (0.75, 1.333333),
) -> CropWindow:
    """Pick a random crop window of a ``height x width`` image, by OneFlow's Inception-style rule.

    Up to ``num_attempts`` times, draw an area fraction uniformly from ``random_area`` and an aspect ratio
    (width / height) log-uniformly from ``random_aspect_ratio``, and round the window's sides to whole
    pixels; the first window that fits in the image and whose rounded area fraction and aspect ratio are
    still inside the ranges is taken. If none is, the fallback window is the whole image with its aspect
    ratio clamped into ``random_aspect_ratio`` (cutting the longer side), shrunk, keeping its shape, to at
    most ``random_area[1]`` of the image (no side shorter than one pixel). Either window is placed
    uniformly at random in the image.

    Parameters
    ----------
    height, width
        The image's size, at least 1 each.
    rng
        The random generator drawn from.
    num_attempts, random_area, random_aspect_ratio
        As ``flow.nn.OFRecordImageDecoderRandomCrop``.

    Returns
    -------
    CropWindow
        ``fallback`` says whether the fallback gave the window; its area fraction can then be below
        ``random_area[0]`` (an image too elongated for the ratio range), and its aspect ratio can miss
        the range by the rounding of its sides to whole pixels.
    """
    (area_min, area_max), (ratio_min, ratio_max) = check_crop_ranges(
        num_attempts, random_area, random_aspect_ratio
    )
    total = height * width
    for _ in range(num_attempts):
        crop_h, crop_w = _draw(total, rng, (area_min, area_max), (ratio_min, ratio_max))
        crop_h, crop_w = max(1, crop_h), max(1, crop_w)
        if (
            crop_w <= width
            and crop_h <= height
            and ratio_min <= crop_w / crop_h <= ratio_max
            and area_min <= crop_w * crop_h / total <= area_max
        ):
            fallback = False
            break
    else:  # the whole image, its aspect ratio clamped into range, shrunk to at most area_max
        crop_h, crop_w = height, width
        if width / height > ratio_max:
            crop_w = max(1, int(height * ratio_max))
        elif width / height < ratio_min:
            crop_h = max(1, int(width / ratio_min))
        shrink = math.sqrt(min(1.0, area_max * height * width / (crop_h * crop_w)))
        crop_h, crop_w = max(1, int(crop_h * shrink)), max(1, int(crop_w * shrink))
        fallback = True
    top = int(rng.integers(0, height - crop_h + 1))
    left = int(rng.integers(0, width - crop_w + 1))
    return CropWindow(top, left, crop_h, crop_w, fallback)
