"""Check the built sdist and wheel of recordkit before they are published.

Usage::

    python -m build --outdir dist .
    python tools/check_package.py dist             # what the archives hold, and their metadata
    python tools/check_package.py dist --installed  # run with the python of a venv holding only the wheel

Without ``--installed`` it reads the archives: the wheel holds the package, ``py.typed``, the ``.proto``
sources beside the generated classes and the licence, and nothing from ``tests/``; the sdist holds the
licence and the changelog; both carry the version of ``src/recordkit/_version.py``, which the changelog has
a section for. With ``--installed`` it checks the installed wheel from outside the checkout: the version
that ``importlib.metadata``, ``recordkit.__version__`` and ``recordkit --version`` report, and that every
public module imports (a module that needs an extra may only fail by naming the extra to install).
"""

from __future__ import annotations

import argparse
import importlib
import importlib.metadata
import pkgutil
import re
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PROTOS = sorted(
    p.relative_to(ROOT / "protos").as_posix() for p in (ROOT / "protos").rglob("*.proto")
)


def source_version() -> str:
    """The version in ``src/recordkit/_version.py``."""
    text = (ROOT / "src" / "recordkit" / "_version.py").read_text()
    found = re.search(r'__version__ = "([^"]+)"', text)
    if found is None:
        raise SystemExit("no __version__ in src/recordkit/_version.py")
    return found.group(1)


def check_archives(dist: Path, version: str) -> list[str]:
    """What is wrong with the wheel and sdist of ``version`` in ``dist`` (nothing: an empty list)."""
    problems = []
    wheels = list(dist.glob(f"recordkit-{version}-*.whl"))
    sdists = list(dist.glob(f"recordkit-{version}.tar.gz"))
    if len(wheels) != 1 or len(sdists) != 1:
        return [f"expected one wheel and one sdist of {version} in {dist}, found {wheels + sdists}"]
    with zipfile.ZipFile(wheels[0]) as wheel:
        names = set(wheel.namelist())
        info = f"recordkit-{version}.dist-info"
        metadata = wheel.read(f"{info}/METADATA").decode()
    wanted = {"recordkit/__init__.py", "recordkit/py.typed", f"{info}/licenses/LICENSE"}
    wanted |= set(PROTOS)
    problems += [f"the wheel lacks {name}" for name in sorted(wanted - names)]
    problems += [f"the wheel holds {name}" for name in sorted(names) if name.startswith("tests/")]
    if f"\nVersion: {version}\n" not in metadata:
        problems.append(f"the wheel's METADATA does not say Version: {version}")
    if "\nLicense-Expression: Apache-2.0\n" not in metadata:
        problems.append("the wheel's METADATA does not say License-Expression: Apache-2.0")
    with tarfile.open(sdists[0]) as sdist:
        members = {name.split("/", 1)[-1] for name in sdist.getnames()}
    for name in ("LICENSE", "CHANGELOG.md", "README.md", "pyproject.toml"):
        if name not in members:
            problems.append(f"the sdist lacks {name}")
    changelog = (ROOT / "CHANGELOG.md").read_text()
    if not re.search(rf"^## \[{re.escape(version)}\]", changelog, re.MULTILINE):
        problems.append(f"CHANGELOG.md has no section ## [{version}]")
    return problems


def check_installed(version: str) -> list[str]:
    """What is wrong with the recordkit installed in this interpreter (run outside the checkout)."""
    import recordkit

    problems = []
    if Path(recordkit.__file__).resolve().is_relative_to(ROOT / "src"):
        return [f"recordkit is imported from the checkout ({recordkit.__file__}), not the wheel"]
    command = [sys.executable, "-m", "recordkit", "--version"]
    printed = subprocess.run(command, capture_output=True, text=True, check=False).stdout.split()
    reported = {
        "importlib.metadata": importlib.metadata.version("recordkit"),
        "recordkit.__version__": recordkit.__version__,
        "recordkit --version": printed[-1] if printed else "",
    }
    problems += [
        f"{where} says {said!r}, not {version!r}"
        for where, said in reported.items()
        if said != version
    ]
    modules = [
        module.name
        for module in pkgutil.walk_packages(recordkit.__path__, "recordkit.")
        if not any(part.startswith("_") for part in module.name.split("."))
    ]
    needing_extras = []
    for name in modules:
        error = _import_error(name)
        if error is not None:
            # A module for an extra may need it, and must say which extra to install.
            if "pip install" not in str(error):
                problems.append(f"import {name}: {error!r}")
            needing_extras.append(name)
    print(
        f"package check: {len(modules) - len(needing_extras)} public modules import, "
        f"{len(needing_extras)} name the extra they need: {', '.join(needing_extras)}"
    )
    return problems


def _import_error(name: str) -> ImportError | None:
    """The ``ImportError`` that importing module ``name`` raises, or ``None``."""
    try:
        importlib.import_module(name)
    except ImportError as exc:
        return exc
    return None


def main() -> None:
    """Run the checks and exit 1 with the problems found."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("dist", type=Path, help="the folder python -m build wrote")
    parser.add_argument(
        "--installed", action="store_true", help="check the wheel installed in this interpreter"
    )
    args = parser.parse_args()
    version = source_version()
    problems = check_installed(version) if args.installed else check_archives(args.dist, version)
    for problem in problems:
        print("package check:", problem)
    if problems:
        sys.exit(1)
    print(f"package check: recordkit {version} {'installed' if args.installed else 'archives'} OK")


if __name__ == "__main__":
    main()
