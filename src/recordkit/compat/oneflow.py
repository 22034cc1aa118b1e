"""OneFlow's OFRecord reader and decoders, by name and semantics, without OneFlow and without its memory bugs.

:class:`OFRecordReader` takes the parameters of ``flow.nn.OFRecordReader`` and ends its epochs.

:func:`raw_decoder` is ``flow.nn.OFRecordRawDecoder`` (the ``ofrecord_raw_decoder`` kernel) and
:func:`bytes_decoder` is ``flow.nn.OFRecordBytesDecoder``, :func:`ofrecord_image_decoder` and
:func:`ofrecord_image_decoder_random_crop` are ``flow.nn.OFRecordImageDecoder`` and
``flow.nn.OFRecordImageDecoderRandomCrop``, each applied to a batch of serialized ``oneflow.OFRecord``
payloads (e.g. what ``recordkit.open(path, format="ofrecord")`` yields).

Where OneFlow's kernel writes past the slot of a sample or leaves memory uninitialised, recordkit raises a
:class:`~recordkit.errors.DecodeError` or fills with zeros instead; where OneFlow aborts the process
(``CHECK`` failures: a missing feature, a wrong number of values), recordkit raises ``DecodeError``.

Examples
--------
>>> import numpy as np
>>> from recordkit._proto.oneflow import record_pb2
>>> rec = record_pb2.OFRecord()
>>> rec.feature["ids"].int32_list.value.extend([5, 6, 7])
>>> raw_decoder([rec.SerializeToString()], "ids", (4,), np.int64, truncate=True)
array([[5, 6, 7, 0]])
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import numpy as np

from recordkit.compat._oneflow_reader import OFRecordReader, part_files
from recordkit.decode import columns
from recordkit.decode.image_windows import CropWindow, check_crop_ranges, random_crop_window
from recordkit.decode.images import Image, decode_images
from recordkit.decode.specs import ColumnReader, as_shape, as_value_type, pad_rows
from recordkit.errors import DecodeError

__all__ = [
    "OFRecordReader",
    "bytes_decoder",
    "ofrecord_image_decoder",
    "ofrecord_image_decoder_random_crop",
    "part_files",
    "raw_decoder",
]


def _column(records: Iterable[Any], name: str) -> columns.Column:
    """The feature ``name`` over the batch; a record without it is an error, as in OneFlow."""
    batch = columns.as_records(records)
    column = columns.collect(batch, [name], ofrecord=True)[name]
    missing = column.kinds == 0
    if missing.any():
        i = int(np.argmax(missing))
        raise DecodeError(
            f"record {i}: feature {name!r} not found (or has no list set)", index=i, feature=name
        )
    return column


def raw_decoder(
    records: Iterable[Any],
    name: str,
    shape: Any,
    dtype: Any,
    *,
    dim1_varying_length: bool = False,
    truncate: bool = False,
) -> np.ndarray[Any, Any]:
    """Decode one feature of every record into a ``(batch, *shape)`` array, as ``OFRecordRawDecoder``.

    Parameters
    ----------
    records
        Serialized ``oneflow.OFRecord`` payloads.
    name
        The feature to decode (OneFlow's ``blob_name``).
    shape
        The shape of one sample; each record supplies ``prod(shape)`` values.
    dtype
        The output dtype: ``np.float32``, ``np.float64``, ``np.int32``, ``np.int64``, ``np.int8`` or
        ``np.uint8``. Values of any numeric list kind are cast to it as C++ ``static_cast`` does (a float
        outside the range of an integer dtype gives an unspecified value, in OneFlow as here).
    dim1_varying_length
        Accept records with fewer than ``prod(shape)`` values, zero-filling the rest of their sample. A
        record with *more* values raises :class:`~recordkit.errors.DecodeError`: OneFlow copies all of
        them, writing past the sample into the next one (and past the end of the batch for the last).
    truncate
        Copy the first ``prod(shape)`` values of each record and zero-fill the rest of its sample.

    Returns
    -------
    numpy.ndarray
        ``(len(records), *shape)`` of ``dtype``.

    Raises
    ------
    DecodeError
        A record lacks the feature, holds a bytes list with other than one value, or (without
        ``truncate`` or ``dim1_varying_length``) holds other than ``prod(shape)`` values.

    Notes
    -----
    A feature stored as a ``bytes_list`` must hold exactly one value, whose bytes are read as *signed*
    8-bit numbers and cast to ``dtype`` (so byte 0xFF is -1.0 as float, 255 as uint8), as OneFlow does.
    Like OneFlow, the byte count is not checked against ``shape``: extra bytes are ignored; where OneFlow
    leaves the rest of a short sample uninitialised, recordkit writes zeros.
    """
    value_type = as_value_type(dtype)
    if isinstance(value_type, str):
        raise TypeError("raw_decoder decodes numbers; use bytes_decoder for bytes")
    dims = as_shape(shape)
    size = math.prod(dims)
    column = _column(records, name)
    reader = ColumnReader(ofrecord=True)
    _, counts, flat = reader.flat(name, column, value_type)
    from_bytes = column.kinds == 1
    if not truncate:
        too_many = (counts > size) & ~from_bytes
        too_few = (counts < size) & ~from_bytes & (not dim1_varying_length)
        wrong = too_many | too_few
        if wrong.any():
            i = int(np.argmax(wrong))
            raise reader.error(
                name,
                i,
                f"expected {size} values (shape {dims}), found {int(counts[i])}"
                + ("" if dim1_varying_length else "; pass truncate=True to cut or zero-fill"),
            )
    kept = np.minimum(counts, size)
    if (kept != counts).any():
        starts = np.cumsum(counts) - counts
        row_of = np.repeat(np.arange(len(counts)), counts)
        flat = flat[np.arange(len(flat)) - starts[row_of] < size]
    return pad_rows(flat, kept, size, 0).reshape((len(counts), *dims))


def bytes_decoder(records: Iterable[Any], name: str) -> list[bytes]:
    """Return the single bytes value of feature ``name`` of every record, as ``OFRecordBytesDecoder``.

    Raises
    ------
    DecodeError
        A record lacks the feature, or it is not a ``bytes_list`` with exactly one value (OneFlow aborts
        on both).
    """
    column = _column(records, name)
    reader = ColumnReader(ofrecord=True)
    _, counts, flat = reader.flat(name, column, "bytes")
    wrong = counts != 1
    if wrong.any():
        i = int(np.argmax(wrong))
        raise reader.error(name, i, f"expected exactly 1 bytes value, found {int(counts[i])}")
    values: list[bytes] = flat.tolist()
    return values


def ofrecord_image_decoder(
    records: Iterable[Any], blob_name: str, color_space: str = "BGR"
) -> list[np.ndarray[Any, Any]]:
    """Decode the encoded image of feature ``blob_name`` of every record, as ``OFRecordImageDecoder``.

    Parameters
    ----------
    records
        Serialized ``oneflow.OFRecord`` payloads.
    blob_name
        The feature holding one encoded image (JPEG, PNG, or another format Pillow opens) per record.
    color_space
        ``"BGR"`` (OneFlow's default), ``"RGB"`` or ``"GRAY"``.

    Returns
    -------
    list of numpy.ndarray
        One ``(H, W, 3)`` uint8 array per record (``(H, W, 1)`` for ``"GRAY"``), each of its image's own
        size: OneFlow's output is a TensorBuffer of such images.

    Raises
    ------
    DecodeError
        A record lacks the feature, it is not one bytes value, or the bytes are not a decodable image
        (where OneFlow aborts the process); ``.index`` is the record.
    """
    return _decode(records, blob_name, color_space, None)


def ofrecord_image_decoder_random_crop(
    records: Iterable[Any],
    blob_name: str,
    color_space: str = "BGR",
    num_attempts: int = 10,
    seed: int | np.random.Generator | None = None,
    random_area: Sequence[float] = (0.08, 1.0),
    random_aspect_ratio: Sequence[float] = (0.75, 1.333333),
) -> list[np.ndarray[Any, Any]]:
    """Decode a random crop of every record's image, as ``OFRecordImageDecoderRandomCrop``.

    The crop window follows OneFlow's Inception-style rule (see
    :func:`~recordkit.decode.images.random_crop_window`): a random area fraction in ``random_area`` and
    aspect ratio (width / height) in ``random_aspect_ratio``, at most ``num_attempts`` tries, then a
    fallback window. The crop is not resized.

    Parameters
    ----------
    records, blob_name, color_space
        As :func:`ofrecord_image_decoder`.
    num_attempts
        Windows drawn before the fallback, at least 1.
    seed
        An int for a reproducible batch (the same records and seed give the same crops), a
        ``numpy.random.Generator`` to draw from (successive batches then get fresh crops), or ``None``
        for fresh entropy. OneFlow calls it ``random_seed``; its random stream differs from numpy's, so
        a seed does not give OneFlow's windows.
    random_area
        ``(min, max)`` fraction of the image's area, ``0 <= min <= max <= 1``.
    random_aspect_ratio
        ``(min, max)`` width / height of the window, ``0 < min <= max``.

    Returns
    -------
    list of numpy.ndarray
        One ``(h, w, C)`` uint8 crop per record, in record order.

    Raises
    ------
    DecodeError
        As :func:`ofrecord_image_decoder`.
    """
    area, ratio = check_crop_ranges(num_attempts, random_area, random_aspect_ratio)
    rng = seed if isinstance(seed, np.random.Generator) else np.random.default_rng(seed)

    def crop(height: int, width: int) -> CropWindow:
        return random_crop_window(
            height,
            width,
            rng,
            num_attempts=num_attempts,
            random_area=area,
            random_aspect_ratio=ratio,
        )

    return _decode(records, blob_name, color_space, crop)


def _decode(
    records: Iterable[Any],
    name: str,
    color_space: str,
    crop: Callable[[int, int], CropWindow] | None,
) -> list[np.ndarray[Any, Any]]:
    spec = Image(color_space=color_space)
    images = decode_images(bytes_decoder(records, name), spec, name, crop=crop)
    assert isinstance(images, list)  # a spec without a size gives one array per record
    return images
