"""The Image parse spec: decoding, colour spaces, resizing and errors, against TensorFlow where installed.

Oracles: a PNG decodes to exactly the array it was encoded from (lossless); TensorFlow's
``tf.io.decode_png`` / ``tf.io.decode_jpeg`` and ``tf.image.resize`` (marked interop, skipped without
TensorFlow); the ITU-R 601-2 luma formula for gray.
"""

from __future__ import annotations

import io
import struct
import warnings
import zlib
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import recordkit as rk
from recordkit.decode import images
from recordkit.decode.images import Image
from recordkit.errors import DecodeError

PILImage = pytest.importorskip("PIL.Image")

JPEG_KINDS = ["4:2:0", "4:4:4", "4:2:2", "progressive", "gray"]


def encode(pixels: np.ndarray | Any, fmt: str = "PNG", **options: Any) -> bytes:
    image = pixels if isinstance(pixels, PILImage.Image) else PILImage.fromarray(pixels)
    buffer = io.BytesIO()
    image.save(buffer, fmt, **options)
    return buffer.getvalue()


def photo(height: int, width: int, seed: int = 0) -> np.ndarray:
    """Gradients plus noise: a JPEG of it has real chroma and texture."""
    rng = np.random.default_rng(seed)
    y, x = np.mgrid[0:height, 0:width]
    base = np.stack([x * 255 / width, y * 255 / height, (x + y) % 256], axis=-1)
    return np.clip(base + rng.normal(0, 10, base.shape), 0, 255).astype(np.uint8)


def jpeg(kind: str, height: int = 40, width: int = 56, seed: int = 0) -> bytes:
    pixels = photo(height, width, seed)
    if kind == "gray":
        return encode(pixels[:, :, 0], "JPEG", quality=90)
    if kind == "progressive":
        return encode(pixels, "JPEG", quality=90, progressive=True)
    return encode(pixels, "JPEG", quality=90, subsampling=kind)


def examples(*payloads: bytes, name: str = "image") -> list[bytes]:
    return [rk.encode_example({name: payload}) for payload in payloads]


def noise(shape: tuple[int, ...], seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, 256, shape, dtype=np.uint8)


def luma(rgb: np.ndarray) -> np.ndarray:
    return rgb.astype(np.float64) @ np.array([0.299, 0.587, 0.114])


@pytest.fixture
def pillow_only(monkeypatch):
    """Switch off the simplejpeg path, so that every image goes through Pillow."""
    monkeypatch.setattr(images, "_simplejpeg", lambda: None)


# --- the spec ------------------------------------------------------------------------------------------


def test_spec_defaults_and_validation():
    spec = rk.Image()
    assert (spec.size, spec.color_space, spec.formats, spec.channels) == (None, "RGB", None, 3)
    assert rk.Image((2, 3), "GRAY", formats=["png"]) == rk.Image(
        size=[2, 3], color_space="GRAY", formats=("PNG",)
    )
    assert rk.Image(color_space="GRAY").channels == 1
    assert Image is rk.Image
    for size in [(0, 4), (4,), (2, 3, 1), (2.0, 3), (-1, 2)]:
        with pytest.raises(ValueError, match="size"):
            rk.Image(size=size)
    with pytest.raises(ValueError, match="color_space"):
        rk.Image(color_space="rgb")
    with pytest.raises(TypeError, match="formats"):
        rk.Image(formats="PNG")


# --- exact decoding --------------------------------------------------------------------------------


@pytest.mark.parametrize("color_space", ["RGB", "BGR"])
def test_png_decodes_to_the_encoded_array_with_each_image_its_own_size(color_space):
    sources = [noise((4 + i, 7 - i, 3), seed=i) for i in range(4)]
    out = rk.parse_examples(
        examples(*map(encode, sources)), {"image": rk.Image(color_space=color_space)}
    )
    decoded = out["image"]
    assert isinstance(decoded, list)
    assert len(decoded) == len(sources)
    for got, source in zip(decoded, sources, strict=True):
        want = source if color_space == "RGB" else source[:, :, ::-1]
        assert got.dtype == np.uint8
        np.testing.assert_array_equal(got, want)
        assert got.flags.c_contiguous
        assert got.flags.writeable


