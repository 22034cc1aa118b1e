"""Checksums used by the record formats.

TFRecord protects every length and payload with a *masked* CRC32C (Castagnoli); FFRecord uses the ordinary
zlib CRC-32. This module picks the fastest implementation of each that is installed. For CRC32C:

* ``google-crc32c`` when it is installed with its C extension (``pip install recordkit[fast]``), 10-50x faster;
* otherwise ``crcmod`` (a required dependency), with its C extension if it was compiled;
* ``crcmod`` in pure Python is correct but very slow (a few MB/s): recordkit then emits one
  :class:`~recordkit.errors.SlowCRCWarning` the first time a TFRecord file is read or written.

For the CRC-32 of FFRecord: ``isal`` (Intel ISA-L, also in ``recordkit[fast]``) when installed, several times
faster than the standard library's ``zlib.crc32``, which is used otherwise.

Attributes
----------
CRC32C_BACKEND
    The name of the implementation in use: ``"google-crc32c"``, ``"crcmod-c"`` or ``"crcmod-python"``.
CRC32_BACKEND
    The CRC-32 implementation in use: ``"isal"`` or ``"zlib"``.

Examples
--------
>>> hex(crc32c(b"123456789"))
'0xe3069283'
>>> hex(masked_crc32c(b""))
'0xa282ead8'
"""

from __future__ import annotations

import array
import warnings
import zlib
from collections.abc import Callable, Sequence
from typing import Any

from recordkit.errors import SlowCRCWarning
from recordkit.support.extras import install_hint

__all__ = [
    "CRC32C_BACKEND",
    "CRC32_BACKEND",
    "crc32",
    "crc32_backends",
    "crc32c",
    "crc32c_backends",
    "crc32c_extend",
    "crc32c_extend_backends",
    "crc32c_for_views",
    "first_masked_mismatch",
    "mask",
    "masked_crc32c",
    "unmask",
    "warn_if_slow",
]

MASK_DELTA = 0xA282EAD8
"""The constant TensorFlow adds when masking a CRC (``kMaskDelta`` in TF's ``crc32c.h``)."""


def crc32_backends() -> dict[str, Callable[..., int]]:
    """Return every usable CRC-32 implementation by backend name.

    Returns
    -------
    dict
        ``{"zlib": zlib.crc32}`` always, plus ``"isal"`` when ``isal`` is installed. Each function has
        ``zlib.crc32``'s signature: ``crc32(data, value=0)``.
    """
    backends: dict[str, Callable[..., int]] = {"zlib": zlib.crc32}
    try:
        from isal import isal_zlib
    except ImportError:
        return backends
    backends["isal"] = isal_zlib.crc32
    return backends


# The CRC-32 used by FFRecord: the same values as ``zlib.crc32(data, value=0)``, from the fastest backend.
CRC32_BACKEND, crc32 = next(reversed(crc32_backends().items()))


def _crcmod_function() -> tuple[Callable[[bytes], int], bool]:
    """Return crcmod's CRC32C function and whether it runs on crcmod's C extension."""
    import crcmod.predefined

    function: Callable[[bytes], int] = crcmod.predefined.mkPredefinedCrcFun("crc-32c")
    try:
        import crcmod._crcfunext
    except ImportError:
        return function, False
    return function, True


def _google_function() -> Callable[[bytes], int] | None:
    """Return google-crc32c's C function, or ``None`` if it is absent or only its pure-Python fallback."""
    try:
        import google_crc32c
    except ImportError:
        return None
    if getattr(google_crc32c, "implementation", None) != "c":
        return None
    function: Callable[[bytes], int] = google_crc32c.value
    return function


def crc32c_backends() -> dict[str, Callable[[bytes], int]]:
    """Return every usable CRC32C implementation by backend name.

    Returns
    -------
    dict
        ``{"crcmod": ...}`` always, plus ``"google-crc32c"`` when its C extension is installed. Each
        function maps ``bytes`` to the unmasked CRC32C as an ``int``.
    """
    backends = {"crcmod": _crcmod_function()[0]}
    google = _google_function()
    if google is not None:
        backends["google-crc32c"] = google
    return backends


def _select() -> tuple[str, Callable[[bytes], int]]:
    google = _google_function()
    if google is not None:
        return "google-crc32c", google
    function, compiled = _crcmod_function()
    return ("crcmod-c" if compiled else "crcmod-python"), function


CRC32C_BACKEND, crc32c = _select()


