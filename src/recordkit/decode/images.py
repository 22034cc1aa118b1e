"""Decode encoded images (JPEG, PNG, anything Pillow opens) held in bytes features into uint8 arrays.

:class:`Image` is a parse spec: ``parse_examples(records, {"image": Image(size=(224, 224))})`` decodes the
single bytes value of the feature ``image`` of every record. The OneFlow image decoders of
:mod:`recordkit.compat.oneflow` use the same decoding, and :func:`random_crop_window` is their crop-window rule.

Pillow is imported on first use, not with this module; it is the ``image`` extra
(``pip install "recordkit[image]"``).

Examples
--------
>>> import io
>>> from PIL import Image as PILImage
>>> png = io.BytesIO()
>>> PILImage.new("RGB", (3, 2), (255, 0, 0)).save(png, "PNG")
>>> decode_images([png.getvalue()], Image(color_space="BGR"), "image")[0][0, 0]
array([  0,   0, 255], dtype=uint8)
"""

from __future__ import annotations

import functools
import io
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final, NamedTuple

import numpy as np

from recordkit.errors import DecodeError
from recordkit.support.extras import needs
from recordkit.support.signatures import JPEG_SIGNATURE

if TYPE_CHECKING:
    from PIL.Image import Image as PILImage

__all__ = ["CropWindow", "Image", "decode_images", "random_crop_window"]

COLOR_SPACES: Final = ("RGB", "BGR", "GRAY")
# Pillow modes of one gray channel (with or without alpha); every other mode is a colour mode.
_GRAY_MODES: Final = frozenset({"1", "L", "LA", "La", "F", "I", "I;16", "I;16L", "I;16B", "I;16N"})
_WIDE_GRAY_MODES: Final = frozenset({"I", "I;16", "I;16L", "I;16B", "I;16N"})

#: ``crop(height, width)`` -> the window ``(top, left, crop_height, crop_width)`` to keep.
Cropper = Callable[[int, int], "CropWindow"]


class _BadImage(Exception):
    """One image could not be decoded; the batch loop adds the record and the feature."""


@dataclass(frozen=True)
class Image:
    """A bytes feature holding one encoded image per record, decoded into a ``(H, W, C)`` uint8 array.

    Parameters
    ----------
    size
        ``(height, width)``: resize every image to it (Pillow's bilinear filter; the aspect ratio is not
        kept) and return one ``(n, height, width, C)`` array. ``None`` (the default) keeps each image's own
        size and returns a list of ``n`` arrays.
    color_space
        ``"RGB"`` (default), ``"BGR"`` (channels reversed) or ``"GRAY"`` (one channel, ``C == 1``).
    formats
        The image formats accepted, as Pillow names them (e.g. ``("JPEG", "PNG")``); ``None`` accepts
        every format Pillow opens. Bytes of another format raise :class:`~recordkit.errors.DecodeError`.

    Notes
    -----
    Each record must hold exactly one bytes value; a missing feature or another number of values raises
    :class:`~recordkit.errors.DecodeError`, as do bytes that are not an image, a truncated image and an
    image of more pixels than ``PIL.Image.MAX_IMAGE_PIXELS``. See the images page of the documentation
    for how alpha, palettes, 16-bit samples and CMYK are converted.
    """

    size: tuple[int, int] | None = None
    color_space: str = "RGB"
    formats: tuple[str, ...] | None = None

    def __init__(
        self,
        size: Sequence[int] | None = None,
        color_space: str = "RGB",
        *,
        formats: Sequence[str] | None = None,
    ) -> None:
        object.__setattr__(self, "size", None if size is None else _check_size(size))
        if color_space not in COLOR_SPACES:
            raise ValueError(f"color_space must be one of {COLOR_SPACES}, not {color_space!r}")
        object.__setattr__(self, "color_space", color_space)
        if formats is not None:
            if isinstance(formats, str) or not all(isinstance(f, str) for f in formats):
                raise TypeError(
                    "formats is a sequence of Pillow format names, e.g. ('JPEG', 'PNG')"
                )
            formats = tuple(f.upper() for f in formats)
        object.__setattr__(self, "formats", formats)

    @property
    def channels(self) -> int:
        """The number of channels of the decoded images: 1 for ``"GRAY"``, else 3."""
        return 1 if self.color_space == "GRAY" else 3


def _check_size(size: Any) -> tuple[int, int]:
    dims = tuple(size)
    if len(dims) != 2 or not all(isinstance(d, (int, np.integer)) and d > 0 for d in dims):
        raise ValueError(f"size is (height, width), two positive ints, not {size!r}")
    return int(dims[0]), int(dims[1])


