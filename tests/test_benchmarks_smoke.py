"""The benchmark suite runs end to end in --quick mode and writes a well-formed JSON report.

No timing is asserted: only that every case ran (or reported its peer as skipped) and that the report holds
what the documentation says it holds.
"""

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest

RUN = Path(__file__).parent / "benchmarks" / "run.py"

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    out = tmp_path_factory.mktemp("bench") / "report.json"
    completed = subprocess.run(
        [sys.executable, str(RUN), "--quick", "--no-build", "--repeat", "2", "--json", str(out)],
        check=False,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert completed.returncode == 0, completed.stderr
    return json.loads(out.read_text()), completed.stdout


def test_report_describes_the_run(report):
    data, _ = report
    assert data["command"].endswith(
        "--quick --no-build --repeat 2 --json " + data["command"].split()[-1]
    )
    assert {"platform", "python", "cpus", "cpu"} <= data["machine"].keys()
    assert data["versions"]["recordkit"]["crc32c backend"]
    assert data["settings"]["repeat"] == 2


def test_every_case_measures_recordkit_and_reports_each_peer(report):
    data, stdout = report
    ids = {case["id"] for case in data["cases"]}
    expected = {"parse-examples", "torch-epoch"}
    for fmt in ("tfrecord", "ffrecord", "ofrecord"):
        expected |= {f"read-{fmt}-1k", f"read-{fmt}-100k"}
    expected |= {
        "random-tfrecord-1k",
        "random-ofrecord-1k",
        "write-tfrecord-1k",
        "write-tfrecord-100k",
        "reshard-tfrecord-1k",
        "write-arrayrecord-1k",
        "write-arrayrecord-1k-defaults",
        "read-arrayrecord-1k",
        "pipeline-read-parse",
        "images-jpeg",
    }
    for size in ("1k", "100k"):
        expected |= {f"ffrecord-read-{size}", f"ffrecord-write-{size}", f"ffrecord-loader-{size}"}
        expected.add(f"pipeline-{size}")
    assert expected <= ids
    for case in data["cases"]:
        assert case["title"] in stdout
        first = case["results"][0]
        assert first["family"] == "recordkit"
        for result in case["results"]:
            if first["status"] == "ok" and result["status"] == "ok":
                assert len(result["seconds"]) == 2
                assert result["records_per_s"] > 0
                assert result["bytes_per_s"] == pytest.approx(
                    result["records_per_s"] * case["record_bytes"]
                )
                expected_ratio = first["records_per_s"] / result["records_per_s"]
                assert result["recordkit_ratio"] == pytest.approx(expected_ratio)
            else:
                assert result["status"] == "skipped"
                assert result["reason"]
        if case["id"] == "torch-epoch" and first["status"] == "ok":
            assert first["records"] == data["settings"]["examples"]


def test_pipeline_rows_deliver_every_record_and_loader_rows_their_main_cpu(report):
    data, stdout = report
    cases = {case["id"]: case for case in data["cases"]}
    counts = {"pipeline-1k": data["settings"]["small"], "pipeline-100k": data["settings"]["large"]}
    loaders = 0
    for case_id, count in counts.items():
        for result in cases[case_id]["results"]:
            if result["contender"].startswith("recordkit.data.loader("):
                assert result["status"] == "ok", result  # needs nothing but numpy
            if result["status"] != "ok":
                continue
            assert result["records"] == count, result["contender"]
            if "workers" in result["contender"]:
                loaders += 1
                assert len(result["cpu_seconds"]) == 2
                assert result["main_cpu_us_per_record"] == pytest.approx(
                    sum(result["cpu_seconds"]) / 2 / count * 1e6  # the median of two samples
                )
            else:
                assert "cpu_seconds" not in result
    if importlib.util.find_spec("torch") is not None:
        assert loaders >= 5
        assert "main CPU µs/rec" in stdout
    names = {target["target"] for target in data["targets"]}
    assert "pipeline: Dataset.shuffle(1024) vs the plain loop" in names
    assert "pipeline: global Dataset.shuffle() vs plain read(permutation)" in names
    assert any(name.startswith("main CPU per record, 1 KiB: ") for name in names)


def test_peers_run_in_their_own_processes(report):
    data, _ = report
    families = {r["family"] for case in data["cases"] for r in case["results"]}
    assert {"recordkit", "tensorflow", "vahidk"} <= families
    for family in ("tensorflow", "vahidk"):
        installed = family in data["versions"] and data["versions"][family]
        statuses = {
            r["status"] for case in data["cases"] for r in case["results"] if r["family"] == family
        }
        assert statuses == ({"ok"} if installed else {"skipped"})


def test_memory_and_targets(report):
    data, _ = report
    assert [row["format"] for row in data["memory"]] == ["tfrecord", "ffrecord", "ofrecord"]
    for row in data["memory"]:
        assert row["records"] == data["settings"]["memory"]
        assert row["held_bytes_per_record"] == pytest.approx(row["held_bytes"] / row["records"])
        assert row["peak_bytes"] >= row["held_bytes"] > 0
    for target in data["targets"]:
        assert {"target", "goal", "measured", "unit", "met"} <= target.keys()
        if target["measured"] is not None:
            assert target["met"] == (
                target["measured"] <= target["goal"]
                if target["at_most"]
                else target["measured"] >= target["goal"]
            )


@pytest.mark.slow
@pytest.mark.ray
def test_ray_scaling_benchmark_runs(tmp_path):
    """bench_ray_scaling.py --quick: a table per size, and the JSON samples."""
    pytest.importorskip("ray")
    script = Path(__file__).parent / "benchmarks" / "bench_ray_scaling.py"
    out = tmp_path / "scaling.json"
    proc = subprocess.run(
        [sys.executable, str(script), "--quick", "--workers", "1", "--json", str(out)],
        capture_output=True, text=True, timeout=600, check=False,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert "read_records" in proc.stdout
    samples = json.loads(out.read_text())
    assert set(samples["1"]) == {"1 KiB", "100 KiB"}


def test_tensorboard_benchmark_compares_values_and_prints_both_ratios():
    """bench_tensorboard.py at a small size: the three readers agree, and both targets are printed."""
    pytest.importorskip("pandas")
    script = RUN.parent / "bench_tensorboard.py"
    completed = subprocess.run(
        [sys.executable, str(script), "--scalars", "2000", "--repeat", "1"],
        check=False, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert completed.returncode == 0, completed.stdout[-2000:] + completed.stderr[-2000:]
    assert "values: equal across recordkit" in completed.stdout
    for peer, module in (("tbparse", "tbparse"), ("EventAccumulator", "tensorboard")):
        if importlib.util.find_spec(module) is not None:
            assert "target: >= " in completed.stdout
            assert f"x {peer}: " in completed.stdout
        else:
            assert f"{peer} skipped: " in completed.stdout


def test_floors_prints_each_part_with_its_peer_or_why_it_is_skipped():
    completed = subprocess.run(
        [
            sys.executable,
            str(RUN.parent / "floors.py"),
            "--no-build",
            "--count",
            "3000",
            "--rounds",
            "1",
        ],
        check=False,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert completed.returncode == 0, completed.stderr
    # Every part runs recordkit and its floors, which need no peer; a missing peer says why.
    sections = dict(section.split(":", 1) for section in completed.stdout.split("\n== ")[1:])
    peers = {
        "ffrecord": "ffrecord C++ read(256)",
        "ffrecord-write": "ffrecord C++ FileWriter (n given)",
        "tfrecord": "tf_record_iterator",
    }
    assert sections.keys() == peers.keys()
    for part, peer in peers.items():
        rows = sections[part].splitlines()
        skipped = [row for row in rows if row.startswith(f"{peer} skipped: ")]
        measured = [row for row in rows if row.startswith(f"{peer} ") and row.endswith("1.00x")]
        assert len(skipped) + len(measured) == 1, sections[part]
        if part == "tfrecord":
            assert bool(measured) == (importlib.util.find_spec("tensorflow") is not None)
        assert [row for row in rows if row.startswith("floor: ")], sections[part]
        assert [row for row in rows if row.startswith("rk.open")], sections[part]
