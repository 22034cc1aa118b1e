"""Tables to records (encode_examples, encode_ofrecords) and records to Arrow (to="arrow", to_arrow).

The oracles: rk.encode_example / rk.encode_ofrecord of each row (which are checked against protobuf
elsewhere), protobuf's own Example and OFRecord parsers, and the numpy parsers for the Arrow side.
"""

from __future__ import annotations

import datetime
import decimal
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import recordkit as rk
from recordkit._proto.oneflow import record_pb2
from recordkit._proto.tensorflow import example_pb2
from recordkit.decode import tables
from recordkit.decode.messages import (
    Feature,
    bytes_feature,
    double_feature,
    float_feature,
    int32_feature,
    int64_feature,
)

pa = pytest.importorskip("pyarrow")


# -- a row-by-row reference encoder: one rk.encode_example per row, each list typed by its column --------


def _feature(value: Any, kind: Any, ofrecord: bool) -> Feature:
    if pa.types.is_list(kind) or pa.types.is_large_list(kind) or pa.types.is_fixed_size_list(kind):
        kind = kind.value_type
        values = list(value)
    else:
        values = [value]
    if pa.types.is_dictionary(kind):
        kind = kind.value_type
    if pa.types.is_string(kind) or pa.types.is_binary(kind) or pa.types.is_large_string(kind):
        return bytes_feature(values)
    if pa.types.is_fixed_size_binary(kind) or pa.types.is_large_binary(kind):
        return bytes_feature(values)
    if pa.types.is_floating(kind):
        if ofrecord and kind.bit_width == 64:
            return double_feature(np.array(values, np.float64))
        return float_feature(np.array(values, np.float64 if kind.bit_width == 64 else np.float32))
    if ofrecord and kind == pa.int32():
        return int32_feature(np.array(values, np.int64))
    return int64_feature(np.array(values, np.int64))


def row_by_row(table: Any, *, ofrecord: bool = False) -> list[bytes]:
    encode = rk.encode_ofrecord if ofrecord else rk.encode_example
    rows = table.to_pylist()
    kinds = {field.name: field.type for field in table.schema}
    return [
        encode(
            {
                name: _feature(value, kinds[name], ofrecord)
                for name, value in row.items()
                if value is not None
            }
        )
        for row in rows
    ]


def mixed_table() -> Any:
    return pa.table(
        {
            "i64": pa.array([1, -2, 2**62, -(2**63)], pa.int64()),
            "i32": pa.array([7, -7, 2**31 - 1, 0], pa.int32()),
            "u8": pa.array([0, 255, 1, 2], pa.uint8()),
            "u64": pa.array([0, 2**63 - 1, 5, 300], pa.uint64()),
            "flag": pa.array([True, False, None, True]),
            "f32": pa.array([0.5, float("nan"), float("-inf"), -0.0], pa.float32()),
            "f64": pa.array([0.1, 1e300, None, 3.0], pa.float64()),
            "text": pa.array(["cat", "é" * 100, "", None]),
            "blob": pa.array([b"\x00\xff", b"", b"x" * 300, b"y"], pa.binary()),
            "fixed": pa.array([b"ab", b"cd", b"ef", b"gh"], pa.binary(2)),
            "ints": pa.array([[1, 2, 3], [], None, list(range(-70, 70))], pa.list_(pa.int64())),
            "floats": pa.array([[0.25] * 40, [], [1.0], [2.0, 3.0]], pa.large_list(pa.float32())),
            "words": pa.array([["a", "bb"], [], ["c"], [""]], pa.list_(pa.string())),
            "emb": pa.array([[1.0, 2.0]] * 4, pa.list_(pa.float32(), 2)),
            "cat": pa.array(["x", "y", "x", None]).dictionary_encode(),
            "nothing": pa.nulls(4),
        }
    )


def test_each_record_is_byte_for_byte_encode_example_of_its_row() -> None:
    table = mixed_table()
    assert tables.encode_examples(table) == row_by_row(table)


def test_each_record_is_byte_for_byte_encode_ofrecord_of_its_row() -> None:
    table = mixed_table()
    assert tables.encode_ofrecords(table) == row_by_row(table, ofrecord=True)