def test_gray_from_gray_is_exact_and_from_colour_is_luma():
    gray = noise((6, 9), seed=3)
    rgb = noise((6, 9, 3), seed=4)
    out = rk.parse_examples(
        examples(encode(gray), encode(rgb)), {"image": rk.Image(color_space="GRAY")}
    )
    from_gray, from_rgb = out["image"]
    np.testing.assert_array_equal(from_gray, gray[:, :, None])
    assert from_rgb.shape == (6, 9, 1)
    assert np.abs(from_rgb[:, :, 0] - luma(rgb)).max() <= 1.0
    # gray to RGB repeats the channel
    as_rgb = rk.parse_examples(examples(encode(gray)), {"image": rk.Image()})["image"][0]
    np.testing.assert_array_equal(as_rgb, np.repeat(gray[:, :, None], 3, axis=2))


def test_alpha_is_dropped_not_composited():
    rgba = noise((5, 5, 4), seed=5)
    rgba[..., 3] = 0  # fully transparent: the colour values must survive
    for color_space, want in [("RGB", rgba[..., :3]), ("BGR", rgba[..., 2::-1])]:
        got = rk.parse_examples(
            examples(encode(rgba)), {"image": rk.Image(color_space=color_space)}
        )
        np.testing.assert_array_equal(got["image"][0], want)


def test_sixteen_bit_gray_keeps_the_high_byte():
    wide = np.random.default_rng(6).integers(0, 65536, (4, 6), dtype=np.uint16)
    png = encode(PILImage.fromarray(wide))
    assert PILImage.open(io.BytesIO(png)).mode.startswith("I;16")
    got = rk.parse_examples(examples(png), {"image": rk.Image(color_space="GRAY")})["image"][0]
    np.testing.assert_array_equal(got[:, :, 0], (wide >> 8).astype(np.uint8))


def test_palette_and_gif_first_frame():
    frames = [PILImage.fromarray(np.full((4, 4, 3), v, np.uint8)).convert("P") for v in (10, 200)]
    buffer = io.BytesIO()
    frames[0].save(buffer, "GIF", save_all=True, append_images=frames[1:])
    got = rk.parse_examples(examples(buffer.getvalue()), {"image": rk.Image()})["image"][0]
    palette_colour = np.asarray(frames[0].convert("RGB"))
    np.testing.assert_array_equal(got, palette_colour)


def test_single_example_and_ofrecords():
    source = noise((3, 4, 3), seed=7)
    one = rk.parse_example(examples(encode(source))[0], {"image": rk.Image(color_space="BGR")})
    np.testing.assert_array_equal(one["image"], source[:, :, ::-1])
    record = rk.encode_ofrecord({"image": [encode(source)], "label": np.array([3], np.int64)})
    out = rk.parse_ofrecords(
        [record] * 2, {"image": rk.Image(size=(3, 4)), "label": rk.FixedLen((), np.int64)}
    )
    np.testing.assert_array_equal(out["image"], np.stack([source, source]))
    assert out["label"].tolist() == [3, 3]


# --- resizing ------------------------------------------------------------------------------------


def test_size_gives_one_stacked_batch_and_keeps_native_sizes_untouched():
    sources = [noise((8, 6, 3), seed=i) for i in range(3)]
    out = rk.parse_examples(examples(*map(encode, sources)), {"image": rk.Image(size=(8, 6))})
    assert out["image"].shape == (3, 8, 6, 3)
    assert out["image"].dtype == np.uint8
    np.testing.assert_array_equal(out["image"], np.stack(sources))


