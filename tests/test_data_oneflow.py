"""OneFlow part naming and the OneFlow-style OFRecordReader, over real OneFlow files and generated parts."""

from __future__ import annotations

import collections
import hashlib
import itertools
from pathlib import Path

import numpy as np
import pytest
from _data_files import write

import recordkit as rk
from recordkit.compat.oneflow import OFRecordReader, part_files, raw_decoder


@pytest.mark.parametrize(
    ("suffix_length", "names"),
    [
        (-1, ["part-0", "part-1", "part-2", "part-3", "part-4", "part-5", "part-6", "part-7",
              "part-8", "part-9", "part-10", "part-11"]),
        (5, [f"part-{i:05d}" for i in range(12)]),
        (1, [f"part-{i}" for i in range(12)]),  # zfill never cuts: "10" stays "10"
        (3, [f"part-{i:03d}" for i in range(12)]),
    ],
)  # fmt: skip
def test_part_file_names(tmp_path, suffix_length, names):
    for name in names:
        (tmp_path / name).write_bytes(b"")
    assert part_files(tmp_path, 12, "part-", suffix_length) == [f"{tmp_path}/{n}" for n in names]


def test_part_files_prefix_and_missing_part(tmp_path):
    for i in (0, 1, 3):
        (tmp_path / f"train.of_record-{i}").write_bytes(b"")
    assert part_files(tmp_path, 2, "train.of_record-") == [
        f"{tmp_path}/train.of_record-0",
        f"{tmp_path}/train.of_record-1",
    ]
    with pytest.raises(FileNotFoundError, match=r"part 2 is missing.*train\.of_record-2"):
        part_files(tmp_path, 4, "train.of_record-")
    with pytest.raises(FileNotFoundError, match="part-0"):
        part_files(tmp_path, 1)
    with pytest.raises(ValueError, match="data_part_num"):
        part_files(tmp_path, 0)
    with pytest.raises(ValueError, match="suffix"):
        part_files(tmp_path, 1, "train.of_record-", -2)


def golden_reader(root: Path, params: dict, **options) -> OFRecordReader:
    return OFRecordReader(
        str(root / params["data_dir"]),
        data_part_num=params["data_part_num"],
        part_name_prefix=params["part_name_prefix"],
        part_name_suffix_length=params["part_name_suffix_length"],
        **options,
    )