def decode_images(
    values: Sequence[bytes] | np.ndarray[Any, Any],
    spec: Image,
    feature: str,
    *,
    crop: Cropper | None = None,
    rows: Sequence[int] | None = None,
) -> np.ndarray[Any, Any] | list[np.ndarray[Any, Any]]:
    """Decode one encoded image per record.

    Parameters
    ----------
    values
        The encoded images, one per record (``bytes``; an object array of them too).
    spec
        What to produce: see :class:`Image`.
    feature
        The feature name, for error messages.
    crop
        Called with each image's ``(height, width)`` before any conversion; the image is cut to the
        window it returns (see :func:`random_crop_window`).
    rows
        The record index of each value, for error messages (``range(len(values))`` by default).

    Returns
    -------
    numpy.ndarray or list of numpy.ndarray
        ``(n, height, width, C)`` uint8 when ``spec.size`` is set, else ``n`` arrays ``(H_i, W_i, C)``.

    Raises
    ------
    DecodeError
        An image could not be decoded; ``.index`` is its record, ``.feature`` is ``feature``.
    """
    with needs("decoding images (recordkit.Image)", "Pillow", "image", "Pillow"):
        from PIL import Image as PILImageModule  # the optional dependency, loaded on first use

    stacked = None
    if spec.size is not None:
        stacked = np.empty((len(values), *spec.size, spec.channels), np.uint8)
    images: list[np.ndarray[Any, Any]] = []
    for i, data in enumerate(values):
        try:
            slot = None if stacked is None else stacked[i]
            # simplejpeg where it applies (straight into slot when it can), else Pillow
            pixels = _decode_jpeg_fast(PILImageModule, data, spec, crop, slot)
            if pixels is None:
                pixels = _decode_pillow(PILImageModule, data, spec, crop)
        except _BadImage as exc:
            index = i if rows is None else int(rows[i])
            raise DecodeError(
                f"record {index}: feature {feature!r}: {exc}", index=index, feature=feature
            ) from exc.__cause__
        if stacked is None:
            images.append(np.require(pixels, requirements=["C", "W"]))  # copies views only
        elif pixels is not slot:
            stacked[i] = pixels
    return images if stacked is None else stacked


@functools.lru_cache(maxsize=1)
def _simplejpeg() -> Any:
    """The simplejpeg module when it is installed (the ``image-fast`` extra), else ``None``."""
    try:
        import simplejpeg
    except ImportError:
        return None
    return simplejpeg


def _decode_jpeg_fast(
    pil: Any, data: bytes, spec: Image, crop: Cropper | None, slot: np.ndarray[Any, Any] | None
) -> np.ndarray[Any, Any] | None:
    """An RGB or BGR YCbCr or gray JPEG decoded by simplejpeg, or ``None`` where it does not apply.

    simplejpeg and Pillow call the same libjpeg-turbo functions with the same settings (accurate integer
    IDCT, fancy upsampling), so the pixels are the same; simplejpeg skips Pillow's image object and its
    copies, and decodes straight into ``slot`` when the image already has the batch's size. Anything
    else (gray output, other JPEG colour spaces, damaged data) goes to Pillow, which decides.
    """
    simplejpeg = _simplejpeg()
    if (
        simplejpeg is None
        or spec.color_space == "GRAY"
        or not data.startswith(JPEG_SIGNATURE)
        or (spec.formats is not None and "JPEG" not in spec.formats)
    ):
        return None
    try:
        height, width, colorspace, _ = simplejpeg.decode_jpeg_header(data)
    except ValueError:  # not a header simplejpeg reads: Pillow decides what is wrong
        return None
    if colorspace not in ("YCbCr", "Gray"):
        return None
    _check_pixels(pil, width, height)
    direct = slot is not None and crop is None and slot.shape[:2] == (height, width)
    try:
        pixels: np.ndarray[Any, Any] = simplejpeg.decode_jpeg(
            data, colorspace=spec.color_space, buffer=slot if direct else None
        )
    except ValueError:  # strict mode refuses damaged data that Pillow may still decode
        return None
    if direct:
        return slot
    if crop is not None:
        window = crop(height, width)
        pixels = pixels[
            window.top : window.top + window.height, window.left : window.left + window.width
        ]
    if spec.size is not None and pixels.shape[:2] != spec.size:
        # Pillow's bilinear filter works channel by channel, so BGR resizes as RGB does.
        resized = pil.fromarray(np.ascontiguousarray(pixels), "RGB").resize(
            (spec.size[1], spec.size[0]), pil.Resampling.BILINEAR
        )
        pixels = np.asarray(resized)
    return pixels