def test_resize_is_height_then_width_and_stretches():
    _, x = np.mgrid[0:30, 0:90]
    left_to_right = np.repeat((x * 255 // 89).astype(np.uint8)[:, :, None], 3, axis=2)
    out = rk.parse_examples(examples(encode(left_to_right)), {"image": rk.Image(size=(40, 20))})
    image = out["image"][0].astype(int)
    assert image.shape == (40, 20, 3)
    assert (np.diff(image[:, :, 0], axis=1) >= 0).all()
    assert image[0, -1, 0] - image[0, 0, 0] > 200
    assert (image == image[:1]).all()  # every row the same: no vertical content was invented


def test_resize_of_mixed_sizes_and_colour_spaces():
    sources = [noise((10 + 3 * i, 7 + i, 3), seed=i) for i in range(3)]
    rgb = rk.parse_examples(examples(*map(encode, sources)), {"image": rk.Image(size=(9, 9))})[
        "image"
    ]
    bgr = rk.parse_examples(
        examples(*map(encode, sources)), {"image": rk.Image(size=(9, 9), color_space="BGR")}
    )["image"]
    np.testing.assert_array_equal(bgr, rgb[..., ::-1])
    gray = rk.parse_examples(
        examples(*map(encode, sources)), {"image": rk.Image(size=(9, 9), color_space="GRAY")}
    )["image"]
    assert gray.shape == (3, 9, 9, 1)


# --- errors --------------------------------------------------------------------------------------


def bad_batch(bad: bytes, position: int = 5, size: int = 8) -> list[bytes]:
    good = encode(noise((3, 3, 3)))
    return examples(*[bad if i == position else good for i in range(size)])


def assert_decode_error(records: list[bytes], spec: Any, index: int, match: str) -> DecodeError:
    with pytest.raises(DecodeError, match=match) as caught:
        rk.parse_examples(records, {"image": spec})
    assert caught.value.index == index
    assert caught.value.feature == "image"
    assert f"record {index}" in str(caught.value)
    assert "'image'" in str(caught.value)
    return caught.value


@pytest.mark.parametrize("path", ["default", "pillow_only"])
@pytest.mark.parametrize(
    ("bad", "match"),
    [
        (b"", "not an image"),
        (b"GIF89a but not really", "image"),
        (b"hello, world", "not an image"),
        (encode(noise((20, 20, 3)))[:-30], "cannot (decode|read)"),
        (jpeg("4:2:0")[:300], "cannot (decode|read)"),
        (jpeg("progressive")[:-200], "cannot (decode|read)"),
    ],
    ids=["empty", "bad-gif", "text", "truncated-png", "truncated-jpeg", "truncated-progressive"],
)
def test_bad_bytes_raise_decode_error_naming_record_and_feature(request, path, bad, match):
    if path == "pillow_only":
        request.getfixturevalue("pillow_only")
    for spec in (rk.Image(), rk.Image(size=(3, 3))):
        err = assert_decode_error(bad_batch(bad), spec, 5, match)
        assert not type(err).__module__.startswith("PIL")


def png_header_only(width: int, height: int) -> bytes:
    """A PNG whose header claims ``width`` x ``height`` pixels, with one tiny data chunk."""

    def chunk(kind: bytes, body: bytes) -> bytes:
        return (
            struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body))
        )

    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(b"\0" * 64))


def test_decompression_bomb_is_refused_before_decoding():
    bomb = png_header_only(100_000, 100_000)
    assert_decode_error(bad_batch(bomb, position=2), rk.Image(), 2, "decompression bomb")


@pytest.mark.parametrize("warning", ["error", "ignore"])
@pytest.mark.parametrize("path", ["default", "pillow_only"])
@pytest.mark.parametrize("payload", ["png", "jpeg"])
def test_images_over_pillows_limit_are_refused_even_where_pillow_only_warns(
    request, monkeypatch, warning, path, payload
):
    if path == "pillow_only":
        request.getfixturevalue("pillow_only")
    data = encode(noise((12, 12, 3))) if payload == "png" else jpeg("4:2:0", 12, 12)
    # 144 pixels: over a limit of 100 but under twice it, where Pillow only warns
    monkeypatch.setattr(PILImage, "MAX_IMAGE_PIXELS", 100)
    with warnings.catch_warnings():
        warnings.simplefilter(warning, PILImage.DecompressionBombWarning)
        assert_decode_error(examples(data), rk.Image(), 0, "decompression bomb")
    monkeypatch.setattr(PILImage, "MAX_IMAGE_PIXELS", None)  # None: no limit, as in Pillow
    assert rk.parse_examples(examples(data), {"image": rk.Image()})["image"][0].shape == (12, 12, 3)


def test_formats_restrict_what_is_accepted():
    png, jpg = encode(noise((3, 3, 3))), jpeg("4:2:0", 8, 8)
    only_png = rk.Image(formats=("PNG",))
    assert rk.parse_examples(examples(png), {"image": only_png})["image"][0].shape == (3, 3, 3)
    assert_decode_error(examples(png, jpg), only_png, 1, "not an image of format PNG")