def test_protobufs_parser_reads_the_values_back() -> None:
    table = mixed_table()
    for row, record in zip(table.to_pylist(), tables.encode_examples(table), strict=True):
        feature = example_pb2.Example.FromString(record).features.feature
        assert set(feature) == {name for name, value in row.items() if value is not None}
        assert list(feature["i64"].int64_list.value) == [row["i64"]]
        assert list(feature["ints"].int64_list.value) == (row["ints"] or [])
        assert feature["blob"].bytes_list.value == [row["blob"]]
        assert list(feature["words"].bytes_list.value) == [w.encode() for w in row["words"]]
        assert list(feature["emb"].float_list.value) == [1.0, 2.0]
        assert feature["u64"].int64_list.value == [row["u64"]]
        if row["text"] is not None:
            assert feature["text"].bytes_list.value == [row["text"].encode()]
        if row["f64"] is not None:  # rounded to float32 (1e300 to infinity), not refused
            with np.errstate(over="ignore"):
                assert feature["f64"].float_list.value == [np.float32(row["f64"])]
        if row["ints"] is not None:  # an empty list keeps its type
            assert feature["ints"].WhichOneof("kind") == "int64_list"
    of = record_pb2.OFRecord.FromString(tables.encode_ofrecords(table)[1]).feature
    assert list(of["f64"].double_list.value) == [1e300]
    assert list(of["i32"].int32_list.value) == [-7]
    assert list(of["u8"].int64_list.value) == [255]


def test_a_null_leaves_the_feature_out_of_that_record() -> None:
    records = tables.encode_examples(pa.table({"a": [1, None], "b": ["x", "y"]}))
    assert rk.decode_example(records[1]) == {"b": [b"y"]}
    assert rk.decode_example(records[0])["a"].tolist() == [1]


def test_pandas_dataframe_nan_is_a_value_and_none_is_missing() -> None:
    pd = pytest.importorskip("pandas")
    frame = pd.DataFrame(
        {
            "x": [1.0, np.nan],
            "n": pd.array([4, None], dtype="Int64"),
            "s": ["a", None],
            "v": [np.array([1, 2]), np.array([], np.int64)],
        },
        index=[10, 20],
    )
    records = tables.encode_examples(frame)
    first, second = (rk.decode_example(r) for r in records)
    assert np.isnan(second["x"][0])
    assert "n" not in second
    assert "s" not in second
    assert second["v"].dtype == np.int64
    assert len(second["v"]) == 0
    assert first["n"].tolist() == [4]
    assert first["v"].tolist() == [1, 2]
    assert "__index_level_0__" not in first


def test_dict_of_numpy_arrays_and_lists() -> None:
    columns = {
        "label": np.array([3, 4], np.int64),
        "image": np.arange(12, dtype=np.float32).reshape(2, 2, 3),
        "name": ["cat", "dog"],
        "raw": np.array([b"a", b"bc"]),
    }
    expected = [
        rk.encode_example(
            {
                "label": columns["label"][i],
                "image": columns["image"][i],
                "name": columns["name"][i],
                "raw": columns["raw"][i],
            }
        )
        for i in range(2)
    ]
    assert tables.encode_examples(columns) == expected
    assert rk.encode_examples({}) == []


def test_record_batches_and_chunked_columns_and_many_chunks(monkeypatch) -> None:
    monkeypatch.setattr(tables, "_CHUNK_ROWS", 3)
    table = pa.concat_tables([mixed_table(), mixed_table().slice(1, 2), mixed_table()])
    assert table.column("text").num_chunks == 3
    assert tables.encode_examples(table) == row_by_row(table)
    batch = table.to_batches()[0]
    assert tables.encode_examples(batch) == row_by_row(pa.Table.from_batches([batch]))


