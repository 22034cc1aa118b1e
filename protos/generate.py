"""Regenerate the protobuf classes in ``src/recordkit/_proto`` from the ``.proto`` files beside this script.

The generated code is checked in. It comes from protoc 25 (as bundled with ``grpcio-tools==1.62.3``), the
oldest protoc whose output runs on every protobuf runtime recordkit supports (4.25 and later): generated code
must never be newer than the runtime that imports it.

Usage::

    pip install "grpcio-tools==1.62.3"
    python protos/generate.py           # rewrite src/recordkit/_proto
    python protos/generate.py --check   # exit 1 if the checked-in files differ from a fresh generation
"""

from __future__ import annotations

import argparse
import filecmp
import sys
import tempfile
from pathlib import Path

PROTO_ROOT = Path(__file__).resolve().parent
SRC_ROOT = PROTO_ROOT.parent / "src"
PACKAGE_DIR = Path("recordkit") / "_proto"
REQUIRED_TOOLS = "1.62."


def proto_files() -> list[Path]:
    """Return the ``.proto`` files to compile, relative to the proto root."""
    return sorted(p.relative_to(PROTO_ROOT) for p in (PROTO_ROOT / PACKAGE_DIR).rglob("*.proto"))


def generate(out_root: Path) -> list[Path]:
    """Compile every proto into ``out_root`` and return the generated files, relative to it."""
    from grpc_tools import protoc  # imported here: only this script needs grpcio-tools

    # The well-known types (google/protobuf/struct.proto) ship inside grpc_tools.
    well_known = Path(protoc.__file__).parent / "_proto"
    args = ["protoc", f"-I{PROTO_ROOT}", f"-I{well_known}"]
    args += [f"--python_out={out_root}", f"--pyi_out={out_root}"]
    args += [str(p) for p in proto_files()]
    if protoc.main(args) != 0:
        raise SystemExit("protoc failed")
    generated = sorted(p.relative_to(out_root) for p in out_root.rglob("*_pb2.py*"))
    packages = {p.parent for p in generated} | {PACKAGE_DIR}
    for directory in sorted(packages):
        init = out_root / directory / "__init__.py"
        if not init.exists():
            init.write_text(
                '"""Generated protobuf classes; regenerate with protos/generate.py."""\n'
            )
        generated.append(directory / "__init__.py")
    return sorted(set(generated))


def grpcio_tools_version() -> str:
    """Return the installed grpcio-tools version, which fixes the bundled protoc (1.62 bundles protoc 25)."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("grpcio-tools")
    except PackageNotFoundError:
        return "not installed"


def main(argv: list[str] | None = None) -> int:
    """Regenerate, or with ``--check`` compare, the generated protobuf classes."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="compare instead of writing")
    args = parser.parse_args(argv)
    if not grpcio_tools_version().startswith(REQUIRED_TOOLS):
        print(
            f"need grpcio-tools {REQUIRED_TOOLS}x (protoc 25), found {grpcio_tools_version()}: "
            "pip install 'grpcio-tools==1.62.3'",
            file=sys.stderr,
        )
        return 2
    if not args.check:
        generate(SRC_ROOT)
        return 0
    with tempfile.TemporaryDirectory() as tmp:
        fresh = generate(Path(tmp))
        stale = [
            str(rel)
            for rel in fresh
            if not (SRC_ROOT / rel).exists()
            or not filecmp.cmp(Path(tmp) / rel, SRC_ROOT / rel, False)
        ]
    if stale:
        print("generated code is out of date: " + ", ".join(stale), file=sys.stderr)
        return 1
    print(f"{len(fresh)} generated files are up to date")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
