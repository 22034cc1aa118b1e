"""In which order each reader gives a tensorflow-datasets split (what docs/formats/tfds.md says):
``recordkit.open``, ``Dataset`` and the command line in TFDS's interleaved order, the Ray and Dask readers
shard after shard."""

from __future__ import annotations

import base64

import pytest
from _cli import run_cli
from _data_files import write_tfds_directory

import recordkit as rk

# Two shards of 20: TFDS takes 16 records from each in turn, then the last 4 of each.
FILES = {
    f"toy-train.tfrecord-0000{i}-of-00002": [b"s%d-%02d" % (i, j) for j in range(20)]
    for i in range(2)
}
SHARD_AFTER_SHARD = [record for records in FILES.values() for record in records]
TFDS_ORDER = (
    FILES["toy-train.tfrecord-00000-of-00002"][:16]
    + FILES["toy-train.tfrecord-00001-of-00002"][:16]
    + FILES["toy-train.tfrecord-00000-of-00002"][16:]
    + FILES["toy-train.tfrecord-00001-of-00002"][16:]
)


@pytest.fixture
def toy(tmp_path):
    files = {**FILES, "toy-test.tfrecord-00000-of-00001": [b"t0"]}
    return write_tfds_directory(tmp_path / "toy", files, {"train": [20, 20], "test": [1]})


def test_open_gives_tfds_order(toy):
    with rk.open(toy, split="train") as reader:
        assert list(reader) == TFDS_ORDER


def test_cli_cat_and_convert_give_tfds_order_and_need_a_split(capsys, toy, tmp_path):
    refused = run_cli(capsys, "cat", toy)
    assert refused.code == 2
    assert "train, test" in refused.err
    result = run_cli(capsys, "cat", "--raw", toy, "--split", "train")
    assert result.code == 0, result.err
    assert [base64.b64decode(line) for line in result.out.split()] == TFDS_ORDER
    out = tmp_path / "train.tfrecord"
    assert run_cli(capsys, "convert", "-q", toy, out, "--split", "train").code == 0
    with rk.open(out) as reader:
        assert list(reader) == TFDS_ORDER


def test_dask_reads_a_tfds_split_shard_after_shard(toy):
    rkdask = pytest.importorskip("recordkit.integrations.dask")
    bag = rkdask.read_records(toy, split="train")
    assert list(bag.compute(scheduler="sync")) == SHARD_AFTER_SHARD


@pytest.mark.ray
@pytest.mark.filterwarnings(r"ignore::DeprecationWarning:ray\..*")
def test_ray_reads_a_tfds_split_shard_after_shard(toy):
    ray = pytest.importorskip("ray")
    rkray = pytest.importorskip("recordkit.integrations.ray")
    ray.init(num_cpus=1, include_dashboard=False, log_to_driver=False)
    try:
        ray.data.DataContext.get_current().enable_progress_bars = False
        rows = rkray.read_records(toy, split="train").take_all()
    finally:
        ray.shutdown()
    assert [row["bytes"] for row in rows] == SHARD_AFTER_SHARD