@pytest.mark.parametrize(
    ("column", "says"),
    [
        (pa.array([[[1]], [[2]]], pa.list_(pa.list_(pa.int64()))), "list of lists"),
        (pa.array([{"a": 1}, {"a": 2}]), "own"),
        (pa.array([[("k", 1)], []], pa.map_(pa.string(), pa.int64())), "own"),
        (pa.array([datetime.datetime(2020, 1, 1)] * 2), "dates and times"),
        (pa.array([datetime.date(2020, 1, 1)] * 2), "dates and times"),
        (pa.array([decimal.Decimal("1.5")] * 2), "decimals"),
    ],
)
def test_unrepresentable_columns_raise_type_error_naming_the_column(column, says) -> None:
    table = pa.table({"ok": [1, 2], "bad col": column})
    for encode in (rk.encode_examples, rk.encode_ofrecords):
        with pytest.raises(TypeError, match=f"column 'bad col'.*{says}"):
            encode(table)


def test_mixed_object_columns_and_bad_arguments() -> None:
    with pytest.raises(TypeError, match="column 'm'"):
        rk.encode_examples({"m": [1, "a"]})
    pd = pytest.importorskip("pandas")
    with pytest.raises(TypeError, match="column 'm'"):
        rk.encode_examples(pd.DataFrame({"m": pd.Series([b"x", 2.5], dtype=object)}))
    with pytest.raises(TypeError, match="column names are str"):
        rk.encode_examples(pd.DataFrame({0: [1]}))
    with pytest.raises(TypeError, match="pyarrow Table"):
        rk.encode_examples([{"a": 1}])
    with pytest.raises(ValueError, match="column 'b' has 1 rows"):
        rk.encode_examples({"a": [1, 2], "b": [3]})


def test_values_that_do_not_fit_raise_value_error_naming_column_and_row(monkeypatch) -> None:
    with pytest.raises(ValueError, match=r"column 'u'.*uint64"):
        rk.encode_examples(pa.table({"u": pa.array([1, 2**63], pa.uint64())}))
    table = pa.table({"l": pa.array([[1], None, [2], [3, None]], pa.list_(pa.int64()))})
    with pytest.raises(ValueError, match="column 'l': row 3: a list holds a null"):
        rk.encode_examples(table)
    monkeypatch.setattr(tables, "_CHUNK_ROWS", 2)  # rows counted in the table, not in the chunk
    with pytest.raises(ValueError, match="column 'l': row 3: a list holds a null"):
        rk.encode_examples(table)
    with pytest.raises(ValueError, match="row 1: every value is null"):
        rk.encode_ofrecords(pa.table({"a": [1, None]}))
    # An Example with no features is allowed, as rk.encode_example({}) is.
    assert rk.encode_examples(pa.table({"a": [1, None]}))[1] == rk.encode_example({})


# -- structure-generated tables --------------------------------------------------------------------

_LEAF_TYPES = {
    "int64": (pa.int64(), st.integers(-(2**63), 2**63 - 1)),
    "int32": (pa.int32(), st.integers(-(2**31), 2**31 - 1)),
    "uint16": (pa.uint16(), st.integers(0, 2**16 - 1)),
    "bool": (pa.bool_(), st.booleans()),
    "float32": (pa.float32(), st.floats(width=32)),
    "float64": (pa.float64(), st.floats()),
    "string": (pa.string(), st.text(max_size=200)),
    "binary": (pa.binary(), st.binary(max_size=200)),
}


@st.composite
def arrow_tables(draw: st.DrawFn) -> Any:
    rows = draw(st.integers(0, 12))
    columns = {}
    for c in range(draw(st.integers(1, 5))):
        kind, values = _LEAF_TYPES[draw(st.sampled_from(sorted(_LEAF_TYPES)))]
        shape = draw(st.sampled_from(["scalar", "list", "fixed"]))
        nullable = st.none() | values
        if shape == "scalar":
            data = draw(st.lists(nullable, min_size=rows, max_size=rows))
            columns[f"c{c}"] = pa.array(data, kind)
        elif shape == "list":
            lists = st.none() | st.lists(values, max_size=20)
            columns[f"c{c}"] = pa.array(
                draw(st.lists(lists, min_size=rows, max_size=rows)), pa.list_(kind)
            )
        else:
            size = draw(st.integers(0, 3))
            item = st.none() | st.lists(values, min_size=size, max_size=size)
            columns[f"c{c}"] = pa.array(
                draw(st.lists(item, min_size=rows, max_size=rows)), pa.list_(kind, size)
            )
    return pa.table(columns)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(arrow_tables())
