"""Build HFAiLab's C++ ffrecord, the FFRecord reference, for the benchmark suite (an optional step).

The reference is not on PyPI. This module builds it from its public source, pinned to one commit, into a
cache directory of its own (nothing is installed into the running environment), and tells the suite the
directory to put on the ``PYTHONPATH`` of the reference's worker process. When something it needs is missing
(git or a source checkout, cmake, a C++ compiler, libaio's header, pybind11), it says which, and the suite
reports the reference rows as skipped::

    python tests/benchmarks/reference_ffrecord.py                       # build (or find) it, print where
    python tests/benchmarks/reference_ffrecord.py --source ~/ffrecord   # from a checkout, no network

One patch is applied to a copy of the source: ``ffrecord/__init__.py`` reads its version with
``pkg_resources``, which current setuptools no longer ship; the copy uses ``importlib.metadata``.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import sysconfig
import tempfile

REPOSITORY = "https://github.com/HFAiLab/ffrecord"
COMMIT = "3f6380ca316da4d846d2a1b04a5d00eb401ec2d6"
CACHE = os.path.join(
    os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache"),
    "recordkit-benchmarks",
    f"ffrecord-{COMMIT[:7]}-py{sys.version_info.major}{sys.version_info.minor}",
)
_PROBE = "import ffrecord, ffrecord._ffrecord_cpp; print(ffrecord.__file__)"


def importable(pythonpath: str | None = None) -> bool:
    """Whether ``import ffrecord`` finds the compiled reference (with ``pythonpath`` prepended)."""
    env = dict(os.environ)
    if pythonpath:
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [pythonpath, env.get("PYTHONPATH")]))
    done = subprocess.run(
        [sys.executable, "-c", _PROBE],
        check=False,
        capture_output=True,
        text=True,
        env=env,
        cwd=tempfile.gettempdir(),
    )
    return done.returncode == 0


def missing_tools() -> list[str]:
    """What the build needs and this machine lacks."""
    missing = []
    if shutil.which("cmake") is None:
        missing.append("cmake")
    if not any(shutil.which(c) for c in ("c++", "g++", "clang++")):
        missing.append("a C++ compiler")
    include = sysconfig.get_config_var("INCLUDEDIR") or "/usr/include"
    if not any(os.path.exists(os.path.join(d, "libaio.h")) for d in ("/usr/include", include)):
        missing.append("libaio's header (libaio-dev)")
    try:
        import pybind11  # noqa: F401
    except ImportError:
        missing.append("pybind11 (pip install pybind11)")
    return missing


def _checkout(source: str | None, work: str) -> str:
    """A copy of the source at :data:`COMMIT` in ``work``: from ``source`` or cloned."""
    target = os.path.join(work, "ffrecord")
    if source:
        shutil.copytree(source, target, ignore=shutil.ignore_patterns("build", "*.egg-info"))
        return target
    if shutil.which("git") is None:
        raise RuntimeError("git is missing and no --source checkout was given")
    subprocess.run(["git", "clone", "-q", REPOSITORY, target], check=True, capture_output=True)
    subprocess.run(["git", "-C", target, "checkout", "-q", COMMIT], check=True, capture_output=True)
    return target


def _patch(tree: str) -> None:
    """Replace ``pkg_resources`` (gone from setuptools) and the ``git`` call of ``setup.py``."""
    init = os.path.join(tree, "ffrecord", "__init__.py")
    with open(init) as f:
        text = f.read()
    text = text.replace(
        "from pkg_resources import get_distribution",
        "from importlib.metadata import version as _dist_version",
    ).replace("get_distribution('ffrecord').version", '_dist_version("ffrecord")')
    with open(init, "w") as f:
        f.write(text)
    setup = os.path.join(tree, "setup.py")
    with open(setup) as f:
        text = f.read()
    # The version suffix comes from `git rev-parse`, which fails in a copy without .git.
    start = text.find("rev = ")
    end = text.find("\n", text.find(".rstrip()", start))
    if start >= 0 and end > start:
        text = text[:start] + f"rev = '+{COMMIT[:7]}'" + text[end:]
    with open(setup, "w") as f:
        f.write(text)


def build(source: str | None = None, *, build: bool = True) -> tuple[str | None, str]:
    """Return ``(pythonpath, note)``: where the reference is (``""``: already importable), or ``None`` and why."""
    if importable():
        return "", "found installed"
    site = os.path.join(CACHE, "site")
    if os.path.isdir(site) and importable(site):
        return site, f"cached in {CACHE}"
    if not build:
        return None, "the C++ reference is not built (--no-build)"
    missing = missing_tools()
    if missing:
        return None, "cannot build the C++ reference: missing " + ", ".join(missing)
    with tempfile.TemporaryDirectory() as work:
        try:
            tree = _checkout(source, work)
        except (OSError, RuntimeError, subprocess.CalledProcessError) as exc:
            return None, f"cannot get the ffrecord source ({exc}); pass --ffrecord-src DIR"
        _patch(tree)
        shutil.rmtree(site, ignore_errors=True)
        done = subprocess.run(
            [
                sys.executable,
                "-m",
                "pip",
                "install",
                "-q",
                "--no-deps",
                "--no-build-isolation",
                "--target",
                site,
                tree,
            ],
            check=False,
            capture_output=True,
            text=True,
        )
    if done.returncode != 0 or not importable(site):
        tail = (done.stderr or done.stdout).strip().splitlines()[-3:]
        return None, "building the C++ reference failed: " + " / ".join(tail)
    return site, f"built from {COMMIT[:7]} into {CACHE}"


def main() -> None:
    """Build or find the reference and print where it is."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--source", help="a checkout of HFAiLab/ffrecord (else it is cloned)")
    args = parser.parse_args()
    path, note = build(args.source)
    print(note if path is None else f"{note}: PYTHONPATH={path or '(installed)'}")
    sys.exit(0 if path is not None else 1)


if __name__ == "__main__":
    main()
