"""``TensorProto`` messages to numpy arrays, as ``tensorboard.util.tensor_util.make_ndarray`` converts them."""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

from recordkit.errors import DecodeError

__all__ = ["to_array"]

# DataType -> (numpy dtype, the repeated field holding the values when tensor_content is empty)
_TYPES: dict[int, tuple[str, str]] = {
    1: ("<f4", "float_val"),
    2: ("<f8", "double_val"),
    3: ("<i4", "int_val"),
    4: ("u1", "int_val"),
    5: ("<i2", "int_val"),
    6: ("i1", "int_val"),
    7: ("O", "string_val"),
    8: ("<c8", "scomplex_val"),
    9: ("<i8", "int64_val"),
    10: ("?", "bool_val"),
    17: ("<u2", "int_val"),
    18: ("<c16", "dcomplex_val"),
    19: ("<f2", "half_val"),
    22: ("<u4", "uint32_val"),
    23: ("<u8", "uint64_val"),
}


def to_array(tensor: Any) -> npt.NDArray[Any]:
    """Convert a ``TensorProto`` to a numpy array (strings as ``bytes`` in an object array).

    As TensorFlow: the values come from ``tensor_content`` (raw little-endian bytes) when it is set, else
    from the repeated field of the type; fewer values than the shape holds are padded with the last one
    (zeros when there is none).

    Raises
    ------
    DecodeError
        The dtype is one recordkit does not convert (bfloat16, quantized, resource, variant), or the values
        do not fit the shape.
    """
    known = _TYPES.get(tensor.dtype)
    if known is None:
        raise DecodeError(f"tensor of DataType {tensor.dtype} is not supported")
    dtype, field = known
    shape = tuple(int(d.size) for d in tensor.tensor_shape.dim)
    count = int(np.prod(shape, dtype=np.int64))
    if dtype == "O":
        values = np.empty(len(tensor.string_val), object)
        values[:] = list(tensor.string_val)
    elif tensor.tensor_content:
        content = tensor.tensor_content
        if len(content) != count * np.dtype(dtype).itemsize:
            raise DecodeError(f"tensor_content of {len(content)} bytes does not fit shape {shape}")
        return (
            np.frombuffer(content, dtype).astype(np.dtype(dtype).newbyteorder("=")).reshape(shape)
        )
    elif dtype == "<f2":
        values = np.array(tensor.half_val, np.uint16).view("<f2")
    elif dtype in ("<c8", "<c16"):
        parts = np.array(getattr(tensor, field), "<f4" if dtype == "<c8" else "<f8")
        values = parts[0::2] + 1j * parts[1::2]
    else:
        values = np.array(getattr(tensor, field), dtype)
    values = values.astype(np.dtype(dtype).newbyteorder("=") if dtype != "O" else object)
    if values.size == count:
        return values.reshape(shape)
    if values.size > count:
        raise DecodeError(f"{values.size} values do not fit shape {shape}")
    if values.size == 0:
        filled = np.zeros(count, values.dtype)
        if dtype == "O":
            filled[:] = b""
        return filled.reshape(shape)
    return np.pad(values, (0, count - values.size), "edge").reshape(shape)