def test_feature_missing_or_not_one_bytes_value():
    png = encode(noise((3, 3, 3)))
    records = [*examples(png), rk.encode_example({"other": 1})]
    assert_decode_error(records, rk.Image(), 1, "missing")
    records = [*examples(png), rk.encode_example({"image": [png, png]})]
    assert_decode_error(records, rk.Image(), 1, "exactly 1 bytes value, found 2")
    records = [*examples(png), rk.encode_example({"image": [3, 4]})]
    assert_decode_error(records, rk.Image(), 1, "int64_list")


SEEDS = {
    "png": encode(noise((9, 11, 4), seed=1)),
    "jpeg": jpeg("4:2:0", 16, 16),
    "progressive": jpeg("progressive", 16, 16),
    "gif": encode(noise((6, 5, 3)), "GIF"),
    "bmp": encode(noise((6, 5, 3)), "BMP"),
    "tiff": encode(noise((6, 5, 3)), "TIFF"),
    "webp": encode(noise((6, 5, 3)), "WEBP", lossless=True),
}


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    kind=st.sampled_from(sorted(SEEDS)),
    cut=st.integers(min_value=0, max_value=400),
    flips=st.lists(st.tuples(st.integers(0, 400), st.integers(1, 255)), max_size=3),
    color_space=st.sampled_from(["RGB", "BGR", "GRAY"]),
    sized=st.booleans(),
)
def test_damaged_images_decode_or_raise_decode_error(kind, cut, flips, color_space, sized):
    data = bytearray(SEEDS[kind])
    for position, mask in flips:
        if position < len(data):
            data[position] ^= mask
    data = bytes(data[: len(data) - cut] if cut < len(data) else data[:1])
    spec = rk.Image(size=(4, 4) if sized else None, color_space=color_space)
    try:
        out = rk.parse_examples(examples(data), {"image": spec})["image"]
    except DecodeError as err:
        assert (err.index, err.feature) == (0, "image")  # noqa: PT017 - either outcome is fine
        return
    image = out[0]
    assert image.dtype == np.uint8
    assert image.ndim == 3
    assert image.shape[2] == spec.channels
    if sized:
        assert image.shape[:2] == (4, 4)


# --- simplejpeg gives Pillow's pixels -------------------------------------------------------------


@pytest.mark.parametrize("kind", JPEG_KINDS)
@pytest.mark.parametrize("color_space", ["RGB", "BGR", "GRAY"])
@pytest.mark.parametrize(
    "size", [None, (40, 56), (17, 23)], ids=["own-size", "same-size", "resized"]
)
def test_simplejpeg_path_gives_pillows_pixels(monkeypatch, kind, color_space, size):
    simplejpeg = pytest.importorskip("simplejpeg")
    records = examples(*(jpeg(kind, seed=seed) for seed in range(3)))
    spec = {"image": rk.Image(size=size, color_space=color_space)}
    calls = []
    real = simplejpeg.decode_jpeg

    def counting(*args, **kwargs):
        calls.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(simplejpeg, "decode_jpeg", counting)
    fast = rk.parse_examples(records, spec)["image"]
    assert len(calls) == (
        0 if color_space == "GRAY" else 3
    )  # GRAY is Pillow's luma, not the Y plane
    monkeypatch.setattr(images, "_simplejpeg", lambda: None)
    slow = rk.parse_examples(records, spec)["image"]
    np.testing.assert_array_equal(np.asarray(fast), np.asarray(slow))


def test_simplejpeg_is_not_used_for_cmyk_or_when_jpeg_is_not_an_accepted_format(monkeypatch):
    simplejpeg = pytest.importorskip("simplejpeg")
    calls = []
    monkeypatch.setattr(simplejpeg, "decode_jpeg", lambda *a, **k: calls.append(1))
    cmyk = encode(PILImage.fromarray(photo(8, 8)).convert("CMYK"), "JPEG")
    out = rk.parse_examples(examples(cmyk), {"image": rk.Image()})["image"][0]
    np.testing.assert_array_equal(out, np.asarray(PILImage.open(io.BytesIO(cmyk)).convert("RGB")))
    assert_decode_error(examples(jpeg("4:2:0")), rk.Image(formats=["PNG"]), 0, "not an image")
    assert calls == []


# --- TensorFlow as the oracle ----------------------------------------------------------------------


@pytest.fixture(scope="module")
def tf():
    return pytest.importorskip("tensorflow")