def crc32c_extend_backends() -> dict[str, Callable[[int, bytes], int]]:
    """Return the incremental form of every usable CRC32C implementation, by backend name.

    Returns
    -------
    dict
        The keys of :func:`crc32c_backends`. Each function maps ``(crc, data)`` to the CRC32C of the
        bytes checksummed so far followed by ``data``, where ``crc`` is the CRC32C of those first bytes.
    """
    function = _crcmod_function()[0]
    backends: dict[str, Callable[[int, bytes], int]] = {
        "crcmod": lambda crc, data: function(data, crc)  # type: ignore[call-arg]
    }
    if _google_function() is not None:
        import google_crc32c

        backends["google-crc32c"] = google_crc32c.extend
    return backends


crc32c_extend = crc32c_extend_backends()[
    "google-crc32c" if CRC32C_BACKEND == "google-crc32c" else "crcmod"
]
"""``crc32c_extend(crc, data)``: the CRC32C of ``first + data`` given ``crc == crc32c(first)``.

The same backend as :func:`crc32c`; it lets a long payload be checked in bounded pieces:
``crc32c_extend(crc32c(b"1234"), b"56789") == crc32c(b"123456789")``.
"""


def crc32c_for_views() -> Callable[[Any], int]:
    """Return a CRC32C function that also takes ``memoryview`` slices of a memory map.

    google-crc32c accepts ``bytes`` and numpy arrays but refuses ``memoryview`` objects, so its function
    is given a numpy view of the same memory (no copy; numpy is imported here). crcmod takes any buffer.
    """
    if CRC32C_BACKEND != "google-crc32c":
        return crc32c
    import numpy as np

    value, frombuffer, uint8 = crc32c, np.frombuffer, np.uint8
    return lambda data: value(frombuffer(data, uint8))  # type: ignore[arg-type]


_warned = False


def warn_if_slow() -> None:
    """Emit one :class:`~recordkit.errors.SlowCRCWarning` per process if CRC32C runs in pure Python."""
    global _warned
    if _warned or CRC32C_BACKEND != "crcmod-python":
        return
    _warned = True
    warnings.warn(
        "CRC32C is computed in pure Python (crcmod without its C extension), so TFRecord files will be "
        f"read and written slowly. Install the fast backend with `{install_hint('fast')}` (google-crc32c), "
        "or install a C compiler and reinstall crcmod (`pip install --force-reinstall --no-binary crcmod "
        "crcmod`).",
        SlowCRCWarning,
        stacklevel=3,
    )


def mask(crc: int) -> int:
    """Mask a CRC32C the way TFRecord stores it: rotate right by 15 bits and add ``0xA282EAD8``."""
    return (((crc >> 15) | (crc << 17)) + MASK_DELTA) & 0xFFFFFFFF


def unmask(masked: int) -> int:
    """Invert :func:`mask`."""
    rotated = (masked - MASK_DELTA) & 0xFFFFFFFF
    return ((rotated >> 17) | (rotated << 15)) & 0xFFFFFFFF


# Below this many CRCs a Python loop is faster than building two numpy arrays.
_VECTOR_MIN = 16


def _u32_array(values: Sequence[int]) -> array.array[int]:
    # numpy converts an array.array without a copy, and a list of ints several times slower than
    # array.array does.
    return values if isinstance(values, array.array) else array.array("I", values)


def first_masked_mismatch(crcs: Sequence[int], stored: Sequence[int]) -> int | None:
    """Return the first position ``i`` where ``mask(crcs[i]) != stored[i]``, or ``None`` when all match.

    Masking one CRC in Python takes five operations on an integer wider than 30 bits, each allocating: for
    a 1 KiB record that costs about as much as computing the CRC. numpy masks a batch at once.
    ``array.array("I")`` arguments are the fastest (numpy reads them without a copy).
    """
    if len(crcs) < _VECTOR_MIN:
        for position, (crc, want) in enumerate(zip(crcs, stored, strict=True)):
            if mask(crc) != want:
                return position
        return None
    import numpy as np

    values = np.frombuffer(_u32_array(crcs), dtype=np.uint32)
    masked = ((values >> np.uint32(15)) | (values << np.uint32(17))) + np.uint32(MASK_DELTA)
    wrong = masked != np.frombuffer(_u32_array(stored), dtype=np.uint32)
    if not wrong.any():
        return None
    return int(wrong.argmax())


def masked_crc32c(data: bytes) -> int:
    """Return the masked CRC32C of ``data``, as stored in TFRecord frames."""
    return mask(crc32c(data))
