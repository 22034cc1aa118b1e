"""Decode encoded images (JPEG, PNG, anything Pillow opens) held in bytes features into uint8 arrays.

:class:`Image` is a parse spec: ``parse_examples(records, {"image": Image(size=(224, 224))})`` decodes the
single bytes value of the feature ``image`` of every record, and can crop, resize and flip it on the way
(the training and evaluation transforms of torchvision, the pixels touched once). The OneFlow image
decoders of :mod:`recordkit.compat.oneflow` use the same decoding; the crop windows are in
:mod:`recordkit.decode.image_windows`.

Pillow is imported on first use, not with this module; it is the ``image`` extra
(``pip install "recordkit[image]"``). ``image-fast`` adds simplejpeg and OpenCV.

The images of a batch are decoded on a pool of threads (Pillow, simplejpeg and OpenCV release the GIL
while they work): :data:`THREADS` of them, by default as many as the CPUs this process may use, and one
in a DataLoader worker process, where the processes already share the CPUs.

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
import os
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

import numpy as np

from recordkit.decode.image_windows import (
    CropWindow,
    center_crop_window,
    check_crop_ranges,
    random_crop_window,
    random_resized_crop_window,
    record_rng,
)
from recordkit.errors import DecodeError
from recordkit.support.extras import needs
from recordkit.support.seeding import current_seed
from recordkit.support.signatures import JPEG_SIGNATURE
from recordkit.support.workers import in_worker_process

if TYPE_CHECKING:
    from PIL.Image import Image as PILImage

# CropWindow and random_crop_window are imported from here since 0.2; their home is image_windows.
__all__ = [
    "THREADS",
    "CropWindow",
    "Image",
    "decode_images",
    "random_crop_window",
]

COLOR_SPACES: Final = ("RGB", "BGR", "GRAY")
CROPS: Final = (None, "center", "random")
LAYOUTS: Final = ("HWC", "CHW")
# Pillow modes of one gray channel (with or without alpha); every other mode is a colour mode.
_GRAY_MODES: Final = frozenset({"1", "L", "LA", "La", "F", "I", "I;16", "I;16L", "I;16B", "I;16N"})
_WIDE_GRAY_MODES: Final = frozenset({"I", "I;16", "I;16L", "I;16B", "I;16N"})

#: The threads that decode the images of one batch: ``None`` (default) is as many as the CPUs this
#: process may use, or 1 inside a DataLoader worker process; set an int to choose.
THREADS: int | None = None

#: ``crop(height, width)`` -> the window ``(top, left, crop_height, crop_width)`` to keep.
Cropper = Callable[[int, int], CropWindow]
#: A window of an array to a fraction of a pixel: ``(left, top, right, bottom)``, or ``None`` for all of it.
Box = tuple[float, float, float, float] | None


class _BadImage(Exception):
    """One image could not be decoded; the batch loop adds the record and the feature."""


@dataclass(frozen=True)
class Image:
    """A bytes feature holding one encoded image per record, decoded into a ``(H, W, C)`` uint8 array.

    Parameters
    ----------
    size
        ``(height, width)``: resize every image (or its crop window) to it and return one
        ``(n, height, width, C)`` array; the aspect ratio is not kept. ``None`` (the default) keeps each
        image's own size and returns a list of ``n`` arrays.
    color_space
        ``"RGB"`` (default), ``"BGR"`` (channels reversed) or ``"GRAY"`` (one channel, ``C == 1``).
    formats
        The image formats accepted, as Pillow names them (e.g. ``("JPEG", "PNG")``); ``None`` accepts
        every format Pillow opens. Bytes of another format raise :class:`~recordkit.errors.DecodeError`.
    crop
        ``None`` (default): the whole image. ``"random"``: torchvision's ``RandomResizedCrop`` window
        (``scale``, ``ratio``), for training. ``"center"``: the window that a resize of the short side to
        ``max(size) / crop_fraction`` and a centre crop of ``size`` keep (torchvision's ``Resize(256)``,
        ``CenterCrop(224)``), for evaluation. Both need ``size``; the window is cut before the resize.
    scale, ratio
        For ``crop="random"``: the range of the window's area as a fraction of the image's, and of its
        aspect ratio (width / height), as torchvision's ``RandomResizedCrop`` takes them.
    crop_fraction
        For ``crop="center"``: ``size`` over the resized short side (0.875: 224 of 256).
    flip
        Flip each image left to right with probability 1/2 (torchvision's ``RandomHorizontalFlip``).
    antialias
        ``True`` (default): Pillow's bilinear filter, which widens when it shrinks, as
        ``tf.image.resize(antialias=True)``. ``False``: OpenCV's ``INTER_LINEAR``, four pixels per output
        pixel, as ``tf.image.resize``'s default (faster; aliases when it shrinks; needs ``opencv``).
    dct_scaling
        Decode a JPEG at 1/2, 1/4 or 1/8 of its size when its crop window still covers ``size`` at that
        scale (libjpeg-turbo's DCT scaling, as FFCV does): much less work for large images.
    layout
        ``"HWC"`` (default) or ``"CHW"``: ``(n, C, height, width)``, a view of the same memory with no copy
        (torch's ``channels_last`` memory format).

    Notes
    -----
    Random crops and flips are drawn per record from the seed that a
    :class:`~recordkit.data.Dataset` pipeline sets (its seed and epoch) and the record's bytes, so a
    resumed pipeline crops as the uninterrupted one did; outside a pipeline, from fresh entropy (see
    :func:`~recordkit.support.seeding.seeded`).

    Each record must hold exactly one bytes value; a missing feature or another number of values raises
    :class:`~recordkit.errors.DecodeError`, as do bytes that are not an image, a truncated image and an
    image of more pixels than ``PIL.Image.MAX_IMAGE_PIXELS``. See the images page of the documentation
    for how alpha, palettes, 16-bit samples and CMYK are converted.
    """

    size: tuple[int, int] | None = None
    color_space: str = "RGB"
    formats: tuple[str, ...] | None = None
    crop: str | None = None
    scale: tuple[float, float] = (0.08, 1.0)
    ratio: tuple[float, float] = (3 / 4, 4 / 3)
    crop_fraction: float = 0.875
    flip: bool = False
    antialias: bool = True
    dct_scaling: bool = True
    layout: str = "HWC"

    def __init__(
        self,
        size: Sequence[int] | None = None,
        color_space: str = "RGB",
        *,
        formats: Sequence[str] | None = None,
        crop: str | None = None,
        scale: Sequence[float] = (0.08, 1.0),
        ratio: Sequence[float] = (3 / 4, 4 / 3),
        crop_fraction: float = 0.875,
        flip: bool = False,
        antialias: bool = True,
        dct_scaling: bool = True,
        layout: str = "HWC",
    ) -> None:
        setattr_ = functools.partial(object.__setattr__, self)
        setattr_("size", None if size is None else _check_size(size))
        if color_space not in COLOR_SPACES:
            raise ValueError(f"color_space must be one of {COLOR_SPACES}, not {color_space!r}")
        setattr_("color_space", color_space)
        if formats is not None:
            if isinstance(formats, str) or not all(isinstance(f, str) for f in formats):
                raise TypeError(
                    "formats is a sequence of Pillow format names, e.g. ('JPEG', 'PNG')"
                )
            formats = tuple(f.upper() for f in formats)
        setattr_("formats", formats)
        if crop not in CROPS:
            raise ValueError(f"crop must be one of {CROPS}, not {crop!r}")
        if crop is not None and size is None:
            raise ValueError(f"crop={crop!r} needs a size to resize the window to")
        setattr_("crop", crop)
        area, ratios = check_crop_ranges(10, scale, ratio, ("scale", "ratio"))
        setattr_("scale", area)
        setattr_("ratio", ratios)
        if not 0.0 < float(crop_fraction) <= 1.0:
            raise ValueError(f"crop_fraction must be in (0, 1], not {crop_fraction!r}")
        setattr_("crop_fraction", float(crop_fraction))
        for name, value in (("flip", flip), ("antialias", antialias), ("dct_scaling", dct_scaling)):
            if not isinstance(value, bool):
                raise TypeError(f"{name} must be True or False, not {value!r}")
            setattr_(name, value)
        if layout not in LAYOUTS:
            raise ValueError(f"layout must be one of {LAYOUTS}, not {layout!r}")
        setattr_("layout", layout)

    @property
    def channels(self) -> int:
        """The number of channels of the decoded images: 1 for ``"GRAY"``, else 3."""
        return 1 if self.color_space == "GRAY" else 3

    @property
    def random(self) -> bool:
        """Whether decoding draws random numbers (a random crop or a flip)."""
        return self.crop == "random" or self.flip


def _check_size(size: Any) -> tuple[int, int]:
    if isinstance(size, (int, np.integer)):  # torchvision's RandomResizedCrop(224) means a square
        raise TypeError(f"size is (height, width), e.g. ({size}, {size}), not {size!r}")
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
        window it returns (see :func:`random_crop_window`). It replaces ``spec.crop``, and is called in
        record order.
    rows
        The record index of each value, for error messages (``range(len(values))`` by default).

    Returns
    -------
    numpy.ndarray or list of numpy.ndarray
        ``(n, height, width, C)`` uint8 when ``spec.size`` is set, else ``n`` arrays ``(H_i, W_i, C)``;
        ``(n, C, height, width)`` views (``(C, H_i, W_i)`` each) for ``layout="CHW"``.

    Raises
    ------
    DecodeError
        An image could not be decoded; ``.index`` is its record, ``.feature`` is ``feature``. With
        several bad images, the first in record order.
    """
    with needs("decoding images (recordkit.Image)", "Pillow", "image", "Pillow"):
        from PIL import Image as PILImageModule  # the optional dependency, loaded on first use
    if not spec.antialias:
        _opencv()  # fail at once, not in a thread, when OpenCV is missing
    count = len(values)
    stacked = None
    if spec.size is not None:
        stacked = np.empty((count, *spec.size, spec.channels), np.uint8)
    seed = current_seed()
    fresh = np.random.default_rng() if spec.random and seed is None else None

    def one(i: int) -> np.ndarray[Any, Any]:
        data = values[i]
        slot = None if stacked is None else stacked[i]
        rng = record_rng(data, seed, fresh) if spec.random else None
        cropper = _once(crop or _cropper(spec, rng))
        try:
            # simplejpeg where it applies (straight into slot when it can), else Pillow
            decoded = _decode_jpeg_fast(PILImageModule, data, spec, cropper, slot)
            if decoded is None:
                decoded = _decode_pillow(PILImageModule, data, spec, cropper)
            pixels = _resize(PILImageModule, *decoded, spec)
        except _BadImage as exc:
            index = i if rows is None else int(rows[i])
            raise DecodeError(
                f"record {index}: feature {feature!r}: {exc}", index=index, feature=feature
            ) from exc.__cause__
        if spec.flip and rng is not None and rng.random() < 0.5:
            pixels = pixels[:, ::-1]
        if slot is None:
            return np.require(pixels, requirements=["C", "W"])  # copies views only
        if pixels is not slot:
            slot[...] = pixels  # numpy copies first where the two overlap (a flip in place)
        return slot

    # A crop callable of the caller's draws in record order from its own generator: no threads then.
    threads = 1 if crop is not None else _threads(count)
    if threads > 1:
        images = list(_pool(threads).map(one, range(count)))
    else:
        images = [one(i) for i in range(count)]
    if stacked is not None:
        return stacked.transpose(0, 3, 1, 2) if spec.layout == "CHW" else stacked
    if spec.layout == "CHW":
        return [image.transpose(2, 0, 1) for image in images]
    return images


def _threads(count: int) -> int:
    """How many threads decode a batch of ``count`` images."""
    if count < 2:
        return 1
    if THREADS is not None:
        return max(1, int(THREADS))
    if in_worker_process():
        return 1
    return min(
        count,
        len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1,
    )


@functools.lru_cache(maxsize=8)
def _pool(threads: int) -> ThreadPoolExecutor:
    """The process's pool of ``threads`` decoding threads, made on first use and kept."""
    return ThreadPoolExecutor(threads, thread_name_prefix="recordkit-images")


# A forked child has the pool object but none of its threads: it makes its own.
os.register_at_fork(after_in_child=_pool.cache_clear)


def _once(crop: Cropper | None) -> Cropper | None:
    """``crop`` remembering its window, so that a JPEG that simplejpeg gives up on and Pillow decodes
    gets the same window (and draws no more random numbers)."""
    if crop is None:
        return None
    windows: dict[tuple[int, int], CropWindow] = {}

    def once(height: int, width: int) -> CropWindow:
        if (height, width) not in windows:
            windows[height, width] = crop(height, width)
        return windows[height, width]

    return once


def _cropper(spec: Image, rng: np.random.Generator | None) -> Cropper | None:
    """The window rule of ``spec.crop``, drawing from ``rng`` when it is random."""
    size = spec.size
    if spec.crop == "center" and size is not None:
        fraction = spec.crop_fraction
        return lambda height, width: center_crop_window(height, width, size, fraction)
    if spec.crop == "random" and rng is not None:
        scale, ratio = spec.scale, spec.ratio
        return lambda height, width: random_resized_crop_window(
            height, width, rng, scale=scale, ratio=ratio
        )
    return None


def _resize(pil: Any, pixels: np.ndarray[Any, Any], box: Box, spec: Image) -> np.ndarray[Any, Any]:
    """``pixels`` (``(h, w, C)``), or the part ``box`` of them, resized to ``spec.size``; as they are
    without a size, or already at that size.

    Pillow's bilinear filter (antialiased) or OpenCV's ``INTER_LINEAR``; both work channel by channel,
    so BGR resizes as RGB does.
    """
    size = spec.size
    if size is None or (box is None and pixels.shape[:2] == size):
        return pixels
    if spec.antialias:
        mode = "L" if pixels.shape[2] == 1 else "RGB"
        image = pil.fromarray(
            np.ascontiguousarray(pixels[:, :, 0] if mode == "L" else pixels), mode
        )
        resized = np.asarray(image.resize((size[1], size[0]), pil.Resampling.BILINEAR, box=box))
        return resized[:, :, None] if mode == "L" else resized
    cv2 = _opencv()
    if box is not None:  # OpenCV takes no window to a fraction of a pixel: the nearest whole pixels
        left, top, right, bottom = (round(v) for v in box)
        pixels = pixels[top : max(top + 1, bottom), left : max(left + 1, right)]
    source = np.ascontiguousarray(pixels[:, :, 0] if pixels.shape[2] == 1 else pixels)
    out: np.ndarray[Any, Any] = cv2.resize(
        source, (size[1], size[0]), interpolation=cv2.INTER_LINEAR
    )
    return out[:, :, None] if out.ndim == 2 else out


@functools.lru_cache(maxsize=1)
def _opencv() -> Any:
    """OpenCV's module, for ``Image(antialias=False)``: the ``image-fast`` extra."""
    with needs("Image(antialias=False)", "OpenCV", "image-fast", "opencv-python-headless"):
        import cv2
    return cv2


def _scaled_window(
    window: CropWindow | None, full: tuple[int, int], reduced: tuple[int, int]
) -> tuple[CropWindow, Box]:
    """``window`` of the full-size image (all of it when ``None``), in the pixels of the image decoded at
    the ``reduced`` size: the whole pixels that hold it, and where it lies in them to a fraction of a
    pixel (Pillow's ``box``), so that the resize samples the same part of the picture as it would from
    the full-size image."""
    window = window or CropWindow(0, 0, *full, False)
    height, width = reduced
    factor_h, factor_w = height / full[0], width / full[1]
    y0, x0 = window.top * factor_h, window.left * factor_w
    y1 = min(height, (window.top + window.height) * factor_h)
    x1 = min(width, (window.left + window.width) * factor_w)
    top, left = math.floor(y0), math.floor(x0)
    bottom = min(height, max(top + 1, math.ceil(y1)))
    right = min(width, max(left + 1, math.ceil(x1)))
    cut = CropWindow(top, left, bottom - top, right - left, window.fallback)
    return cut, (x0 - left, y0 - top, x1 - left, y1 - top)


def _reduction(window: CropWindow | None, spec: Image, height: int, width: int) -> tuple[int, int]:
    """The smallest ``(height, width)`` a JPEG may be decoded at so that ``window`` (the whole image when
    ``None``) still covers ``spec.size``: ``(0, 0)`` when no reduction applies."""
    if not spec.dct_scaling or spec.size is None:
        return 0, 0
    window = window or CropWindow(0, 0, height, width, False)
    # Powers of two only: libjpeg-turbo's other scales (3/8, 5/8, ...) lose much more detail.
    for reduction in (8, 4, 2):
        if window.height >= spec.size[0] * reduction and window.width >= spec.size[1] * reduction:
            return math.ceil(height / reduction), math.ceil(width / reduction)
    return 0, 0


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
) -> tuple[np.ndarray[Any, Any], Box] | None:
    """An RGB or BGR YCbCr or gray JPEG decoded by simplejpeg (and its crop window's part of a pixel:
    see :func:`_scaled_window`), or ``None`` where simplejpeg does not apply.

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
    window = None if crop is None else crop(height, width)
    direct = slot is not None and window is None and slot.shape[:2] == (height, width)
    min_height, min_width = _reduction(window, spec, height, width)
    try:
        pixels: np.ndarray[Any, Any] = simplejpeg.decode_jpeg(
            data,
            colorspace=spec.color_space,
            buffer=slot if direct else None,
            min_height=min_height,
            min_width=min_width,
        )
    except ValueError:  # strict mode refuses damaged data that Pillow may still decode
        return None
    if direct:
        assert slot is not None
        return slot, None
    box: Box = None
    if pixels.shape[:2] != (height, width):  # decoded at a reduced scale
        window, box = _scaled_window(window, (height, width), pixels.shape[:2])
    if window is not None:
        pixels = pixels[
            window.top : window.top + window.height, window.left : window.left + window.width
        ]
    return pixels, box


def _decode_pillow(
    pil: Any, data: bytes, spec: Image, crop: Cropper | None
) -> tuple[np.ndarray[Any, Any], Box]:
    """One image decoded, cropped and converted by Pillow (a JPEG at a reduced DCT scale where the
    window allows), and its crop window's part of a pixel (see :func:`_scaled_window`)."""
    window: CropWindow | None = None
    box: Box = None

    def prepare(image: PILImage) -> None:
        nonlocal window, box
        height, width = image.height, image.width
        window = None if crop is None else crop(height, width)
        min_height, min_width = _reduction(window, spec, height, width)
        if image.format == "JPEG" and min_height:
            image.draft(None, (min_width, min_height))
            if image.size != (width, height):
                window, box = _scaled_window(window, (height, width), (image.height, image.width))

    image = _open(pil, data, spec.formats, prepare)
    if window is not None:
        image = image.crop(
            (window.left, window.top, window.left + window.width, window.top + window.height)
        )
    image = _convert(pil, image, "L" if spec.color_space == "GRAY" else "RGB")
    pixels = np.asarray(image)  # a read-only view of Pillow's bytes
    if spec.color_space == "GRAY":
        pixels = pixels[:, :, None]
    elif spec.color_space == "BGR":
        pixels = pixels[:, :, ::-1]
    return pixels, box


def _open(
    pil: Any,
    data: bytes,
    formats: tuple[str, ...] | None,
    prepare: Callable[[PILImage], None] | None = None,
) -> PILImage:
    """Open and fully decode ``data`` (only its first frame), refusing decompression bombs.

    ``prepare`` is called with the opened image before it is decoded (to set Pillow's ``draft``).
    """
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
    if prepare is not None:
        prepare(image)
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
