"""Reading URLs by the byte range, against a real HTTP server started here (``_http_server``), which counts
on its side the bytes and requests it answered: random reads fetch the records' ranges and little else,
reading in order fetches the file once, failures are retried then named, and a file changed on the server
is refused rather than mixed."""

from __future__ import annotations

import functools
import os
import random
import threading
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


def test_a_shuffled_map_dataset_loader_reads_every_record_once_over_http(files, server):
    pytest.importorskip("torch")
    from recordkit.integrations.torch import MapDataset, dataloader

    batches = dataloader(
        MapDataset(server.url("data.tfrecord")), batch_size=256, shuffle=True, num_workers=2
    )
    seen = [bytes(record) for batch in batches for record in batch]
    assert sorted(seen) == sorted(RECORDS)
    assert server.sent <= 1.5 * os.path.getsize(files[0] / "data.tfrecord"), server.sent


@pytest.fixture
def s3(tmp_path, monkeypatch):
    """A moto S3 server (an S3-compatible store from the package registries) on a local port, behind a
    WSGI layer counting the GET requests and body bytes it answers, and fsspec's ``s3://`` pointed at it."""
    pytest.importorskip("s3fs")
    server_module = pytest.importorskip("moto.server")
    pytest.importorskip("flask")
    import fsspec
    from werkzeug.serving import make_server

    counts = {"sent": 0, "requests": 0}
    app = server_module.DomainDispatcherApplication(server_module.create_backend_app)

    def counting(environ, start_response):
        body = b"".join(app(environ, start_response))
        if environ["REQUEST_METHOD"] == "GET":
            counts["sent"] += len(body)
            counts["requests"] += 1
        return [body]

    httpd = make_server("127.0.0.1", 0, counting, threaded=True)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    endpoint = f"http://127.0.0.1:{httpd.server_port}"
    options = {
        "key": "k",
        "secret": "s",
        "client_kwargs": {"endpoint_url": endpoint, "region_name": "us-east-1"},
    }
    monkeypatch.setitem(fsspec.config.conf, "s3", options)
    fs = fsspec.filesystem("s3", skip_instance_cache=True, **options)
    fs.call_s3("create_bucket", Bucket="bucket")
    try:
        yield fs, counts
    finally:
        httpd.shutdown()


def test_s3_random_reads_and_iteration_through_s3fs(files, s3):
    fs, counts = s3
    fs.put(str(files[0] / "data.ffr"), "bucket/data.ffr")
    fs.put(str(files[0] / "data.tfrecord"), "bucket/data.tfrecord")
    indices = random.Random(3).sample(range(COUNT), 256)
    with rk.open("s3://bucket/data.ffr") as reader:
        reader.read([0])
        counts.update(sent=0, requests=0)
        assert reader.read(indices) == [RECORDS[i] for i in indices]
    assert counts["sent"] <= 3 * NEEDED, counts
    counts.update(sent=0, requests=0)
    # No sidecar index here: list(iter(...)) does not ask for len(), which would read the headers first.
    assert list(iter(rk.open("s3://bucket/data.tfrecord"))) == RECORDS
    assert counts["sent"] <= 1.1 * os.path.getsize(files[0] / "data.tfrecord"), counts
    fs.rm("bucket/data.ffr")
    with pytest.raises((FileChangedError, FileNotFoundError)):
        rk.open("s3://bucket/data.ffr")


def test_a_server_that_cannot_be_reached_is_retried_then_named(tmp_path, monkeypatch):
    monkeypatch.setattr(remote, "BACKOFF", 0.01)
    with served(tmp_path) as running:
        url = running.url("gone.ffr")
    with pytest.raises(RemoteReadError) as caught:  # the server stopped: nothing listens there
        rk.open(url)
    assert caught.value.path == url
    assert caught.value.__cause__ is not None
    assert f"{url}: its size: could not be reached" in str(caught.value)


def test_a_missing_file_is_not_found(tmp_path, server):
    with pytest.raises(FileNotFoundError):
        rk.open(server.url("no-such-file.ffr"))


def test_a_server_ignoring_range_is_read_right_with_a_warning(files, tmp_path):
    import http.server
    import threading as threads

    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(files[0]))
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threads.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        url = f"http://127.0.0.1:{httpd.server_address[1]}/data.ffr"
        with (
            pytest.warns(rk.errors.RecordKitWarning, match="ignores Range"),
            rk.open(url) as reader,
        ):
            assert reader.read([3, 9000]) == [RECORDS[3], RECORDS[9000]]
    finally:
        httpd.shutdown()
        httpd.server_close()


def test_a_request_slower_than_the_timeout_is_retried_then_named(files, monkeypatch):
    monkeypatch.setattr(remote, "BACKOFF", 0.01)
    monkeypatch.setattr(remote, "RETRIES", 1)
    with served(files[0]) as running, rk.open(running.url("data.ffr")) as reader:
        monkeypatch.setattr(remote, "TIMEOUT", 0.1)
        running.latency = 0.5
        with pytest.raises(RemoteReadError, match=r"no answer within 0\.1 s") as caught:
            reader[10]
        assert caught.value.__cause__ is not None
        running.latency = 0.0  # the server answers in time again: so does the same reader
        assert reader[10] == RECORDS[10]
        running.latency = 0.5
        with pytest.raises(RemoteReadError, match="could not be reached"):
            rk.open(running.url("data.tfrecord"))  # opening, too, waits TIMEOUT at most


def test_a_dataset_at_a_url_reads_its_manifests_indexes_not_its_headers(tmp_path):
    with rk.ShardWriter(str(tmp_path / "part-{shard:02d}.tfrecord"), max_records=2_500) as writer:
        writer.write_many(RECORDS)
    indices = random.Random(3).sample(range(COUNT), 64)
    with served(tmp_path) as running:
        with rk.open(running.url("")) as reader:
            assert reader.read(indices) == [RECORDS[i] for i in indices]
        assert running.sent <= 3 * 64 * 1024 + 4 * 60_000, running.sent  # records and 4 indexes
        # An index that no longer has the SHA-256 the manifest records is not used: the headers are.
        stale = tmp_path / ".part-01.tfrecord.idx"
        stale.write_bytes(stale.read_bytes().replace(b"\n", b" \n", 1))
        with pytest.warns(rk.errors.StaleIndexWarning, match="SHA-256"):
            assert rk.open(running.url("")).read(indices) == [RECORDS[i] for i in indices]
        stale.unlink()
        with pytest.warns(rk.errors.StaleIndexWarning, match="missing"):
            assert rk.open(running.url("")).read(indices) == [RECORDS[i] for i in indices]