def png_kinds(tf) -> dict[str, tuple[bytes, bool]]:
    """Encoded PNGs of every colour type and depth -> (bytes, whether the source is gray)."""
    rng = np.random.default_rng(11)
    kinds = {
        "rgb8": (tf.io.encode_png(noise((7, 9, 3))).numpy(), False),
        "rgba8": (tf.io.encode_png(noise((7, 9, 4))).numpy(), False),
        "gray8": (tf.io.encode_png(noise((7, 9, 1))).numpy(), True),
        "gray-alpha8": (tf.io.encode_png(noise((7, 9, 2))).numpy(), True),
        "rgb16": (
            tf.io.encode_png(rng.integers(0, 65536, (7, 9, 3), dtype=np.uint16)).numpy(),
            False,
        ),
        "rgba16": (
            tf.io.encode_png(rng.integers(0, 65536, (7, 9, 4), dtype=np.uint16)).numpy(),
            False,
        ),
        "gray16": (
            tf.io.encode_png(rng.integers(0, 65536, (7, 9, 1), dtype=np.uint16)).numpy(),
            True,
        ),
    }
    palette = PILImage.fromarray(noise((7, 9, 3))).convert(
        "P", palette=PILImage.Palette.ADAPTIVE, colors=16
    )
    kinds["palette"] = (encode(palette), False)
    kinds["palette-transparent"] = (encode(palette, transparency=3), False)
    bits = PILImage.fromarray(noise((7, 9)) // 128 * 255).convert("1")
    kinds["gray1"] = (encode(bits), True)
    for depth in (2, 4):
        levels = rng.integers(0, 2**depth, (7, 9)) * (255 // (2**depth - 1))
        kinds[f"gray{depth}"] = (encode(levels.astype(np.uint8), bits=depth), True)
    return kinds


@pytest.mark.interop
def test_png_of_every_colour_type_matches_tensorflow_exactly(tf):
    for name, (png, gray_source) in png_kinds(tf).items():
        decoded = rk.parse_examples(examples(png), {"image": rk.Image()})["image"][0]
        np.testing.assert_array_equal(
            decoded, tf.io.decode_png(png, channels=3).numpy(), err_msg=name
        )
        bgr = rk.parse_examples(examples(png), {"image": rk.Image(color_space="BGR")})["image"][0]
        np.testing.assert_array_equal(bgr, decoded[:, :, ::-1], err_msg=name)
        if gray_source:
            gray = rk.parse_examples(examples(png), {"image": rk.Image(color_space="GRAY")})[
                "image"
            ][0]
            np.testing.assert_array_equal(
                gray, tf.io.decode_png(png, channels=1).numpy(), err_msg=name
            )


@pytest.mark.interop
@pytest.mark.parametrize("path", ["default", "pillow_only"])
@pytest.mark.parametrize("kind", [*JPEG_KINDS, "cmyk"])
def test_jpeg_matches_tensorflow_accurate_idct_exactly_and_its_default_within_tolerance(
    request, tf, path, kind
):
    if path == "pillow_only":
        request.getfixturevalue("pillow_only")
    if kind == "cmyk":
        data = encode(PILImage.fromarray(photo(40, 56)).convert("CMYK"), "JPEG", quality=90)
    else:
        data = jpeg(kind)
    decoded = rk.parse_examples(examples(data), {"image": rk.Image()})["image"][0]
    accurate = tf.io.decode_jpeg(data, channels=3, dct_method="INTEGER_ACCURATE").numpy()
    np.testing.assert_array_equal(decoded, accurate)
    fast = tf.io.decode_jpeg(data, channels=3).numpy().astype(int)  # TF's default: the fast IDCT
    assert np.abs(decoded.astype(int) - fast).max() <= 8


@pytest.mark.interop
@pytest.mark.parametrize("size", [(20, 30), (80, 120), (37, 100), (13, 53), (1, 1)])
def test_resize_matches_tensorflow_bilinear_with_antialias(tf, size):
    source = noise((37, 53, 3), seed=12)
    got = rk.parse_examples(examples(encode(source)), {"image": rk.Image(size=size)})["image"][0]
    want = tf.image.resize(source, size, method="bilinear", antialias=True).numpy()
    assert np.abs(got.astype(np.float64) - want).max() <= 1.0