def test_generated_tables_encode_as_row_by_row(table) -> None:
    assert tables.encode_examples(table) == row_by_row(table)
    rows = table.to_pylist()
    if all(any(v is not None for v in row.values()) for row in rows):
        assert tables.encode_ofrecords(table) == row_by_row(table, ofrecord=True)


# -- records to Arrow ------------------------------------------------------------------------------

SPECS = {
    "label": rk.FixedLen((), np.int64),
    "emb": rk.FixedLen((2, 3), np.float32),
    "name": rk.FixedLen((), str),
    "raw": rk.FixedLen((1,), bytes),
    "tokens": rk.VarLen(np.int64),
    "words": rk.VarLen(str),
    "blobs": rk.VarLen(bytes),
    "opt": rk.FixedLen((), np.float32, default=-1.0),
}


def sample_records(n: int = 40, encode: Any = rk.encode_example) -> list[bytes]:
    rng = np.random.default_rng(5)
    records = []
    for i in range(n):
        features: dict[str, Any] = {
            "label": i,
            "emb": rng.random(6, dtype=np.float32),
            "name": f"n{i}é",
            "raw": rng.bytes(i % 5),
            "tokens": np.arange(i % 4, dtype=np.int64),
            "words": [f"w{j}" for j in range(i % 3)],
            "blobs": [rng.bytes(3)] * (i % 2),
        }
        if i % 3:
            features["opt"] = float(i)
        # Different feature orders send some records to the scanner instead of the template path.
        order = sorted(features, reverse=bool(i % 7 == 0))
        records.append(encode({k: features[k] for k in order}))
    return records


def test_parse_to_arrow_matches_the_numpy_parse() -> None:
    records = sample_records()
    table = rk.parse_examples(records, SPECS, to="arrow")
    batch = rk.parse_examples(records, SPECS)
    assert table.column_names == list(SPECS)
    assert table.schema.field("label").type == pa.int64()
    assert table.schema.field("emb").type == pa.list_(pa.list_(pa.float32(), 3), 2)
    assert table.schema.field("name").type == pa.string()
    assert table.schema.field("raw").type == pa.list_(pa.binary(), 1)
    assert table.schema.field("tokens").type == pa.list_(pa.int64())
    assert table.schema.field("words").type == pa.list_(pa.string())
    assert table.column("label").to_pylist() == batch["label"].tolist()
    assert table.column("emb").to_pylist() == batch["emb"].tolist()
    assert table.column("name").to_pylist() == batch["name"].tolist()
    assert table.column("raw").to_pylist() == batch["raw"].tolist()
    assert table.column("opt").to_pylist() == batch["opt"].tolist()
    for name in ("tokens", "words", "blobs"):
        assert table.column(name).to_pylist() == batch[name].to_list()
    assert table.equals(rk.to_arrow(batch))
    of_records = sample_records(encode=rk.encode_ofrecord)
    assert rk.parse_ofrecords(of_records, SPECS, to="arrow").equals(table)


def test_fixed_len_sequence_gives_lists_of_items_without_padding() -> None:
    records = [rk.encode_example({"xy": np.arange(2 * k, dtype=np.float32)}) for k in (2, 0, 1)]
    spec = {"xy": rk.FixedLenSequence((2,), np.float32)}
    table = rk.parse_examples(records, spec, to="arrow")
    assert table.schema.field("xy").type == pa.list_(pa.list_(pa.float32(), 2))
    assert table.column("xy").to_pylist() == [[[0, 1], [2, 3]], [], [[0, 1]]]
    with pytest.raises(rk.DecodeError, match=r"record 1: feature 'xy'.*whole number"):
        rk.parse_examples([records[0], rk.encode_example({"xy": [1.0]})], spec, to="arrow")


