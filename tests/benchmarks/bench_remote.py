"""Contenders for reading over HTTP: recordkit's ranged reads against fsspec's default file object and a
whole-file download, 40,000 records of 1 KiB served with added latency by ``tests/_http_server.py`` in a
process of its own, which counts the bytes it sends.

* random: ``read(256 random indices)`` of an FFRecord file, eight batches a pass;
* in order: every record of a TFRecord file.

Run alone (``python tests/benchmarks/bench_remote.py``), it prints the bytes sent and the time per call for
each contender at 0, 10 and 50 ms of latency, and a ``dataloader`` with 2 workers over the URL against the
same files on local disk.
"""

from __future__ import annotations

import atexit
import io
import json
import os
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Callable
from typing import Any

import numpy as np

Pass = Callable[[], int]
COUNT, SIZE, BATCH, BATCHES = 40_000, 1024, 256, 8
TESTS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")


def write_data(directory: str) -> str:
    """The records as ``data.ffr`` and ``data.tfrecord`` (with its sidecar index) in ``directory``."""
    import recordkit as rk
    from recordkit.io import write_index

    blob = np.random.default_rng(5).bytes(COUNT * SIZE)
    records = [blob[i * SIZE : (i + 1) * SIZE] for i in range(COUNT)]
    for name in ("data.ffr", "data.tfrecord"):
        with rk.open(os.path.join(directory, name), "w") as writer:
            writer.write_many(records)
    write_index(os.path.join(directory, "data.tfrecord"))
    return directory


class _Server:
    """``_http_server.py`` serving ``directory`` in a process of its own."""

    def __init__(self, directory: str, latency: float) -> None:
        script = os.path.join(TESTS, "_http_server.py")
        # Its own stderr, and killed at exit: a server left holding the caller's pipes would keep a
        # caller that reads them to the end (subprocess.run) waiting.
        self.process = subprocess.Popen(
            [sys.executable, script, directory, str(latency)],
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            stdin=subprocess.DEVNULL,
            text=True,
        )
        atexit.register(self.close)
        assert self.process.stdout is not None
        self.base = f"http://127.0.0.1:{self.process.stdout.readline().strip()}"

    def stats(self, reset: bool = False) -> dict[str, int]:
        with urllib.request.urlopen(self.base + ("/__reset" if reset else "/__stats")) as answer:
            found: dict[str, int] = json.loads(answer.read())
        return found

    def close(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait()


_SERVERS: dict[tuple[str, float], _Server] = {}


def _url(directory: str, latency: float, name: str) -> str:
    key = (directory, latency)
    if key not in _SERVERS:
        _SERVERS[key] = _Server(directory, latency)
    return f"{_SERVERS[key].base}/{name}"


def _batches() -> list[list[int]]:
    rng = np.random.default_rng(1)
    return [rng.choice(COUNT, BATCH, replace=False).tolist() for _ in range(BATCHES)]


def _opener(how: str) -> Callable[[str, str], Any]:
    import fsspec

    import recordkit as rk

    if how == "recordkit":
        return lambda url, fmt: rk.open(url)
    if how == "fsspec file object":
        return lambda url, fmt: rk.open(fsspec.open(url, "rb").open(), format=fmt)
    # the whole file fetched first, then read from memory
    return lambda url, fmt: rk.open(io.BytesIO(fsspec.open(url, "rb").open().read()), format=fmt)


def random_reads(directory: str, latency: float, how: str) -> Pass:
    """Open the FFRecord file over HTTP and ``read`` eight batches of 256 random indices."""
    url, batches, opener = _url(directory, latency, "data.ffr"), _batches(), _opener(how)

    def run() -> int:
        with opener(url, "ffrecord") as reader:
            return sum(len(reader.read(batch)) for batch in batches)

    return run


def in_order(directory: str, latency: float, how: str) -> Pass:
    """Every record of the TFRecord file over HTTP, in order."""
    url, opener = _url(directory, latency, "data.tfrecord"), _opener(how)

    def run() -> int:
        with opener(url, "tfrecord") as reader:
            return sum(1 for _ in reader)

    return run


def curl(directory: str, latency: float) -> Pass:
    """``curl`` of the TFRecord file to /dev/null: what the network allows."""
    url = _url(directory, latency, "data.tfrecord")

    def run() -> int:
        subprocess.run(["curl", "-s", "-o", os.devnull, url], check=True)
        return COUNT

    return run


def _report() -> None:
    import recordkit as rk
    from recordkit.data import Dataset, loader

    directory = write_data(tempfile.mkdtemp())
    needed, size = BATCH * BATCHES * SIZE, os.path.getsize(os.path.join(directory, "data.tfrecord"))
    print(f"{COUNT:,} x {SIZE} B; random: {BATCHES} x read({BATCH} random), {needed:,} B needed")
    for latency in (0.0, 0.01, 0.05):
        for case, make, want in (("random", random_reads, needed), ("in order", in_order, size)):
            for how in ("recordkit", "fsspec file object", "whole file"):
                run = make(directory, latency, how)
                server = _SERVERS[(directory, latency)]
                server.stats(reset=True)
                start = time.perf_counter()
                run()
                took = time.perf_counter() - start
                sent = server.stats()
                print(
                    f"{latency * 1000:>4.0f} ms  {case:<9} {how:<19} {took:7.2f} s  "
                    f"{sent['sent'] / want:6.2f}x the bytes  {sent['requests']:>5} requests"
                )
        if latency:
            run = curl(directory, latency)
            start = time.perf_counter()
            run()
            print(
                f"{latency * 1000:>4.0f} ms  in order  curl                {time.perf_counter() - start:7.2f} s"
            )
    local = os.path.join(directory, "data.tfrecord")
    print("dataloader(Dataset(url).batch(256), num_workers=2): records/s")
    for latency in (0.0, 0.01, 0.05):
        rates = []
        for source in (_url(directory, latency, "data.tfrecord"), local):
            start = time.perf_counter()
            count = sum(len(batch) for batch in loader(Dataset(source).batch(256), num_workers=2))
            rates.append(count / (time.perf_counter() - start))
        print(
            f"{latency * 1000:>4.0f} ms  URL {rates[0]:>10,.0f}  local {rates[1]:>10,.0f}  {rates[0] / rates[1]:.2f}x"
        )
    for server in _SERVERS.values():
        server.close()
    del rk


if __name__ == "__main__":
    _report()