def test_reader_over_oneflow_golden_files(ofrecord_golden, ofrecord_manifest):
    for entry in ofrecord_manifest["files"]:
        params = entry["oneflow_reader_params"]
        batches = list(golden_reader(ofrecord_golden, params, batch_size=5))
        n = entry["num_records"]
        assert [len(b) for b in batches] == [5] * (n // 5) + ([n % 5] if n % 5 else [])
        payloads = [r for b in batches for r in b]
        assert [hashlib.sha256(p).hexdigest() for p in payloads] == [
            r["payload_sha256"] for r in entry["records"]
        ]
        shuffled = golden_reader(
            ofrecord_golden,
            params,
            batch_size=4,
            random_shuffle=True,
            shuffle_buffer_size=8,
            seed=3,
        )
        assert sorted(r for b in shuffled for r in b) == sorted(payloads)


def test_golden_documentation_part_decodes(ofrecord_golden, ofrecord_manifest):
    entry = next(f for f in ofrecord_manifest["files"] if f["path"].endswith("dataset/part-0"))
    reader = OFRecordReader(str(ofrecord_golden / "oneflow-documentation/dataset"), batch_size=3)
    (batch,) = list(reader)
    labels = raw_decoder(batch, "labels", shape=(1,), dtype=np.int64)
    assert labels[:, 0].tolist() == [r["features"]["labels"]["values"][0] for r in entry["records"]]


def make_parts(folder: Path, sizes: list[int], width: int = 5) -> list[bytes]:
    everything = []
    for i, n in enumerate(sizes):
        records = [rk.encode_ofrecord({"id": [1000 * i + j]}) for j in range(n)]
        write(folder / f"part-{str(i).zfill(width)}", records, format="ofrecord")
        everything.extend(records)
    return everything


def ids(batches) -> list[int]:
    return [int(v) for b in batches for v in raw_decoder(b, "id", shape=(1,), dtype=np.int64)[:, 0]]


def test_reader_over_generated_parts(tmp_path):
    records = make_parts(tmp_path, [7, 3, 9, 5])
    expected = ids([records])
    reader = OFRecordReader(tmp_path, batch_size=4, data_part_num=4, part_name_suffix_length=5)
    batches = list(reader)
    assert ids(batches) == expected
    assert [len(b) for b in batches] == [4, 4, 4, 4, 4, 4]
    assert reader.epoch == 1
    dropped = OFRecordReader(
        tmp_path, batch_size=5, data_part_num=4, part_name_suffix_length=5, drop_last=True
    )
    assert [len(b) for b in dropped] == [5, 5, 5, 5, 5][: len(expected) // 5]
    with pytest.raises(FileNotFoundError, match="part-00004"):
        OFRecordReader(tmp_path, data_part_num=5, part_name_suffix_length=5)


def test_shuffles_are_seeded_and_change_each_epoch(tmp_path):
    expected = sorted(ids([make_parts(tmp_path, [10, 10, 10])]))

    def reader(**options):
        return OFRecordReader(
            tmp_path, batch_size=6, data_part_num=3, part_name_suffix_length=5, **options
        )

    a = reader(random_shuffle=True, shuffle_buffer_size=12, seed=5)
    first = ids(a)
    assert sorted(first) == expected
    assert first != expected
    assert first == ids(reader(random_shuffle=True, shuffle_buffer_size=12, seed=5))
    assert ids(a) != first
    # shuffle_after_epoch alone: part order changes, records within a part stay in order
    b = reader(shuffle_after_epoch=True, seed=1)
    orders = [ids(b) for _ in range(4)]
    assert all(sorted(o) == expected for o in orders)
    assert len({tuple(o) for o in orders}) > 1
    for order in orders:
        parts = [v // 1000 for v in order]
        assert [k for k, _ in itertools.groupby(parts)] == list(dict.fromkeys(parts))


def test_random_seed_is_kept_for_resume(tmp_path):
    make_parts(tmp_path, [10, 10])
    options = {"batch_size": 3, "data_part_num": 2, "part_name_suffix_length": 5}
    a = OFRecordReader(tmp_path, random_shuffle=True, shuffle_buffer_size=6, **options)
    assert a.seed != OFRecordReader(tmp_path, random_shuffle=True, **options).seed
    it = iter(a)
    head = ids(itertools.islice(it, 2))
    state = a.state_dict()
    rest = ids(it)
    b = OFRecordReader(tmp_path, random_shuffle=True, shuffle_buffer_size=6, **options)
    b.load_state_dict(state)
    assert b.seed == a.seed
    assert ids(b) == rest
    assert collections.Counter(head + rest) == collections.Counter(range(10)) + collections.Counter(
        range(1000, 1010)
    )


def test_cycle_goes_on_and_ranks_split_parts(tmp_path):
    expected = ids([make_parts(tmp_path, [4, 5])])
    options = {"batch_size": 2, "data_part_num": 2, "part_name_suffix_length": 5}
    forever = OFRecordReader(tmp_path, cycle=True, **options)
    four_epochs = ids(itertools.islice(forever, 20))  # 5 batches an epoch: 2, 2, 2, 2, 1
    assert collections.Counter(four_epochs) == collections.Counter(expected * 4)
    got = []
    for rank in range(3):  # more ranks than parts: records are split, each read once
        got += ids(OFRecordReader(tmp_path, rank=rank, world_size=3, **options))
    assert sorted(got) == sorted(expected)