def test_errors_are_the_numpy_parsers_errors() -> None:
    good = rk.encode_example({"s": "ok", "v": ["a"]})
    bad_utf8 = rk.encode_example({"s": b"\xff", "v": [b"b", b"\xfe"]})
    wrong_kind = rk.encode_example({"s": 1, "v": ["a"]})
    cases = [
        ([good, good, bad_utf8], {"s": rk.FixedLen((), str)}),
        ([good, bad_utf8], {"v": rk.VarLen(str)}),
        ([good, wrong_kind], {"s": rk.FixedLen((), str)}),
        ([good, rk.encode_example({})], {"s": rk.FixedLen((), str)}),
        ([good, b"\x0a\x05"], {"s": rk.FixedLen((), str)}),
    ]
    for records, specs in cases:
        with pytest.raises(rk.DecodeError) as numpy_error:
            rk.parse_examples(records, specs)
        with pytest.raises(rk.DecodeError) as arrow_error:
            rk.parse_examples(records, specs, to="arrow")
        assert str(arrow_error.value) == str(numpy_error.value)
        assert arrow_error.value.index == numpy_error.value.index == len(records) - 1


def test_str_default_and_null_missing() -> None:
    records = [rk.encode_example({"s": "a", "n": [1, 2]}), rk.encode_example({})]
    specs = {"s": rk.FixedLen((), str, default="zz"), "n": rk.FixedLen(2, np.int64, default=9)}
    assert rk.parse_examples(records, specs, to="arrow").to_pydict() == {
        "s": ["a", "zz"],
        "n": [[1, 2], [9, 9]],
    }
    nullable = tables.parse_arrow(
        records,
        {"s": rk.FixedLen((), str), "n": rk.FixedLen((2,), np.int64), "b": rk.FixedLen((), bytes)},
        ofrecord=False,
        null_missing=True,
    )
    assert nullable.to_pydict() == {"s": ["a", None], "n": [[1, 2], None], "b": [None, None]}


def test_to_argument_and_empty_batches() -> None:
    with pytest.raises(ValueError, match='to must be "numpy" or "arrow"'):
        rk.parse_examples([], {}, to="pandas")  # type: ignore[call-overload]
    empty = rk.parse_examples([], SPECS, to="arrow")
    assert empty.num_rows == 0
    assert empty.column_names == list(SPECS)
    assert rk.parse_examples([b"", b""], {}, to="arrow").num_rows == 2


def test_to_arrow_of_sequence_batches_and_arguments() -> None:
    record = rk.encode_sequence_example(
        context={"id": 1}, feature_lists={"tok": [[1, 2], [3]], "xy": [[0.5, 1.5]]}
    )
    context, sequence, _ = rk.parse_sequence_examples(
        [record, record],
        {"id": rk.FixedLen((), np.int64)},
        {"tok": rk.VarLen(np.int64), "xy": rk.FixedLenSequence((2,), np.float32)},
    )
    table = rk.to_arrow({**context, **sequence})
    assert table.column("tok").to_pylist() == [[[1, 2], [3]]] * 2
    assert table.column("xy").to_pylist() == [[[0.5, 1.5]]] * 2
    with pytest.raises(TypeError, match="mapping"):
        rk.to_arrow([1, 2])  # type: ignore[arg-type]


def test_without_pyarrow_the_table_functions_say_what_to_install() -> None:
    import subprocess
    import sys

    code = (
        "import sys; sys.modules['pyarrow'] = None\n"
        "import numpy as np, recordkit as rk\n"
        "assert rk.parse_examples([rk.encode_example({'a': 1})], {'a': rk.FixedLen((), np.int64)})\n"
        "try:\n    rk.encode_examples({'a': [1]})\nexcept ImportError as e:\n    print(e)\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    )
    assert result.stdout.strip() == (
        "converting tables (recordkit.decode.tables) needs pyarrow: pip install 'recordkit[arrow]' "
        "(or pip install pyarrow)"
    )


def test_an_image_spec_is_refused_when_parsing_to_arrow() -> None:
    records = [rk.encode_example({"image": b"\x89PNG"})]
    with pytest.raises(TypeError, match="numpy arrays only"):
        rk.parse_examples(records, {"image": rk.Image()}, to="arrow")
