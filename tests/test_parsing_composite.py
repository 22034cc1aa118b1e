"""Sparse and Partitioned specs without TensorFlow: arguments, result types, errors (the comparisons with
TensorFlow are in test_interop_tf_composite.py)."""

from __future__ import annotations

import numpy as np
import pytest

import recordkit as rk
from recordkit.decode.partitions import (
    Partitioned,
    RowLengths,
    RowSplits,
    UniformRowLength,
    ValueRowIds,
)
from recordkit.decode.sparse import Sparse, SparseArray


def test_spec_arguments_are_checked():
    with pytest.raises(ValueError, match="at least 1"):
        UniformRowLength(0)
    with pytest.raises(TypeError, match="is an int"):
        UniformRowLength(2.0)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="feature name"):
        RowSplits(3)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="partitions are"):
        Partitioned(np.int64, ["splits"])  # type: ignore[list-item]
    with pytest.raises(TypeError, match="row_splits_dtype"):
        Partitioned(np.int64, row_splits_dtype=np.int16)
    with pytest.raises(ValueError, match="2 dimensions for 1 index features"):
        Sparse("idx", "val", np.float32, [3, 4])
    with pytest.raises(TypeError, match="index_key"):
        Sparse([], "val", np.float32, [])
    assert Partitioned.RowSplits is RowSplits
    spec = Partitioned(np.int64, [UniformRowLength(2), RowLengths("l"), RowSplits("s")])
    assert spec.keys("rt") == ["rt", "l", "s"]
    assert Sparse(["a", "b"], "v", bytes, (2, 3)).keys("sp") == ["v", "a", "b"]


def test_a_feature_read_by_several_specs_is_read_once_for_each():
    record = rk.encode_example({"v": [1, 2, 3, 4], "ids": [0, 0, 1, 1], "i": [3, 2, 1, 0]})
    batch = rk.parse_examples(
        [record, record],
        {
            "v": rk.VarLen(np.int64),
            "by_id": Partitioned(np.int64, [ValueRowIds("ids")], value_key="v"),
            "pairs": Partitioned(np.int64, [UniformRowLength(2)], value_key="v"),
            "sp": Sparse("i", "v", np.int64, 4),
        },
    )
    assert batch["v"].to_list() == [[1, 2, 3, 4]] * 2
    assert batch["by_id"].to_list() == [[[1, 2], [3, 4]]] * 2
    assert batch["pairs"].to_dense().shape == (2, 2, 2)
    assert batch["pairs"].to_dense().tolist() == [[[1, 2], [3, 4]]] * 2
    assert batch["sp"].to_dense().tolist() == [[4, 3, 2, 1]] * 2
    one = rk.parse_example(record, {"sp": Sparse("i", "v", np.int64, 4)})["sp"]
    assert isinstance(one, SparseArray)
    assert one.shape == (4,)
    assert one.indices.tolist() == [[0], [1], [2], [3]]


def test_uniform_rows_pad_to_dense_with_their_fixed_dimension():
    records = [rk.encode_example({"v": [1.0, 2.0, 3.0, 4.0]}), rk.encode_example({"v": [5.0, 6.0]})]
    ragged = rk.parse_examples(records, {"v": Partitioned(np.float32, [UniformRowLength(2)])})["v"]
    assert ragged.to_dense().tolist() == [[[1, 2], [3, 4]], [[5, 6], [0, 0]]]


def test_partition_errors_name_the_record_and_the_time_step():
    good = rk.encode_sequence_example(feature_lists={"v": [[1, 2]], "s": [[0, 2]]})
    bad = rk.encode_sequence_example(feature_lists={"v": [[1, 2], [3]], "s": [[0, 2], [0, 2]]})
    spec = {"rt": Partitioned(np.int64, [RowSplits("s")], value_key="v")}
    with pytest.raises(rk.DecodeError, match="record 1: feature 'rt': time step 1: the row splits"):
        rk.parse_sequence_examples([good, bad], sequence_features=spec)
    wrong_kind = rk.encode_example({"v": [1], "s": [0.0, 1.0]})
    with pytest.raises(rk.DecodeError, match="record 0: feature 's': data type") as info:
        rk.parse_examples([wrong_kind], spec)
    assert info.value.feature == "s"


def test_sparse_is_refused_where_tensorflow_refuses_it():
    records = [rk.encode_example({"v": [1.0], "i": [0]})]
    with pytest.raises(TypeError, match="context_features"):
        rk.parse_sequence_examples(records, {"sp": Sparse("i", "v", np.float32, 1)})  # type: ignore[dict-item]
    pytest.importorskip("pyarrow")
    with pytest.raises(TypeError, match="numpy only"):
        rk.parse_examples(records, {"sp": Sparse("i", "v", np.float32, 1)}, to="arrow")
    batch = rk.parse_examples(records, {"sp": Sparse("i", "v", np.float32, 1)})
    with pytest.raises(TypeError, match="no sparse column"):
        rk.to_arrow(batch)


def test_row_ids_asking_for_too_many_rows_raise_instead_of_allocating():
    small = rk.encode_example({"v": [1], "ids": [0]})
    huge = rk.encode_example({"v": [1, 2], "ids": [0, 10**12]})
    spec = {"rt": Partitioned(np.int64, [ValueRowIds("ids")], value_key="v")}
    with pytest.raises(
        rk.DecodeError, match=r"record 1: feature 'rt': the row ids in 'ids' ask for over"
    ):
        rk.parse_examples([small, huge], spec)
