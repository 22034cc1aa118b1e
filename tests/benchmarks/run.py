"""recordkit benchmark suite: recordkit side by side with TensorFlow, vahidk ``tfrecord`` and the C++ ffrecord.

Run from the repository root::

    python tests/benchmarks/run.py                # the full suite (a few minutes)
    python tests/benchmarks/run.py --quick        # small data, 3 repetitions: a smoke run, not figures
    python tests/benchmarks/run.py --json report.json --only read
    python tests/benchmarks/run.py --only ffrecord --workers 1 2 4 8 16   # the DataLoader scaling rows
    python tests/benchmarks/run.py --only pipeline --workers 1 2 4        # input pipelines, end to end

The ``pipeline`` cases (``bench_pipeline.py``) time, in the same rounds, 1 KiB Examples in 8 TFRecord shards
turned into parsed numpy batches of 256: the plain loop (``rk.open`` + ``rk.parse_examples``, the baseline),
``recordkit.data.Dataset`` pipelines (in order, shuffle buffer, global shuffle beside the plain
``read(permutation)`` loop), tf.data's usual pipeline, and loaders with worker processes at each
``--workers`` count (``recordkit.integrations.torch.dataloader`` to torch and to numpy, ``recordkit.data.loader``
where recordkit has it, a plain torch ``DataLoader`` over the plain loop, torch's ceiling, and an FFRecord
``MapDataset``), then 100 KiB records in batches of 16. Loader rows also show the CPU time per record of the
process that iterates them ("main CPU µs/rec"); the targets block gives the ratios the project aims at.

The ``reshard`` case (``bench_reshard.py``) writes a dataset of 8 TFRecord shards of 1 KiB records (1 GB; 50 MB
with ``--quick``) again as 3 shards with ``recordkit.datasets.reshard``, in order and shuffled, against ``cp -r``
of the same directory, beside the floor of any reshard that writes a manifest (hashing the same bytes with
SHA-256 alone); "vs" there is the rate over cp's (the target: at least 0.5 in order).

The ArrayRecord cases (``bench_arrayrecord_write.py``) write 1 KiB records (100,000; 5,000 with ``--quick``)
with ``rk.open(path, "w", format="arrayrecord", options=...)`` + ``write_many`` against array_record's
``ArrayRecordWriter`` + ``write`` per record, at ``group_size:1,zstd:3`` and with no option string (each
library's defaults), beside the floor of any writer on recordkit's HighwayHash (hashing the chunk data alone),
and read the same records, written once by each, with ``list(rk.open(path))`` and with
``ArrayRecordReader.read_all()``; there "vs" is the rate on the recordkit-written file over the rate of the
same reader on the array_record-written one (the target: at least 0.95).

The C++ ffrecord (HFAiLab's reference, not on PyPI) is built from its public source by
``reference_ffrecord.py`` into a cache directory before the run (``--ffrecord-src DIR`` builds from a
checkout, without network); when it cannot be built, its rows say why and are skipped.

The data are generated deterministically in a temporary directory. Each library runs in a worker process of
its own (TensorFlow and vahidk ``tfrecord`` register the same protobuf names and cannot share a process;
recordkit's process never imports either). Every case prepares its contenders, runs each once to warm up
(which also fills the page cache), then times them in turns, one pass each per round, so that changes in
machine load fall on all of them alike. The pipeline, FFRecord read and ArrayRecord read cases are "fresh":
in each round every contender runs in a new process of its own, which warms up, times 3 passes in a row and
keeps the fastest (tf.data's AUTOTUNE tunes itself over the first passes), then ends, so that no contender
runs beside what another left behind (threads, loader workers, memory). Figures are medians over the rounds; "vs recordkit" is recordkit's
median rate divided by the row's (above 1: recordkit is faster; in the pipeline cases, "vs plain loop": the
plain loop's). Peers that are not installed are reported as skipped. With ``--only``, the printed targets are
those of the cases that ran. ``--json`` writes every sample, the machine description and every target.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

HERE = os.path.dirname(os.path.abspath(__file__))
# Worker processes by name: the library they run, and what they add to the environment. The C++ ffrecord's
# worker gets the reference build's directory on its PYTHONPATH (see reference_ffrecord.py).
FAMILIES: dict[str, dict[str, str]] = {
    "recordkit": {},
    "tensorflow": {"TF_CPP_MIN_LOG_LEVEL": "2"},
    "vahidk": {},
    "ffrecord-cpp": {},
    "array_record": {},
}
KIB = 1024
FRESH_PASSES = 3
"""Passes timed one after another in each fresh process (after the warm-up pass); the fastest is the round's
sample, so that a contender that tunes itself as it runs (tf.data's AUTOTUNE) is measured once tuned
(one with ``--quick``)."""


# -- the worker side ---------------------------------------------------------------------------------


def _versions(family: str) -> dict[str, str]:
    found = {}
    modules = {
        "recordkit": ("recordkit", "numpy", "google.protobuf", "torch"),
        "tensorflow": ("tensorflow",),
        "vahidk": ("tfrecord", "torch"),
        "ffrecord": ("ffrecord", "torch"),
        "array_record": ("array_record",),
    }[family.split("-")[0]]
    for name in modules:
        try:
            module = importlib.import_module(name)
        except ImportError:
            continue
        found[name] = str(getattr(module, "__version__", "?"))
    if family.startswith("recordkit"):
        from recordkit.formats import _crc

        found["crc32c backend"] = _crc.CRC32C_BACKEND
        found["crc32 backend"] = _crc.CRC32_BACKEND
        found["environment"] = " ".join(f"{k}={v}" for k, v in FAMILIES[family].items())
    peer = {"vahidk": "tfrecord", "array_record": "array_record"}.get(family)
    if peer in found:  # neither module has a __version__
        from importlib.metadata import version

        found[peer] = version(peer)
    return found


def worker(family: str) -> None:
    """Serve timing requests, one JSON object per line on stdin, answering one per line on stdout.

    ``prepare`` calls the factory (``module:function``) with ``kwargs``; it returns the pass to time, or
    ``None`` (its library is not installed) or a ``str`` (why it cannot run) to skip the contender. ``time``
    runs one pass and answers its wall time and record count, and, when the request has ``"cpu": true``,
    ``cpu_seconds``: this process's CPU time over the pass (what a loader costs the process iterating it).
    """
    sys.path.insert(0, HERE)
    passes: dict[str, Callable[[], int]] = {}
    print(json.dumps({"versions": _versions(family)}), flush=True)
    for line in sys.stdin:
        request = json.loads(line)
        key = request["key"]
        if request["op"] == "prepare":
            module, name = request["factory"].split(":")
            run = getattr(importlib.import_module(module), name)(**request["kwargs"])
            if run is None or isinstance(run, str):  # a str says why the contender cannot run
                answer: dict[str, Any] = {"status": "skipped", "reason": run or "not installed"}
            else:
                run()  # warm up
                passes[key] = run
                answer = {"status": "ok"}
        elif request["op"] == "time":
            cpu = time.process_time()
            start = time.perf_counter()
            records = passes[key]()
            answer = {"seconds": time.perf_counter() - start, "records": records}
            if request.get("cpu"):  # this process's CPU time (all its threads, not its children)
                answer["cpu_seconds"] = time.process_time() - cpu
        else:  # "drop"
            passes.pop(key, None)
            answer = {}
        print(json.dumps(answer), flush=True)


def memory_worker(path: str, count: int) -> None:
    """Print the reader-memory measurement of one file as JSON (a fresh process per file)."""
    sys.path.insert(0, HERE)
    import bench_io

    print(json.dumps(bench_io.reader_memory(path, count)), flush=True)


# -- the runner side ---------------------------------------------------------------------------------


class Worker:
    """A worker process for one library family."""

    def __init__(self, family: str) -> None:
        self.family = family
        self.process = subprocess.Popen(
            [sys.executable, __file__, "--worker", family],
            env={**os.environ, **FAMILIES[family]},
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        self.versions: dict[str, str] = {}

    def start(self) -> None:
        """Wait until the worker has imported its libraries."""
        self.versions = self._answer()["versions"]

    def ask(self, **request: Any) -> dict[str, Any]:
        """Send one request and return the answer."""
        assert self.process.stdin is not None
        self.process.stdin.write(json.dumps(request) + "\n")
        self.process.stdin.flush()
        return self._answer()

    def _answer(self) -> dict[str, Any]:
        assert self.process.stdout is not None
        line = self.process.stdout.readline()
        if not line:
            raise RuntimeError(f"the {self.family} worker died (exit status {self.process.wait()})")
        answer: dict[str, Any] = json.loads(line)
        return answer

    def close(self) -> None:
        """End the worker."""
        assert self.process.stdin is not None
        self.process.stdin.close()
        self.process.wait()


@dataclass
class Contender:
    """One implementation in a case: a factory (``module:function``) run in the process of ``family``."""

    name: str
    family: str
    factory: str
    kwargs: dict[str, Any]
    result: dict[str, Any] = field(default_factory=dict)
    versus: str | None = (
        None  # another contender of the case: the row also shows its rate / that one's
    )
    main_cpu: bool = (
        False  # also measure the CPU time of the process that iterates (the loader rows)
    )


@dataclass
class Case:
    """One benchmark row group: the contenders doing the same work."""

    id: str
    title: str
    record_bytes: int
    contenders: list[Contender]
    baseline: str = (
        "recordkit"  # what the first contender is: the "vs ..." column is its rate / the row's
    )
    fresh: bool = False  # each contender in a process of its own for each round (see run_case)


@dataclass
class Settings:
    """The data sizes of a run."""

    small: int  # records of 1 KiB
    large: int  # records of 100 KiB
    examples: int
    memory: int
    repeat: int
    tf_data_limit: int
    workers: list[int] = field(default_factory=lambda: [2])


def settings_for(args: argparse.Namespace) -> Settings:
    """Data sizes for ``--quick``, the default run, or ``--full``."""
    if args.quick:
        chosen = Settings(
            small=10_000, large=100, examples=2_560, memory=100_000, repeat=3, tf_data_limit=2_000
        )
    else:
        chosen = Settings(
            small=200_000,
            large=2_000,
            examples=20_480,
            memory=1_000_000,
            repeat=5,
            tf_data_limit=20_000,
        )
    if args.full:
        chosen.memory = 10_000_000
    if args.repeat:
        chosen.repeat = args.repeat
    if args.workers:
        chosen.workers = args.workers
    return chosen


PIPELINE_CASES = ("pipeline-1k", "pipeline-100k", "pipeline-read-parse")
# JPEGs of 320 x 256 to 224 x 224 batches of 64 (bench_image_pipeline.py): recordkit's Image against tf.data.
IMAGES_CASE = "images-jpeg"
IMAGES_COUNT = 6_000
IMAGES_TF = "tf.data: decode_jpeg, resize (antialias=False)"
IMAGES_TF_CROP = "tf.data: decode_and_crop_jpeg (random box), flip, resize"
IMAGES_ONE = "Dataset(files).batch(64).map(parse), one process"
READ_PARSE_CASE = "pipeline-read-parse"
READ_PARSE_PLAIN = "plain loop: rk.open, batches of 256, parse_examples"
READ_PARSE_TF = "tf.data.TFRecordDataset(p).batch(256).map(parse_example)"


def make_data(directory: str, settings: Settings, only: list[str] | None = None) -> dict[str, str]:
    """Write every input file; return their paths by name.

    The pipeline cases' shards (folders, by name) are written only when ``only`` selects one of them.
    """
    sys.path.insert(0, HERE)
    import bench_io
    import bench_parse
    import bench_pipeline

    import recordkit as rk

    paths = {}
    for size, count in ((KIB, settings.small), (100 * KIB, settings.large)):
        records = bench_io.payloads(count, size)
        for fmt, suffix in bench_io.SUFFIX.items():
            path = os.path.join(directory, f"raw-{size // KIB}k{suffix}")
            bench_io.write_file(path, records)
            paths[f"{fmt}-{size // KIB}k"] = path
        del records
    examples = bench_parse.make_records(settings.examples)
    paths["examples"] = os.path.join(directory, "examples.tfrecord")
    bench_io.write_file(paths["examples"], examples)
    paths["examples-pickle"] = os.path.join(directory, "examples.pickle")
    with open(paths["examples-pickle"], "wb") as f:
        import pickle

        pickle.dump(examples, f)
    tiny = [i.to_bytes(8, "little") for i in range(settings.memory)]
    for fmt, suffix in bench_io.SUFFIX.items():
        path = os.path.join(directory, f"tiny{suffix}")
        with rk.open(path, "w") as writer:
            writer.write_many(tiny)
        paths[f"{fmt}-tiny"] = path
    if not only or any(part in case for part in only for case in PIPELINE_CASES):
        paths.update(bench_pipeline.write_data(directory, settings.small, settings.large))
        paths[READ_PARSE_CASE] = bench_pipeline.write_mnist_like(directory, settings.small // 2)
    if not only or any(part in IMAGES_CASE for part in only):
        import bench_image_pipeline

        paths[IMAGES_CASE] = bench_image_pipeline.write_data(
            directory, min(IMAGES_COUNT, settings.small // 32)
        )
    if not only or any(part in case for part in only for case in ARRAYRECORD_CASES):
        import bench_arrayrecord_write

        written = bench_arrayrecord_write.write_data(directory, arrayrecord_records(settings), KIB)
        paths.update({f"arrayrecord-by-{writer}": path for writer, path in written.items()})
    if not only or any(part in RESHARD_CASE for part in only):
        import bench_reshard

        paths[RESHARD_CASE] = bench_reshard.write_data(directory, reshard_records(settings))
    if not only or any(part in case for part in only for case in REMOTE_CASES):
        import bench_remote

        paths["remote"] = bench_remote.write_data(directory)
    return paths


RESHARD_CASE = "reshard-tfrecord-1k"
RESHARD_PLAIN, RESHARD_SHUFFLE, RESHARD_CP = (
    "recordkit reshard",
    "recordkit reshard --shuffle",
    "cp -r of the same directory",
)


def reshard_records(settings: Settings) -> int:
    """The records of the reshard case: 1 GB of 1 KiB records in the default run, 50 MB with --quick."""
    return 5 * settings.small


def reshard_case(paths: dict[str, str], settings: Settings, written: str) -> Case:
    """A dataset of 8 TFRecord shards written again as 3, in order and shuffled, against ``cp -r``."""
    source, count = paths[RESHARD_CASE], reshard_records(settings)
    out = os.path.join(written, "reshard")
    rs = "bench_reshard"
    return Case(
        RESHARD_CASE,
        f"Reshard {count:,} x 1 KiB records, 8 TFRecord shards to 3, against cp -r of the same bytes",
        KIB,
        [
            Contender(
                RESHARD_PLAIN,
                "recordkit",
                f"{rs}:reshard",
                {"directory": source, "out": out, "shuffle": False},
                versus=RESHARD_CP,
            ),
            Contender(
                RESHARD_SHUFFLE,
                "recordkit",
                f"{rs}:reshard",
                {"directory": source, "out": out, "shuffle": True},
                versus=RESHARD_CP,
            ),
            Contender(
                RESHARD_CP,
                "recordkit",
                f"{rs}:copy",
                {"directory": source, "out": out, "count": count},
            ),
            Contender(
                "SHA-256 of the same bytes only (floor)",
                "recordkit",
                f"{rs}:sha256_floor",
                {"directory": source, "count": count},
                versus=RESHARD_CP,
            ),
        ],
    )


# The ArrayRecord write cases and their option strings (None: none given), and the read case.
AR_WRITES = {"write-arrayrecord-1k": "group_size:1,zstd:3", "write-arrayrecord-1k-defaults": None}
AR_READ = "read-arrayrecord-1k"
ARRAYRECORD_CASES = (*AR_WRITES, AR_READ)
AR_RK, AR_PEER = "recordkit write_many", "array_record ArrayRecordWriter.write"
AR_FLOOR = "HighwayHash of the chunk data only (floor)"
READERS = {
    "recordkit list(rk.open(p))": "recordkit_read",
    "ArrayRecordReader.read_all()": "array_record_read",
}


def arrayrecord_records(settings: Settings) -> int:
    """The records of the ArrayRecord cases: 100,000 x 1 KiB in the default run, 5,000 with --quick."""
    return settings.small // 2


def arrayrecord_cases(paths: dict[str, str], settings: Settings, written: str) -> list[Case]:
    """ArrayRecord writes against ArrayRecordWriter, and reads of what each wrote by each reader."""
    ar, count = "bench_arrayrecord_write", arrayrecord_records(settings)
    cases = []
    for case_id, options in AR_WRITES.items():
        kwargs = {"directory": os.path.join(written, case_id), "count": count, "size": KIB}
        kwargs["options"] = options
        shown = options or "no option string (each library's defaults)"
        cases.append(
            Case(
                case_id,
                f"ArrayRecord write, {count:,} x 1 KiB, {shown}",
                KIB,
                [
                    Contender(AR_RK, "recordkit", f"{ar}:recordkit_write", kwargs),
                    Contender(AR_PEER, "array_record", f"{ar}:array_record_write", kwargs),
                    Contender(AR_FLOOR, "recordkit", f"{ar}:hash_floor", kwargs),
                ],
            )
        )
    rows = []
    for reader, factory in READERS.items():
        family = "recordkit" if factory.startswith("recordkit") else "array_record"
        theirs = f"{reader} of array_record's file"
        path = {"path": paths.get("arrayrecord-by-recordkit")}
        rows.append(
            Contender(
                f"{reader} of recordkit's file", family, f"{ar}:{factory}", path, versus=theirs
            )
        )
        path = {"path": paths.get("arrayrecord-by-array_record")}
        rows.append(Contender(theirs, family, f"{ar}:{factory}", path))
    title = f"ArrayRecord read all, {count:,} x 1 KiB (group_size:1,zstd:3), written by recordkit and by array_record"
    return [*cases, Case(AR_READ, title, KIB, rows, fresh=True)]


def build_cases(paths: dict[str, str], settings: Settings, written: str) -> list[Case]:
    """Every timed case of the suite; the write cases write into the directory ``written``."""
    io, parse, e2e = "bench_io", "bench_parse", "bench_torch"
    cases = []
    for size, count in ((KIB, settings.small), (100 * KIB, settings.large)):
        tag = f"{size // KIB} KiB"
        tf_path = paths[f"tfrecord-{size // KIB}k"]
        cases.append(
            Case(
                f"read-tfrecord-{size // KIB}k",
                f"TFRecord sequential read, {count:,} x {tag}",
                size,
                [
                    Contender("recordkit", "recordkit", f"{io}:recordkit_read", {"path": tf_path}),
                    Contender(
                        "recordkit check_crc=False",
                        "recordkit",
                        f"{io}:recordkit_read",
                        {"path": tf_path, "check_crc": False},
                    ),
                    Contender(
                        "recordkit zero_copy=True",
                        "recordkit",
                        f"{io}:recordkit_read",
                        {"path": tf_path, "zero_copy": True},
                    ),
                    Contender(
                        "TF tf_record_iterator",
                        "tensorflow",
                        f"{io}:tf_record_iterator",
                        {"path": tf_path},
                    ),
                    Contender(
                        f"TF tf.data eager loop (first {min(count, settings.tf_data_limit):,})",
                        "tensorflow",
                        f"{io}:tf_data_loop",
                        {"path": tf_path, "limit": settings.tf_data_limit},
                    ),
                    Contender(
                        "vahidk tfrecord_iterator (no CRC)",
                        "vahidk",
                        f"{io}:vahidk_read",
                        {"path": tf_path},
                    ),
                ],
            )
        )
        ff_path = paths[f"ffrecord-{size // KIB}k"]
        cases.append(
            Case(
                f"read-ffrecord-{size // KIB}k",
                f"FFRecord iterate, {count:,} x {tag}",
                size,
                [
                    Contender(
                        "recordkit iterate", "recordkit", f"{io}:recordkit_read", {"path": ff_path}
                    ),
                    Contender(
                        "recordkit iterate check_crc=False",
                        "recordkit",
                        f"{io}:recordkit_read",
                        {"path": ff_path, "check_crc": False},
                    ),
                    Contender(
                        "recordkit iterate zero_copy=True",
                        "recordkit",
                        f"{io}:recordkit_read",
                        {"path": ff_path, "zero_copy": True},
                    ),
                ],
            )
        )
        cases.extend(ffrecord_cases(paths, size, count, written, settings.workers))
        of_path = paths[f"ofrecord-{size // KIB}k"]
        cases.append(
            Case(
                f"read-ofrecord-{size // KIB}k",
                f"OFRecord sequential read, {count:,} x {tag}",
                size,
                [
                    Contender("recordkit", "recordkit", f"{io}:recordkit_read", {"path": of_path}),
                    Contender(
                        "bare struct loop (floor, no checks)",
                        "recordkit",
                        f"{io}:struct_loop_ofrecord",
                        {"path": of_path},
                    ),
                ],
            )
        )
    for fmt in ("tfrecord", "ofrecord"):
        path = paths[f"{fmt}-1k"]
        cases.append(
            Case(
                f"random-{fmt}-1k",
                f"{fmt[:2].upper()}{fmt[2].upper()}{fmt[3:]} random read(256), {settings.small:,} x 1 KiB (indexed)",
                KIB,
                [
                    Contender(
                        "recordkit read(256) random",
                        "recordkit",
                        f"{io}:recordkit_read_batches",
                        {"path": path, "count": settings.small, "batch": 256},
                    ),
                    Contender(
                        "recordkit open + len() (index scan)",
                        "recordkit",
                        f"{io}:recordkit_index_scan",
                        {"path": path},
                    ),
                ],
            )
        )
    for size, count in ((KIB, settings.small // 2), (100 * KIB, settings.large // 2)):
        out = os.path.join(written, f"{size // KIB}k")
        kwargs = {"directory": out, "count": count, "size": size}
        cases.append(
            Case(
                f"write-tfrecord-{size // KIB}k",
                f"TFRecord write, {count:,} x {size // KIB} KiB",
                size,
                [
                    Contender("recordkit write_many", "recordkit", f"{io}:recordkit_write", kwargs),
                    Contender("TF tf.io.TFRecordWriter", "tensorflow", f"{io}:tf_write", kwargs),
                    Contender(
                        "vahidk TFRecordWriter framing", "vahidk", f"{io}:vahidk_write", kwargs
                    ),
                ],
            )
        )
    data = {"data": paths["examples-pickle"]}
    cases.append(
        Case(
            "parse-examples",
            f"Example parse to numpy, {settings.examples:,} Examples in batches of 256",
            _mean_size(paths["examples-pickle"]),
            [
                Contender(
                    "recordkit parse_examples",
                    "recordkit",
                    f"{parse}:parse_pass",
                    {"name": "recordkit", **data},
                ),
                Contender(
                    "recordkit (wire scanner only)",
                    "recordkit",
                    f"{parse}:parse_pass",
                    {"name": "recordkit (scanner)", **data},
                ),
                Contender(
                    "TF tf.io.parse_example",
                    "tensorflow",
                    f"{parse}:parse_pass",
                    {"name": "tensorflow", **data},
                ),
                Contender(
                    "vahidk ParseFromString + extract_feature_dict",
                    "vahidk",
                    f"{parse}:parse_pass",
                    {"name": "vahidk tfrecord", **data},
                ),
            ],
        )
    )
    arrow = "bench_arrow"
    cases.append(
        Case(
            "parse-arrow",
            f"Example parse to Arrow against numpy, {settings.examples:,} Examples in batches of 1024",
            _mean_size(paths["examples-pickle"]),
            [
                Contender(
                    "parse_examples to numpy",
                    "recordkit",
                    f"{arrow}:parse_pass",
                    {"name": "numpy", **data},
                ),
                Contender(
                    "parse_examples to Arrow",
                    "recordkit",
                    f"{arrow}:parse_pass",
                    {"name": "arrow", **data},
                ),
            ],
        )
    )
    cases.append(
        Case(
            "encode-table",
            f"Table rows to Examples, {settings.examples:,} rows",
            _encoded_size(),
            [
                Contender(
                    "rk.encode_examples(table)",
                    "recordkit",
                    f"{arrow}:encode_pass",
                    {"name": "table", "count": settings.examples},
                ),
                Contender(
                    "loop of rk.encode_example",
                    "recordkit",
                    f"{arrow}:encode_pass",
                    {"name": "loop", "count": settings.examples},
                ),
            ],
        )
    )
    examples = {"path": paths["examples"]}
    cases.append(
        Case(
            "torch-epoch",
            f"PyTorch DataLoader epoch, {settings.examples:,} Examples, batches of 256, num_workers=0",
            _mean_size(paths["examples-pickle"]),
            [
                Contender(
                    "recordkit.data dataloader", "recordkit", f"{e2e}:recordkit_epoch", examples
                ),
                Contender("vahidk TFRecordDataset", "vahidk", f"{e2e}:vahidk_epoch", examples),
            ],
        )
    )
    if "pipeline-1k" in paths:
        cases.extend(pipeline_cases(paths, settings))
    if RESHARD_CASE in paths:
        cases.append(reshard_case(paths, settings, written))
    if IMAGES_CASE in paths:
        cases.append(images_case(paths[IMAGES_CASE], settings))
    if "arrayrecord-by-recordkit" in paths:
        cases.extend(arrayrecord_cases(paths, settings, written))
    if "remote" in paths:
        cases.extend(remote_cases(paths["remote"]))
    return cases


# Reading over HTTP with 10 ms added to each request (bench_remote.py): recordkit's ranged reads against
# fsspec's default file object and a whole-file download.
REMOTE_CASES = ("remote-random-1k", "remote-in-order-1k")
REMOTE_RK, REMOTE_FSSPEC, REMOTE_WHOLE = (
    "recordkit rk.open(url)",
    "rk.open(fsspec's file object)",
    "whole file fetched, then read",
)


def remote_cases(directory: str) -> list[Case]:
    """``read(256 random)`` x 8 on FFRecord and every record of a TFRecord, over HTTP at 10 ms."""
    rm, cases = "bench_remote", []
    for case_id, function, title in (
        (REMOTE_CASES[0], "random_reads", "8 x read(256 random indices), FFRecord"),
        (REMOTE_CASES[1], "in_order", "every record in order, TFRecord"),
    ):
        contenders = [
            Contender(
                name,
                "recordkit",
                f"{rm}:{function}",
                {"directory": directory, "latency": 0.01, "how": how},
            )
            for name, how in (
                (REMOTE_RK, "recordkit"),
                (REMOTE_FSSPEC, "fsspec file object"),
                (REMOTE_WHOLE, "whole file"),
            )
        ]
        title = f"Over HTTP, 10 ms a request, 40,000 x 1 KiB: {title} (bytes sent: bench_remote.py)"
        cases.append(Case(case_id, title, KIB, contenders))
    return cases


def images_loader_name(workers: int, what: str = "") -> str:
    """The name of the row of recordkit's loader over the image pipeline."""
    return f"recordkit.data.loader(the same{what}), {workers} workers"


def images_case(folder: str, settings: Settings) -> Case:
    """JPEG Examples to 224 x 224 batches: recordkit's Image spec against tf.data, fresh processes."""
    import bench_image_pipeline as bench

    im = "bench_image_pipeline"
    # recordkit's rows first (the "vs" column is the first row's rate / the row's); each also shows its
    # rate / tf.data's doing the same work.
    variants = [
        ("", {}, IMAGES_TF),
        (", antialias=False", {"antialias": False}, IMAGES_TF),
        (", crop='random', flip=True", {"crop": "random", "flip": True}, IMAGES_TF_CROP),
    ]
    rows = [
        Contender(
            IMAGES_ONE + what,
            "recordkit",
            f"{im}:recordkit_one_process",
            {"folder": folder, **options},
            versus=versus,
        )
        for what, options, versus in variants
    ]
    rows += [
        Contender(
            images_loader_name(n, what),
            "recordkit",
            f"{im}:recordkit_loader",
            {"folder": folder, "workers": n, **options},
            versus=versus,
            main_cpu=True,
        )
        for n in settings.workers
        for what, options, versus in variants
    ]
    rows += [
        Contender(IMAGES_TF, "tensorflow", f"{im}:tf_data", {"folder": folder}),
        Contender(IMAGES_TF_CROP, "tensorflow", f"{im}:tf_data", {"folder": folder, "crop": True}),
    ]
    import bench_pipeline

    return Case(
        IMAGES_CASE,
        f"Images: {min(IMAGES_COUNT, settings.small // 32):,} JPEGs of 320 x 256 in "
        f"{bench.SHARDS} TFRecord shards to RGB uint8 batches of 64 at 224 x 224",
        bench_pipeline.record_size(folder),
        rows,
        fresh=True,
    )


def pipeline_cases(paths: dict[str, str], settings: Settings) -> list[Case]:
    """Shards of Examples to batches: the plain loop, recordkit.data, tf.data and loaders, side by side."""
    import bench_pipeline

    pl = "bench_pipeline"
    small, ffr, large = (
        paths[name]
        for name in (
            bench_pipeline.SMALL_DIR,
            bench_pipeline.FFRECORD_DIR,
            bench_pipeline.LARGE_DIR,
        )
    )
    plain, perm, tf_data = PIPELINE_PLAIN, PIPELINE_PERMUTATION, PIPELINE_TF_DATA
    rows = [
        Contender(plain, "recordkit", f"{pl}:plain_loop", {"directory": small}),
        Contender(
            "Dataset.batch(256).map(parse)",
            "recordkit",
            f"{pl}:dataset",
            {"directory": small},
            versus=plain,
        ),
        Contender(
            PIPELINE_BUFFER,
            "recordkit",
            f"{pl}:dataset",
            {"directory": small, "buffer": 1024},
            versus=plain,
        ),
        Contender(perm, "recordkit", f"{pl}:plain_permutation", {"directory": small}),
        Contender(
            PIPELINE_GLOBAL,
            "recordkit",
            f"{pl}:dataset",
            {"directory": small, "global_shuffle": True},
            versus=perm,
        ),
        Contender(tf_data, "tensorflow", f"{pl}:tf_data", {"directory": small}),
    ]
    for n in settings.workers:
        on = {"directory": small, "workers": n}
        rows += [
            Contender(
                pipeline_loader_name("torch", n),
                "recordkit",
                f"{pl}:rk_dataloader",
                on,
                versus=tf_data,
                main_cpu=True,
            ),
            Contender(
                pipeline_loader_name("numpy", n),
                "recordkit",
                f"{pl}:rk_dataloader",
                {**on, "to": "numpy"},
                versus=tf_data,
                main_cpu=True,
            ),
            Contender(
                pipeline_loader_name("loader", n),
                "recordkit",
                f"{pl}:rk_loader",
                on,
                versus=tf_data,
                main_cpu=True,
            ),
            Contender(
                f"torch DataLoader(torch_dataset(ds)), {n} workers",
                "recordkit",
                f"{pl}:torch_own",
                on,
                versus=tf_data,
                main_cpu=True,
            ),
            Contender(
                f"torch DataLoader(plain IterableDataset), {n} workers",
                "recordkit",
                f"{pl}:torch_plain",
                on,
                main_cpu=True,
            ),
            Contender(
                f"torch ceiling: ready-made tensors, {n} workers",
                "recordkit",
                f"{pl}:torch_ceiling",
                on,
                main_cpu=True,
            ),
        ]
    rows.append(
        Contender(
            "FFRecord plain read(permutation) + parse",
            "recordkit",
            f"{pl}:plain_permutation",
            {"directory": ffr},
        )
    )
    rows += [
        Contender(
            f"FFRecord dataloader(MapDataset), shuffle, {n} workers",
            "recordkit",
            f"{pl}:ffrecord_loader",
            {"directory": ffr, "workers": n},
            main_cpu=True,
        )
        for n in settings.workers
    ]
    raw = {"batch": 16, "parsed": False}
    big = [
        Contender(
            "plain loop: rk.open, batches of 16",
            "recordkit",
            f"{pl}:plain_loop",
            {"directory": large, **raw},
        ),
        Contender(
            "Dataset.shuffle(1024).batch(16)",
            "recordkit",
            f"{pl}:dataset",
            {"directory": large, "buffer": 1024, **raw},
            versus="plain loop: rk.open, batches of 16",
        ),
    ]
    large_loaders = (
        ("dataloader({})", "rk_dataloader"),
        ("torch DataLoader(torch_dataset({}))", "torch_own"),
        ("recordkit.data.loader({})", "rk_loader"),
    )
    for n in settings.workers:
        big += [
            Contender(
                f"{name.format('Dataset.shuffle(1024).batch(16)')}, {n} workers",
                "recordkit",
                f"{pl}:{factory}",
                {"directory": large, "workers": n, **raw},
                main_cpu=True,
            )
            for name, factory in large_loaders
        ]
    mnist = paths[READ_PARSE_CASE]
    one_file = [
        Contender(READ_PARSE_PLAIN, "recordkit", f"{pl}:read_parse_plain", {"path": mnist}),
        Contender(
            "Dataset(p).batch(256).map(parse)",
            "recordkit",
            f"{pl}:read_parse_dataset",
            {"path": mnist},
            versus=READ_PARSE_TF,
        ),
        Contender(READ_PARSE_TF, "tensorflow", f"{pl}:read_parse_tf", {"path": mnist}),
    ]
    return [
        Case(
            READ_PARSE_CASE,
            f"One process: read + parse {settings.small // 2:,} Examples (int64 label, 784 float32, "
            "32-byte raw) from one TFRecord file, batches of 256",
            bench_pipeline.record_size(os.path.dirname(mnist), mnist),
            one_file,
            baseline="plain loop",
            fresh=True,
        ),
        Case(
            "pipeline-1k",
            f"Pipeline: {settings.small:,} Examples of 1 KiB in {bench_pipeline.SHARDS} TFRecord shards "
            "(and an FFRecord copy) to parsed numpy batches of 256; ds = Dataset(files).shuffle(1024)"
            ".batch(256).map(parse)",
            bench_pipeline.record_size(small),
            rows,
            baseline="plain loop",
            fresh=True,
        ),
        Case(
            "pipeline-100k",
            f"Pipeline: {settings.large:,} Examples of 100 KiB (a bytes feature) in "
            f"{bench_pipeline.SHARDS} TFRecord shards, raw batches of 16",
            bench_pipeline.record_size(large),
            big,
            baseline="plain loop",
            fresh=True,
        ),
    ]


PIPELINE_PLAIN = "plain loop: rk.open, batches of 256, parse"
PIPELINE_BUFFER = "Dataset.shuffle(1024).batch(256).map(parse)"
PIPELINE_PERMUTATION = "plain read(permutation[i:i+256]) + parse"
PIPELINE_GLOBAL = "Dataset.shuffle().batch(256).map(parse) (global)"
PIPELINE_TF_DATA = "tf.data interleave, shuffle(1024), batch, parse_example"


def pipeline_loader_name(kind: str, workers: int) -> str:
    """The row name of a recordkit loader over ``ds`` (``kind``: "torch", "numpy" or "loader")."""
    if kind == "loader":
        return f"recordkit.data.loader(ds), {workers} workers"
    return f"dataloader(ds, to={kind!r}), {workers} workers"


def ffrecord_cases(
    paths: dict[str, str], size: int, count: int, written: str, workers: list[int]
) -> list[Case]:
    """FFRecord against the C++ reference: batched reads, writes and DataLoaders, ratios per row."""
    ff, tag, path = "bench_ffrecord", f"{size // KIB} KiB", paths[f"ffrecord-{size // KIB}k"]
    apis = ("rk.open", "recordkit.compat.ffrecord", "rk.open zero_copy", "ffrecord C++")
    loops = (("random", "keep"), ("random", "drop"), ("in order", "keep"))
    reads = [
        Contender(
            f"{api} read(256) {order}, {loop}",
            "ffrecord-cpp" if api == "ffrecord C++" else "recordkit",
            f"{ff}:read_batches",
            {"api": api, "path": path, "count": count, "order": order.split()[-1], "loop": loop},
            versus=None if api == "ffrecord C++" else f"ffrecord C++ read(256) {order}, {loop}",
        )
        for order, loop in loops
        for api in apis
    ]
    cases = [
        Case(
            f"ffrecord-read-{size // KIB}k",
            f"FFRecord read(256), check on, {count:,} x {tag}, against the C++ ffrecord",
            size,
            reads,
            fresh=True,
        )
    ]
    written_count = count // 2
    out = os.path.join(written, f"ffr-{size // KIB}k")
    writes = [
        Contender(
            name,
            "ffrecord-cpp" if api == "ffrecord C++" else "recordkit",
            f"{ff}:write",
            {"api": api, "directory": out, "count": written_count, "size": size},
            versus=None if api == "ffrecord C++" else "ffrecord C++ FileWriter (n given)",
        )
        for name, api in (
            ("rk.open(path, 'w') (no n)", "rk.open (no n)"),
            ("recordkit.compat.ffrecord FileWriter (n given)", "recordkit.compat.ffrecord"),
            ("ffrecord C++ FileWriter (n given)", "ffrecord C++"),
        )
    ]
    cases.append(
        Case(
            f"ffrecord-write-{size // KIB}k",
            f"FFRecord write, {written_count:,} x {tag}",
            size,
            writes,
        )
    )
    loaders = []
    for n in workers:
        loaders.append(
            Contender(
                f"recordkit dataloader(MapDataset), {n} workers",
                "recordkit",
                f"{ff}:dataloader_epoch",
                {"api": "recordkit", "path": path, "workers": n},
                versus=f"ffrecord C++ DataLoader, {n} workers",
            )
        )
        loaders.append(
            Contender(
                f"ffrecord C++ DataLoader, {n} workers",
                "ffrecord-cpp",
                f"{ff}:dataloader_epoch",
                {"api": "ffrecord C++", "path": path, "workers": n},
            )
        )
    cases.append(
        Case(
            f"ffrecord-loader-{size // KIB}k",
            f"FFRecord DataLoader epoch, shuffled, batches of 256 as uint8 tensors, persistent workers, "
            f"{count:,} x {tag}",
            size,
            loaders,
        )
    )
    return cases


def _encoded_size() -> int:
    import bench_arrow

    records = bench_arrow.make_records(100)
    return round(sum(map(len, records)) / len(records))


def _mean_size(pickled: str) -> int:
    import pickle

    with open(pickled, "rb") as f:
        records = pickle.load(f)
    return round(sum(map(len, records)) / len(records))


def run_case(
    case: Case, workers: dict[str, Worker], repeat: int, passes: int = FRESH_PASSES
) -> None:
    """Prepare, warm up and time every contender of ``case`` in turns; fill ``contender.result``.

    A ``fresh`` case starts a new worker process for each contender in each round, which prepares, warms
    up, times ``passes`` passes (the fastest is the round's sample), then ends: no contender
    runs beside another's threads, worker processes or memory, and none inherits the state of the cases
    before it.
    """
    if case.fresh:
        _run_fresh(case, repeat, passes)
    else:
        _run_shared(case, workers, repeat)
    _summarise(case)


def _prepare(worker: Worker, case: Case, contender: Contender) -> bool:
    """Prepare ``contender`` in ``worker``; on a skip, record why. Whether it can be timed."""
    answer = worker.ask(
        op="prepare",
        key=case.id + "/" + contender.name,
        factory=contender.factory,
        kwargs=contender.kwargs,
    )
    if answer["status"] != "ok":
        contender.result = {"status": "skipped", "reason": answer["reason"]}
        return False
    if not contender.result:
        contender.result = {"status": "ok", "seconds": [], "records": None}
        if contender.main_cpu:
            contender.result["cpu_seconds"] = []
    return True


def _time(worker: Worker, case: Case, contender: Contender, passes: int = 1) -> None:
    """Time ``passes`` passes in a row; the fastest is the round's sample (with its CPU time)."""
    answers = [
        worker.ask(op="time", key=case.id + "/" + contender.name, cpu=contender.main_cpu)
        for _ in range(passes)
    ]
    answer = min(answers, key=lambda timed: timed["seconds"])
    contender.result["seconds"].append(answer["seconds"])
    contender.result["records"] = answer["records"]
    if "cpu_seconds" in answer:
        contender.result["cpu_seconds"].append(answer["cpu_seconds"])


def _run_fresh(case: Case, repeat: int, passes: int) -> None:
    for contender in case.contenders:
        contender.result = {}
    for _ in range(repeat):
        for contender in case.contenders:
            if contender.result.get("status") == "skipped":
                continue
            process = Worker(contender.family)
            try:
                process.start()
                if _prepare(process, case, contender):
                    _time(process, case, contender, passes=passes)
            finally:
                process.close()


def _run_shared(case: Case, workers: dict[str, Worker], repeat: int) -> None:
    for contender in case.contenders:
        contender.result = {}
    timed = [c for c in case.contenders if _prepare(workers[c.family], case, c)]
    for _ in range(repeat):
        for contender in timed:
            _time(workers[contender.family], case, contender)
    for contender in timed:
        workers[contender.family].ask(op="drop", key=case.id + "/" + contender.name)


def _summarise(case: Case) -> None:
    """Medians, rates and ratios of a case whose passes were timed."""
    for contender in case.contenders:
        if contender.result.get("status") != "ok":
            continue
        seconds = statistics.median(contender.result["seconds"])
        records = contender.result["records"]
        contender.result.update(
            median_seconds=seconds,
            records_per_s=records / seconds,
            bytes_per_s=records * case.record_bytes / seconds,
        )
        if contender.result.get("cpu_seconds"):
            contender.result["main_cpu_us_per_record"] = (
                statistics.median(contender.result["cpu_seconds"]) / records * 1e6
            )
    by_name = {c.name: c.result for c in case.contenders}
    for contender in case.contenders:
        peer = by_name.get(contender.versus or "", {})
        if contender.result.get("status") == "ok" and peer.get("status") == "ok":
            contender.result["versus_ratio"] = (
                contender.result["records_per_s"] / peer["records_per_s"]
            )
    ours = case.contenders[0].result
    for contender in case.contenders:
        if contender.result.get("status") == "ok" and ours.get("status") == "ok":
            contender.result["recordkit_ratio"] = (
                ours["records_per_s"] / contender.result["records_per_s"]
            )


def print_case(case: Case) -> None:
    """Print one case as a table."""
    width = max(46, *(len(contender.name) for contender in case.contenders))
    cpu = any(contender.main_cpu for contender in case.contenders)
    print(f"\n{case.title} (payload {case.record_bytes:,} B)")
    print(
        f"  {'contender':{width}s} {'records/s':>12s} {'MB/s':>9s} {'vs ' + case.baseline:>13s}"
        + (f" {'main CPU µs/rec':>16s}" if cpu else "")
    )
    for contender in case.contenders:
        result = contender.result
        if result["status"] != "ok":
            print(f"  {contender.name:{width}s} skipped: {result['reason']}")
            continue
        ratio = result.get("recordkit_ratio")
        shown = f"{ratio:12.2f}x" if ratio is not None else ""
        per_record = result.get("main_cpu_us_per_record")
        main = f"{per_record:16.2f}" if per_record is not None else ""
        versus = result.get("versus_ratio")
        against = f"  {versus:.2f}x {contender.versus}" if versus is not None else ""
        print(
            f"  {contender.name:{width}s} {result['records_per_s']:12,.0f} "
            f"{result['bytes_per_s'] / 1e6:9,.0f} {shown:>13s}"
            + (f" {main:>16s}" if cpu else "")
            + against
        )


def _rate(
    cases: dict[str, Case], case_id: str, name_start: str, key: str = "records_per_s"
) -> float | None:
    case = cases.get(case_id)
    if case is None:
        return None
    for contender in case.contenders:
        if contender.name.startswith(name_start) and contender.result.get("status") == "ok":
            value: float = contender.result[key]
            return value
    return None


def evaluate_targets(cases: list[Case], memory: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Compare the measurements with the project's speed and memory targets."""
    by_id = {case.id: case for case in cases}
    targets: list[dict[str, Any]] = []

    def ratio_target(label: str, case_id: str, ours: str, peer: str, goal: float) -> None:
        a, b = _rate(by_id, case_id, ours), _rate(by_id, case_id, peer)
        value = a / b if a is not None and b is not None else None
        targets.append(
            {
                "target": label,
                "goal": goal,
                "measured": value,
                "unit": "x",
                "at_most": False,
                "case": case_id,
            }
        )

    def absolute_target(
        label: str, value: float | None, goal: float, unit: str, case: str, at_most: bool = False
    ) -> None:
        targets.append(
            {
                "target": label,
                "goal": goal,
                "measured": value,
                "unit": unit,
                "at_most": at_most,
                "case": case,
            }
        )

    ratio_target(
        "TFRecord read 1 KiB with CRC vs TF tf_record_iterator",
        "read-tfrecord-1k",
        "recordkit",
        "TF tf_record_iterator",
        1.5,
    )
    large = _rate(by_id, "read-tfrecord-100k", "recordkit zero_copy=True", "bytes_per_s")
    absolute_target(
        "TFRecord read 100 KiB with CRC, zero_copy=True",
        None if large is None else large / 1e9,
        5.0,
        "GB/s",
        "read-tfrecord-100k",
    )
    for size in (KIB, 100 * KIB):
        case_id = f"ffrecord-read-{size // KIB}k"
        for api in ("rk.open", "recordkit.compat.ffrecord"):
            for loop in ("keep", "drop"):
                ratio_target(
                    f"FFRecord {api} read(256) {size // KIB} KiB random, {loop}, vs C++",
                    case_id,
                    f"{api} read(256) random, {loop}",
                    f"ffrecord C++ read(256) random, {loop}",
                    1.3,
                )
        ratio_target(
            f"FFRecord write {size // KIB} KiB without n vs C++ (with n)",
            f"ffrecord-write-{size // KIB}k",
            "rk.open",
            "ffrecord C++",
            1.0,
        )
        loader_id = f"ffrecord-loader-{size // KIB}k"
        loader = by_id.get(loader_id)
        for contender in loader.contenders if loader else []:
            if contender.versus:
                ratio_target(
                    f"FFRecord {size // KIB} KiB {contender.name.split(', ')[-1]}, DataLoader vs C++",
                    loader_id,
                    contender.name,
                    contender.versus,
                    1.0,
                )
        one, eight = (
            _rate(by_id, loader_id, f"recordkit dataloader(MapDataset), {n} workers")
            for n in (1, 8)
        )
        absolute_target(
            f"FFRecord {size // KIB} KiB DataLoader, 8 workers over 1 (--workers 1 8)",
            None if one is None or eight is None else eight / one,
            6.0,
            "x",
            loader_id,
        )
    ratio_target("TFRecord write 1 KiB vs TF", "write-tfrecord-1k", "recordkit", "TF", 1.2)
    ratio_target("TFRecord write 100 KiB vs TF", "write-tfrecord-100k", "recordkit", "TF", 1.2)
    ratio_target(
        "Example parse vs TF parse_example", "parse-examples", "recordkit parse_examples", "TF", 1.0
    )
    worst = max((row["held_bytes_per_record"] for row in memory), default=None)
    absolute_target(
        "random-access reader memory held (worst format)",
        worst,
        16.0,
        "bytes/record",
        "memory",
        at_most=True,
    )
    ratio_target(
        "pipeline: Dataset.shuffle(1024) vs the plain loop",
        "pipeline-1k",
        PIPELINE_BUFFER,
        PIPELINE_PLAIN,
        1.0,
    )
    ratio_target(
        "one process: Dataset(p).batch(256).map(parse) vs tf.data",
        READ_PARSE_CASE,
        "Dataset(p).batch(256).map(parse)",
        READ_PARSE_TF,
        1.0,
    )
    ratio_target(
        "one process: plain loop vs tf.data", READ_PARSE_CASE, READ_PARSE_PLAIN, READ_PARSE_TF, 1.0
    )
    ratio_target(
        "images: one process, default settings, vs tf.data",
        IMAGES_CASE,
        IMAGES_ONE,
        IMAGES_TF,
        0.9,
    )
    images = by_id.get(IMAGES_CASE)
    for contender in images.contenders if images else []:
        if contender.factory.endswith(":recordkit_loader") and len(contender.kwargs) == 2:
            ratio_target(
                f"images: {contender.name} vs tf.data", IMAGES_CASE, contender.name, IMAGES_TF, 1.3
            )
    ratio_target(
        "ArrayRecord read all, default settings: list(rk.open(p)) vs ArrayRecordReader",
        AR_READ,
        "recordkit list(rk.open(p)) of array_record's file",
        "ArrayRecordReader.read_all() of array_record's file",
        0.7,
    )
    ratio_target(
        "pipeline: global Dataset.shuffle() vs plain read(permutation)",
        "pipeline-1k",
        PIPELINE_GLOBAL,
        PIPELINE_PERMUTATION,
        0.9,
    )
    ratio_target("reshard in order vs cp -r", RESHARD_CASE, RESHARD_PLAIN, RESHARD_CP, 0.5)
    for case_id in REMOTE_CASES:
        ratio_target(
            f"{case_id}: rk.open(url) vs fsspec's file object",
            case_id,
            REMOTE_RK,
            REMOTE_FSSPEC,
            1.0,
        )
    for case_id, options in AR_WRITES.items():
        label = f"ArrayRecord write vs ArrayRecordWriter, {options or 'defaults'}"
        ratio_target(label, case_id, AR_RK, AR_PEER, 0.8)
    for reader in READERS:
        label = f"{reader}: reading recordkit-written vs array_record-written"
        ours, theirs = f"{reader} of recordkit's file", f"{reader} of array_record's file"
        ratio_target(label, AR_READ, ours, theirs, 0.95)
    pipeline = by_id.get("pipeline-1k")
    for contender in pipeline.contenders if pipeline else []:
        if contender.versus == PIPELINE_TF_DATA and _is_recordkit_loader(contender):
            ratio_target(
                f"pipeline: {contender.name} vs tf.data",
                "pipeline-1k",
                contender.name,
                PIPELINE_TF_DATA,
                1.3,
            )
        if contender.factory.endswith(":ffrecord_loader"):
            workers = contender.kwargs["workers"]
            ratio_target(
                f"pipeline: {contender.name} vs dataloader(Dataset)",
                "pipeline-1k",
                contender.name,
                pipeline_loader_name("torch", workers),
                0.9,
            )
    # The transport's own cost: recordkit's loaders over 1 KiB batches. For 100 KiB raw records the main
    # process copies each record into a bytes object, so there the goal is to be no slower than torch's
    # own DataLoader over the same pipeline (the path dataloader() took before).
    for contender in pipeline.contenders if pipeline else []:
        map_style = contender.factory.endswith(":ffrecord_loader")
        if contender.main_cpu and (_is_recordkit_loader(contender) or map_style):
            absolute_target(
                f"main CPU per record, 1 KiB: {contender.name}",
                contender.result.get("main_cpu_us_per_record"),
                0.5 if map_style else 0.3,
                "µs",
                "pipeline-1k",
                at_most=True,
            )
    large = by_id.get("pipeline-100k")
    contenders = large.contenders if large else []
    torch_own = {
        c.kwargs["workers"]: c.name for c in contenders if c.factory.endswith(":torch_own")
    }
    for contender in contenders:
        peer = torch_own.get(contender.kwargs.get("workers"))
        if _is_recordkit_loader(contender) and peer is not None:
            ratio_target(
                f"pipeline 100 KiB: {contender.name} vs torch's DataLoader",
                "pipeline-100k",
                contender.name,
                peer,
                1.0,
            )
    for target in targets:
        value = target["measured"]
        if value is None:
            target["met"] = None
        else:
            target["met"] = (
                value <= target["goal"] if target.get("at_most") else value >= target["goal"]
            )
    return targets


def _is_recordkit_loader(contender: Contender) -> bool:
    """Whether the contender is one of recordkit's worker loaders (``dataloader`` or ``loader``)."""
    return contender.factory.endswith((":rk_dataloader", ":rk_loader"))


def measure_memory(paths: dict[str, str], count: int) -> list[dict[str, Any]]:
    """Measure each format's random-access reader in a fresh process."""
    rows = []
    for fmt in ("tfrecord", "ffrecord", "ofrecord"):
        output = subprocess.run(
            [sys.executable, __file__, "--memory", paths[f"{fmt}-tiny"], "--count", str(count)],
            check=True,
            capture_output=True,
            text=True,
        ).stdout
        rows.append({"format": fmt, **json.loads(output)})
    return rows


def machine() -> dict[str, Any]:
    """Describe the machine the figures come from."""
    described: dict[str, Any] = {
        "platform": platform.platform(),
        "python": sys.version.split()[0],
        "cpus": os.cpu_count(),
    }
    try:
        with open("/proc/cpuinfo") as f:
            described["cpu"] = next(
                line.split(":", 1)[1].strip() for line in f if line.startswith("model name")
            )
    except (OSError, StopIteration):
        described["cpu"] = platform.processor()
    if hasattr(os, "getloadavg"):
        described["load_average_at_start"] = os.getloadavg()
    return described


def main(argv: list[str] | None = None) -> int:
    """Run the suite (or serve as a worker)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--quick", action="store_true", help="tiny data and 3 repetitions (smoke run)"
    )
    parser.add_argument(
        "--full", action="store_true", help="measure reader memory over 10M records"
    )
    parser.add_argument("--repeat", type=int, help="timed repetitions per contender (default 5)")
    parser.add_argument(
        "--only", action="append", help="run the cases whose id contains this (repeatable)"
    )
    parser.add_argument("--json", help="write the report to this file")
    parser.add_argument(
        "--workers",
        type=int,
        nargs="+",
        help="DataLoader worker counts of the FFRecord and pipeline rows (default 2)",
    )
    parser.add_argument(
        "--ffrecord-src", help="build the C++ ffrecord from this checkout (no network)"
    )
    parser.add_argument(
        "--no-build",
        action="store_true",
        help="use the C++ ffrecord only if already built or installed",
    )
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    parser.add_argument("--memory", help=argparse.SUPPRESS)
    parser.add_argument("--count", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        worker(args.worker)
        return 0
    if args.memory:
        memory_worker(args.memory, args.count)
        return 0
    sys.stdout.reconfigure(line_buffering=True)  # type: ignore[union-attr]
    settings = settings_for(args)
    started = time.perf_counter()
    sys.path.insert(0, HERE)
    import reference_ffrecord

    where, note = reference_ffrecord.build(args.ffrecord_src, build=not args.no_build)
    print("C++ ffrecord:", note)
    if where:
        FAMILIES["ffrecord-cpp"]["PYTHONPATH"] = os.pathsep.join(
            filter(None, [where, os.environ.get("PYTHONPATH")])
        )
    workers = {
        family: Worker(family) for family in FAMILIES
    }  # they import while the data are written
    # Writes go to memory (tmpfs) where there is one: on a disk, the kernel's write-back throttling
    # decides the wall time of every writer alike and hides what the libraries themselves cost.
    memory_fs = "/dev/shm" if os.path.isdir("/dev/shm") and os.access("/dev/shm", os.W_OK) else None
    with (
        tempfile.TemporaryDirectory(prefix="recordkit-bench-") as directory,
        tempfile.TemporaryDirectory(prefix="recordkit-bench-", dir=memory_fs) as written,
    ):
        paths = make_data(directory, settings, args.only)
        for process in workers.values():
            process.start()
        versions = {family: w.versions for family, w in workers.items()}
        print(
            "recordkit benchmark suite: medians of",
            settings.repeat,
            "rounds; contenders take turns",
        )
        print("machine:", json.dumps(machine()))
        print("versions:", json.dumps(versions))
        print("writes go to:", written)
        cases = build_cases(paths, settings, written)
        if args.only:
            cases = [case for case in cases if any(part in case.id for part in args.only)]
        try:
            for case in cases:
                run_case(case, workers, settings.repeat, 1 if args.quick else FRESH_PASSES)
                print_case(case)
        finally:
            for process in workers.values():
                process.close()
        memory = []
        if not args.only or any("memory" in part for part in args.only):
            memory = measure_memory(paths, settings.memory)
            print(
                f"\nRandom-access reader memory over {settings.memory:,} records (tracemalloc, Python heap)"
            )
            for row in memory:
                print(
                    f"  {row['format']:10s} held {row['held_bytes_per_record']:6.2f} B/record, "
                    f"peak while opening {row['peak_bytes_per_record']:6.2f} B/record"
                )
    targets = evaluate_targets(cases, memory)
    # The report keeps every target; the printout those of the cases that --only selected.
    shown_targets = [
        target
        for target in targets
        if not args.only or any(part in target["case"] for part in args.only)
    ]
    print(
        "\nTargets" + (" (--quick: tiny data, so these verdicts say nothing)" if args.quick else "")
    )
    width = max([58, *(len(target["target"]) for target in shown_targets)])
    for target in shown_targets:
        value = target["measured"]
        shown = "n/a" if value is None else f"{value:.2f} {target['unit']}"
        verdict = {True: "met", False: "NOT met", None: "not measured"}[target["met"]]
        sign = "<=" if target.get("at_most") else ">="
        print(
            f"  {target['target']:{width}s} {shown:>18s}  (goal {sign} {target['goal']}) {verdict}"
        )
    elapsed = time.perf_counter() - started
    print(f"\ntotal time {elapsed:.0f} s")
    if args.json:
        report = {
            "command": " ".join(
                [os.path.relpath(__file__), *(argv if argv is not None else sys.argv[1:])]
            ),
            "machine": machine(),
            "versions": versions,
            "settings": vars(settings),
            "cases": [
                {
                    "id": case.id,
                    "title": case.title,
                    "record_bytes": case.record_bytes,
                    "results": [
                        {"contender": c.name, "family": c.family, **c.result}
                        for c in case.contenders
                    ],
                }
                for case in cases
            ],
            "memory": memory,
            "targets": targets,
            "seconds": elapsed,
        }
        with open(args.json, "w") as f:
            json.dump(report, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
