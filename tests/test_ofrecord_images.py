"""OneFlow's image decoders: OFRecordImageDecoder and OFRecordImageDecoderRandomCrop over OFRecord batches.

Crops are located in the full image through pixels that encode their own coordinates, so each test sees
exactly which window was cut; the window rule is checked as a property over image sizes and ranges.
"""

from __future__ import annotations

import io
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import recordkit as rk
from recordkit.compat.oneflow import ofrecord_image_decoder, ofrecord_image_decoder_random_crop
from recordkit.decode.images import random_crop_window
from recordkit.errors import DecodeError

PILImage = pytest.importorskip("PIL.Image")


def coordinates(height: int, width: int) -> np.ndarray:
    """An RGB image whose pixel (y, x) is (x % 256, y % 256, x // 256 + 16 * (y // 256))."""
    y, x = np.mgrid[0:height, 0:width]
    return np.stack([x % 256, y % 256, x // 256 + 16 * (y // 256)], axis=-1).astype(np.uint8)


def where(crop: np.ndarray) -> tuple[int, int]:
    """The (top, left) of an RGB crop of a :func:`coordinates` image."""
    r, g, b = (int(v) for v in crop[0, 0])
    return g + 256 * (b // 16), r + 256 * (b % 16)


def png(pixels: np.ndarray) -> bytes:
    buffer = io.BytesIO()
    PILImage.fromarray(pixels).save(buffer, "PNG")
    return buffer.getvalue()


def ofrecords(*payloads: bytes, name: str = "encoded") -> list[bytes]:
    return [
        rk.encode_ofrecord({name: [p], "label": np.array([i], np.int32)})
        for i, p in enumerate(payloads)
    ]


SIZES = [(60, 80), (300, 90), (33, 517), (1, 1), (7, 300)]
IMAGES = [coordinates(h, w) for h, w in SIZES]
RECORDS = ofrecords(*map(png, IMAGES))


# --- OFRecordImageDecoder --------------------------------------------------------------------------


def test_image_decoder_gives_bgr_by_default_one_array_per_record():
    decoded = ofrecord_image_decoder(RECORDS, "encoded")
    assert isinstance(decoded, list)
    assert len(decoded) == len(IMAGES)
    for got, source in zip(decoded, IMAGES, strict=True):
        np.testing.assert_array_equal(got, source[:, :, ::-1])


@pytest.mark.parametrize(("color_space", "channels"), [("RGB", 3), ("GRAY", 1)])
def test_image_decoder_color_spaces(color_space, channels):
    decoded = ofrecord_image_decoder(RECORDS, "encoded", color_space=color_space)
    for got, source in zip(decoded, IMAGES, strict=True):
        assert got.shape == (*source.shape[:2], channels)
        if color_space == "RGB":
            np.testing.assert_array_equal(got, source)


def test_image_decoder_errors_name_the_record():
    broken = ofrecords(png(IMAGES[0]), b"not an image", png(IMAGES[1]))
    with pytest.raises(DecodeError, match="record 1: feature 'encoded': not an image") as caught:
        ofrecord_image_decoder(broken, "encoded")
    assert (caught.value.index, caught.value.feature) == (1, "encoded")
    with pytest.raises(DecodeError, match="not found") as caught:
        ofrecord_image_decoder(RECORDS, "image")
    assert caught.value.index == 0
    two = [rk.encode_ofrecord({"encoded": [png(IMAGES[0]), png(IMAGES[0])]})]
    with pytest.raises(DecodeError, match="exactly 1 bytes value"):
        ofrecord_image_decoder(RECORDS[:1] + two, "encoded")
    with pytest.raises(ValueError, match="color_space"):
        ofrecord_image_decoder(RECORDS, "encoded", color_space="YUV")


# --- OFRecordImageDecoderRandomCrop ----------------------------------------------------------------


def test_random_crop_cuts_the_window_the_rule_draws_from_the_seed():
    crops = ofrecord_image_decoder_random_crop(RECORDS, "encoded", color_space="RGB", seed=7)
    rng = np.random.default_rng(7)
    for crop, source in zip(crops, IMAGES, strict=True):
        window = random_crop_window(*source.shape[:2], rng)
        assert crop.shape == (window.height, window.width, 3)
        assert where(crop) == (window.top, window.left)
        top, left = where(crop)
        np.testing.assert_array_equal(
            crop, source[top : top + crop.shape[0], left : left + crop.shape[1]]
        )


def test_random_crop_is_deterministic_for_a_seed_and_differs_between_seeds():
    first = ofrecord_image_decoder_random_crop(RECORDS, "encoded", seed=1234)
    again = ofrecord_image_decoder_random_crop(RECORDS, "encoded", seed=1234)
    other = ofrecord_image_decoder_random_crop(RECORDS, "encoded", seed=4321)
    for a, b in zip(first, again, strict=True):
        np.testing.assert_array_equal(a, b)
    assert any(
        a.shape != c.shape or not np.array_equal(a, c) for a, c in zip(first, other, strict=True)
    )


def test_random_crop_with_a_generator_gives_fresh_crops_batch_after_batch():
    rng = np.random.default_rng(5)
    batches = [
        ofrecord_image_decoder_random_crop(RECORDS[:3], "encoded", seed=rng) for _ in range(3)
    ]
    windows = [tuple(where(c[:, :, ::-1]) + c.shape[:2] for c in batch) for batch in batches]
    assert len(set(windows)) == 3
    replay = np.random.default_rng(5)
    for batch in batches:
        for crop, source in zip(batch, IMAGES, strict=False):
            window = random_crop_window(*source.shape[:2], replay)
            assert crop.shape[:2] == (window.height, window.width)


def test_random_crop_areas_and_ratios_stay_in_range_on_real_decodes():
    options = {"random_area": (0.3, 0.6), "random_aspect_ratio": (0.5, 2.0)}
    crops = ofrecord_image_decoder_random_crop(
        RECORDS * 6, "encoded", color_space="GRAY", seed=3, **options
    )
    replay = np.random.default_rng(3)
    in_range = 0
    for crop, source in zip(crops, IMAGES * 6, strict=True):
        window = random_crop_window(*source.shape[:2], replay, **options)
        assert crop.shape == (window.height, window.width, 1)
        if window.fallback:  # (33, 517), (1, 1) and (7, 300) are too elongated for these ranges
            continue
        in_range += 1
        area = crop.shape[0] * crop.shape[1] / (source.shape[0] * source.shape[1])
        assert 0.3 <= area <= 0.6
        assert 0.5 <= crop.shape[1] / crop.shape[0] <= 2.0
    assert in_range >= 10


def test_random_crop_parameters_are_checked():
    for bad in [
        {"num_attempts": 0},
        {"random_area": (0.5, 0.4)},
        {"random_area": (0.1, 1.5)},
        {"random_area": (0.0, 0.0)},
        {"random_aspect_ratio": (0.0, 1.0)},
        {"random_aspect_ratio": (2.0, 1.0)},
        {"random_aspect_ratio": (1.0,)},
    ]:
        with pytest.raises(ValueError, match=next(iter(bad))):
            ofrecord_image_decoder_random_crop(RECORDS, "encoded", **bad)
    with pytest.raises(TypeError, match="num_attempts"):
        ofrecord_image_decoder_random_crop(RECORDS, "encoded", num_attempts=2.5)


# --- the window rule -------------------------------------------------------------------------------


def documented_fallback(height, width, area_max, ratio_min, ratio_max):
    """The fallback as docs/images.md states it, written out independently of the implementation."""
    h, w = height, width
    if w / h > ratio_max:
        w = max(1, math.floor(h * ratio_max))
    elif w / h < ratio_min:
        h = max(1, math.floor(w / ratio_min))
    scale = min(1.0, area_max * height * width / (h * w))
    return max(1, math.floor(h * math.sqrt(scale))), max(1, math.floor(w * math.sqrt(scale)))


ranges = st.tuples(st.floats(0.0, 1.0), st.floats(0.0, 1.0)).map(sorted).filter(lambda r: r[1] > 0)
ratios = st.tuples(st.floats(0.05, 20.0), st.floats(0.05, 20.0)).map(sorted)


@settings(max_examples=400, deadline=None)
@given(
    height=st.integers(1, 5000),
    width=st.integers(1, 5000),
    area=ranges,
    ratio=ratios,
    attempts=st.integers(1, 20),
    seed=st.integers(0, 2**32),
)
def test_every_window_is_inside_the_image_and_in_range_unless_it_is_the_fallback(
    height, width, area, ratio, attempts, seed
):
    window = random_crop_window(
        height,
        width,
        np.random.default_rng(seed),
        num_attempts=attempts,
        random_area=area,
        random_aspect_ratio=ratio,
    )
    assert window.height >= 1
    assert window.width >= 1
    assert 0 <= window.top <= height - window.height
    assert 0 <= window.left <= width - window.width
    if not window.fallback:
        assert area[0] <= window.height * window.width / (height * width) <= area[1]
        assert ratio[0] <= window.width / window.height <= ratio[1]
    else:
        size = documented_fallback(height, width, area[1], *ratio)
        assert (window.height, window.width) == size
        # at most the largest area, unless a side is at its minimum of one pixel
        assert window.height * window.width <= area[1] * height * width or 1 in size


@pytest.mark.parametrize(
    ("height", "width", "area", "ratio", "size"),
    [
        (1, 1000, (0.08, 1.0), (0.75, 1.333333), (1, 1)),  # too wide: the ratio is clamped
        (100, 100, (0.9, 1.0), (3.0, 4.0), (33, 100)),  # no wide window is big enough
        (100, 100, (0.5, 0.5), (0.75, 1.333333), (70, 70)),  # no w*h of exactly 5000: shrunk whole
        # ratio 0.75 is under the range, and no window of area 1 is in it: cut to 48 / 0.8 rows
        (64, 48, (1.0, 1.0), (0.8, 0.9), (60, 48)),
    ],
)
def test_fallback_windows(height, width, area, ratio, size):
    """When no drawn window qualifies, the documented fallback: always, for these ranges."""
    for seed in range(30):
        window = random_crop_window(
            height, width, np.random.default_rng(seed), random_area=area, random_aspect_ratio=ratio
        )
        assert window.fallback
        assert (window.height, window.width) == size


def test_fallback_position_is_random_not_centred():
    lefts = {
        random_crop_window(10, 1000, np.random.default_rng(seed), random_area=(0.5, 1.0)).left
        for seed in range(20)
    }
    assert len(lefts) > 5
