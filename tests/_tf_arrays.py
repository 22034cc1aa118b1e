"""Comparing recordkit's arrays with TensorFlow's, for the tests that run both parsers."""

from __future__ import annotations

from typing import Any

import numpy as np


def assert_same(ours: Any, theirs: Any) -> None:
    """A numpy array equal to a TensorFlow tensor (or array): same dtype, shape and values; float32
    compared bit for bit."""
    expected = theirs.numpy() if hasattr(theirs, "numpy") else np.asarray(theirs)
    assert isinstance(ours, np.ndarray), type(ours)
    assert ours.shape == expected.shape
    assert ours.dtype == expected.dtype
    if ours.dtype == np.float32:
        assert np.array_equal(ours.view(np.uint32), expected.view(np.uint32))
    else:
        assert ours.tolist() == expected.tolist()