def _decode_pillow(
    pil: Any, data: bytes, spec: Image, crop: Cropper | None
) -> np.ndarray[Any, Any]:
    """One image decoded, cropped, converted and resized by Pillow."""
    image = _open(pil, data, spec.formats)
    if crop is not None:
        window = crop(image.height, image.width)
        image = image.crop(
            (window.left, window.top, window.left + window.width, window.top + window.height)
        )
    image = _convert(pil, image, "L" if spec.color_space == "GRAY" else "RGB")
    if spec.size is not None and image.size != (spec.size[1], spec.size[0]):
        image = image.resize((spec.size[1], spec.size[0]), pil.Resampling.BILINEAR)
    pixels = np.asarray(image)  # a read-only view of Pillow's bytes
    if spec.color_space == "GRAY":
        pixels = pixels[:, :, None]
    elif spec.color_space == "BGR":
        pixels = pixels[:, :, ::-1]
    return pixels


def _open(pil: Any, data: bytes, formats: tuple[str, ...] | None) -> PILImage:
    """Open and fully decode ``data`` (only its first frame), refusing decompression bombs."""
    try:
        image: PILImage = pil.open(io.BytesIO(data), formats=formats)
    except pil.UnidentifiedImageError as exc:
        accepted = "an image" if formats is None else f"an image of format {'/'.join(formats)}"
        raise _BadImage(f"not {accepted} (the first bytes are {bytes(data[:8])!r})") from exc
    except (pil.DecompressionBombError, pil.DecompressionBombWarning) as exc:
        raise _BadImage(f"decompression bomb refused: {exc}") from exc
    except Exception as exc:  # Pillow's header parsers raise many types
        raise _BadImage(f"cannot read the image header: {exc}") from exc
    _check_pixels(pil, image.width, image.height)
    try:
        image.load()
    except Exception as exc:  # truncated or corrupt data: OSError, SyntaxError, zlib.error, ...
        raise _BadImage(f"cannot decode the {image.format} image: {exc}") from exc
    return image


def _check_pixels(pil: Any, width: int, height: int) -> None:
    """Refuse an image over Pillow's limit (Pillow itself only warns up to twice the limit)."""
    limit = pil.MAX_IMAGE_PIXELS
    if limit is not None and width * height > limit:
        raise _BadImage(
            f"decompression bomb refused: {width}x{height} is over "
            f"PIL.Image.MAX_IMAGE_PIXELS ({limit}) pixels"
        )


def _convert(pil: Any, image: PILImage, target: str) -> PILImage:
    """``image`` in mode ``"RGB"`` or ``"L"``: alpha dropped, palettes looked up, 16 bits cut to 8.

    A gray source goes through 8-bit gray ``"L"`` and a colour source through ``"RGB"``, so that every
    mode reaches the target by one rule: gray to RGB repeats the channel, RGB to gray is Pillow's luma.
    """
    if image.mode == target:
        return image
    try:
        if image.mode in _WIDE_GRAY_MODES:
            wide = np.asarray(image).astype(np.int64)
            image = pil.fromarray((np.clip(wide, 0, 65535) >> 8).astype(np.uint8), "L")
        else:
            image = image.convert("L" if image.mode in _GRAY_MODES else "RGB")
        return image if image.mode == target else image.convert(target)
    except ValueError as exc:  # a mode Pillow cannot convert
        raise _BadImage(f"cannot convert a {image.mode!r} image to {target}: {exc}") from exc


class CropWindow(NamedTuple):
    """A crop window of an image: its top-left corner, its size, and whether the fallback gave it."""

    top: int
    left: int
    height: int
    width: int
    fallback: bool


def check_crop_ranges(
    num_attempts: int, random_area: Sequence[float], random_aspect_ratio: Sequence[float]
) -> tuple[tuple[float, float], tuple[float, float]]:
    """Validate the random-crop parameters (as OneFlow's kernel does) and return them as tuples."""
    if isinstance(num_attempts, bool) or not isinstance(num_attempts, (int, np.integer)):
        raise TypeError(f"num_attempts must be an int, not {type(num_attempts).__name__}")
    if num_attempts < 1:
        raise ValueError(f"num_attempts must be at least 1, not {num_attempts}")
    area = tuple(float(v) for v in random_area)
    ratio = tuple(float(v) for v in random_aspect_ratio)
    if len(area) != 2 or not 0.0 <= area[0] <= area[1] <= 1.0 or area[1] == 0.0:
        raise ValueError(
            f"random_area is (min, max) with 0 <= min <= max <= 1 and max > 0, not {random_area!r}"
        )
    if len(ratio) != 2 or not 0.0 < ratio[0] <= ratio[1] or not math.isfinite(ratio[1]):
        raise ValueError(
            f"random_aspect_ratio is (min, max) with 0 < min <= max, not {random_aspect_ratio!r}"
        )
    return (area[0], area[1]), (ratio[0], ratio[1])


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
    log_ratios = (math.log(ratio_min), math.log(ratio_max))
    for _ in range(num_attempts):
        target = rng.uniform(area_min, area_max) * total
        ratio = math.exp(rng.uniform(*log_ratios))
        crop_w = max(1, round(math.sqrt(target * ratio)))
        crop_h = max(1, round(math.sqrt(target / ratio)))
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
