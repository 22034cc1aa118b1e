"""Reading URLs by the byte range, against a real HTTP server started here (``_http_server``), which counts
on its side the bytes and requests it answered: random reads fetch the records' ranges and little else,
reading in order fetches the file once, failures are retried then named, and a file changed on the server
is refused rather than mixed."""

from __future__ import annotations

import os
import random
import time

import pytest
from _http_server import served

import recordkit as rk
from recordkit.errors import FileChangedError, RemoteReadError
from recordkit.io import remote
from recordkit.io.writer import scan_offsets

pytest.importorskip("aiohttp")  # fsspec's HTTP file system

COUNT = 10_000
RECORDS = [random.Random(i).randbytes(1024) for i in range(COUNT)]
NEEDED = 256 * 1024  # the payload bytes of 256 records


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    """The records as FFRecord, as TFRecord with its sidecar index, and as ArrayRecord."""
    folder = tmp_path_factory.mktemp("served")
    names = {"ffrecord": "data.ffr", "tfrecord": "data.tfrecord"}
    try:
        import zstandard  # noqa: F401

        names["arrayrecord"] = "data.array_record"
    except ImportError:
        pass
    for fmt, name in names.items():
        with rk.open(folder / name, "w", format=fmt) as writer:
            writer.write_many(RECORDS)
    from recordkit.io.index import default_index_path, save_index

    save_index(scan_offsets(folder / "data.tfrecord"), default_index_path(folder / "data.tfrecord"))
    return folder, names


@pytest.fixture
def server(files):
    with served(files[0]) as running:
        yield running


@pytest.mark.parametrize("fmt", ["ffrecord", "tfrecord", "arrayrecord"])
def test_random_reads_fetch_little_more_than_the_records(files, server, fmt):
    if fmt not in files[1]:
        pytest.skip("zstandard is not installed")
    indices = random.Random(7).sample(range(COUNT), 256)
    with rk.open(server.url(files[1][fmt])) as reader:
        reader.read([0])  # the header, index or footer: fetched once, at opening or first use
        server.reset()
        assert reader.read(indices) == [RECORDS[i] for i in indices]
        assert reader[indices[0]] == RECORDS[indices[0]]
    assert server.sent <= 3 * NEEDED, (server.sent, server.requests)
    assert server.requests <= 256 + 1


def test_reading_in_order_fetches_the_file_once(files, server):
    size = os.path.getsize(files[0] / "data.tfrecord")
    assert list(rk.open(server.url("data.tfrecord"))) == RECORDS
    assert server.sent <= 1.1 * size, (server.sent, size)
    assert (
        max(end - start for start, end in server.ranges) >= 1 << 20
    )  # requests of a window or more


def test_failed_requests_are_retried(files, server, monkeypatch):
    monkeypatch.setattr(remote, "BACKOFF", 0.01)
    with rk.open(server.url("data.ffr")) as reader:
        server.fail_next(remote.RETRIES, status=503)
        assert reader.read([5, 3000]) == [RECORDS[5], RECORDS[3000]]


def test_a_request_failing_every_time_names_the_url_and_the_range(files, server, monkeypatch):
    monkeypatch.setattr(remote, "BACKOFF", 0.01)
    url = server.url("data.ffr")
    with rk.open(url) as reader:
        server.fail_next(remote.RETRIES + 1, status=500)
        with pytest.raises(RemoteReadError) as caught:
            reader[10]
    assert caught.value.path == url
    assert caught.value.end - caught.value.start == 1024
    assert url in str(caught.value)
    assert f"bytes {caught.value.start}-" in str(caught.value)


def test_a_file_changed_on_the_server_is_refused(files, tmp_path):
    (tmp_path / "data.ffr").write_bytes((files[0] / "data.ffr").read_bytes())
    with served(tmp_path) as running, rk.open(running.url("data.ffr")) as reader:
        assert reader[1] == RECORDS[1]
        os.utime(tmp_path / "data.ffr", ns=(time.time_ns(), time.time_ns() + 10**9))  # a new ETag
        with pytest.raises(FileChangedError) as caught:
            reader.read([2, 3])
    assert caught.value.path == running.url("data.ffr")


def test_plain_forms_over_http(files, server):
    url = server.url("data.tfrecord")
    assert next(iter(rk.open(url))) == RECORDS[0]
    assert [len(r) for r in rk.open(url)][:3] == [1024] * 3
    assert rk.open(url)[COUNT - 1] == RECORDS[-1]


def test_loader_workers_read_over_http(files, server):
    pytest.importorskip("torch")
    from recordkit.data import Dataset, loader

    batches = loader(Dataset(server.url("data.tfrecord")).batch(500), num_workers=2)
    seen = [record for batch in batches for record in batch]
    assert sorted(seen) == sorted(RECORDS)
