"""The ``manifest`` command (``build``, ``merge``, ``show``) and ``verify`` of a dataset directory."""

from __future__ import annotations

import argparse
import itertools
import os
from typing import Any

import recordkit as rk
from recordkit.cli.common import EXIT_CORRUPT, EXIT_OK, damage_line
from recordkit.cli.payload import Schema, detect_payload
from recordkit.datasets.build import (
    ShardCheck,
    build_manifest,
    load_dataset,
    repair_dataset,
    verify_dataset,
)
from recordkit.datasets.manifest import MANIFEST_NAME, Manifest, merge_manifests
from recordkit.io import shard_listing

__all__ = ["add_manifest_command", "is_dataset_directory", "repair_directory", "verify_directory"]

_TFDS_INFO = "dataset_info.json"

_SCHEMA_SAMPLE = 1000


def is_dataset_directory(path: str) -> bool:
    """Whether ``path`` is a dataset: a directory holding a recordkit manifest or a tensorflow-datasets
    ``dataset_info.json``, or a manifest file (``.json``)."""
    return any(
        os.path.isfile(os.path.join(path, name)) for name in (MANIFEST_NAME, _TFDS_INFO)
    ) or (path.endswith(".json") and os.path.isfile(path))


def _summary(manifest: Manifest) -> str:
    splits = manifest.splits
    split_text = f", splits {', '.join(splits)}" if splits else ""
    return (
        f"{len(manifest.shards)} shards, {manifest.records} records, {manifest.format} "
        f"({manifest.compression or 'uncompressed'}){split_text}"
    )


def _inferred_schema(directory: str, manifest: Manifest) -> dict[str, Any] | None:
    """The feature schema of the first records, as ``recordkit info`` infers it."""
    if not manifest.shards:
        return None
    reader = rk.open(os.path.join(directory, manifest.shards[0].path), format=manifest.format)
    with reader:
        sample = list(itertools.islice(reader, _SCHEMA_SAMPLE))
    kind = detect_payload(sample)
    if kind in (None, "raw"):
        return None
    schema = Schema.of(kind, sample)
    found: dict[str, Any] = {
        "payload": kind,
        "features": [stats.as_dict() for stats in schema.features.values()],
    }
    if schema.feature_lists:
        found["feature_lists"] = [stats.as_dict() for stats in schema.feature_lists.values()]
    return found


def cmd_build(args: argparse.Namespace) -> int:
    """Describe the record files of a directory in a new manifest (every record is read and checked)."""
    manifest = build_manifest(
        args.directory,
        format=args.format,
        split=args.split,
        checksum=not args.no_checksum,
        save=False,
    )
    if args.schema:
        schema = _inferred_schema(args.directory, manifest)
        manifest = Manifest(
            format=manifest.format,
            compression=manifest.compression,
            shards=manifest.shards,
            schema=schema,
            metadata=manifest.metadata,
        )
    target = manifest.save(os.path.join(args.directory, MANIFEST_NAME))
    if not args.quiet:
        print(f"{target}: {_summary(manifest)}")
    return EXIT_OK


def cmd_merge(args: argparse.Namespace) -> int:
    """Merge the manifests of several writers into one, for the directory that holds all their shards."""
    merged = merge_manifests(args.manifests, args.output)
    target = merged.save(args.output)
    if not args.quiet:
        print(f"{target}: {_summary(merged)}")
    return EXIT_OK


def cmd_show(args: argparse.Namespace) -> int:
    """Print a dataset's manifest: a summary and one line per shard, or the JSON itself.

    A tensorflow-datasets directory is shown as recordkit reads it: the manifest its ``dataset_info.json``
    makes (name, version, splits, each shard's record count; sizes from the file system).
    """
    _, manifest = load_dataset(args.directory)
    if args.json:
        print(manifest.to_json(), end="")
        return EXIT_OK
    tfds = manifest.metadata.get("tfds") if shard_listing(manifest) else None
    if isinstance(tfds, dict):
        print(
            f"{args.directory}: tensorflow-datasets {tfds.get('name')} {tfds.get('version')} "
            f"({_TFDS_INFO}): {_summary(manifest)}"
        )
    else:
        print(f"{args.directory}: {_summary(manifest)}")
    for shard in manifest.shards:
        split = f"  [{shard.split}]" if shard.split is not None else ""
        print(f"{shard.records:>12}  {shard.size:>14} B  {shard.path}{split}")
    return EXIT_OK


def _print_checks(directory: str, checks: list[ShardCheck]) -> int:
    bad = 0
    for check in checks:
        if check.ok:
            print(f"{check.path}: OK ({check.shard.records} records)")
        elif isinstance(check.error, rk.CorruptRecordError):
            bad += 1
            print(damage_line(check.path, check.error))
        else:
            bad += 1
            print(f"{check.path}: CORRUPT: {check.problem}")
    print(f"{directory}: {len(checks)} shards: {len(checks) - bad} OK, {bad} bad")
    return EXIT_CORRUPT if bad else EXIT_OK


def verify_directory(directory: str, *, checksum: bool = True, split: str | None = None) -> int:
    """Check every shard of a dataset directory (or of its split ``split``) against its manifest (or a
    tensorflow-datasets ``dataset_info.json``); print a line per shard."""
    return _print_checks(directory, verify_dataset(directory, checksum=checksum, split=split))


def repair_directory(directory: str, *, checksum: bool = True) -> int:
    """Verify a dataset directory, then repair its bad shards in place (``verify DIR --salvage``)."""
    checks, repairs = repair_dataset(directory, checksum=checksum)
    status = _print_checks(directory, checks)
    for repair in repairs:
        where = repair.check.path
        if repair.action == "missing":
            print(f"  {where}: missing, not repaired (restore it, or rebuild the manifest)")
        elif repair.action == "salvaged":
            print(f"  salvaged {repair.report.summary()}")
            print(f"    the damaged original is kept as {repair.kept}")
        else:
            print(f"  {where}: its records are intact; entry and index described again")
    if any(repair.action != "missing" for repair in repairs):
        print(f"{directory}: manifest rewritten; the dataset reads as it is now")
    return status


def add_manifest_command(commands: Any, common_options: Any) -> None:
    """Add ``manifest build|merge|show`` to the command line."""
    parser = commands.add_parser(
        "manifest", help="build, merge or show a dataset manifest (_recordkit_manifest.json)"
    )
    actions = parser.add_subparsers(dest="action", metavar="ACTION", required=True)
    build = actions.add_parser(
        "build",
        help="describe the shards of a directory (written by anything) in a manifest",
    )
    build.add_argument("directory", metavar="DIR")
    build.add_argument("--split", help="the split of every shard (default: from TFDS names)")
    build.add_argument(
        "--schema", action="store_true", help="also record the feature schema of the first records"
    )
    build.add_argument(
        "--no-checksum", action="store_true", help="do not record SHA-256 checksums (one read less)"
    )
    common_options(build)
    build.set_defaults(func=cmd_build)
    merge = actions.add_parser(
        "merge", help="merge manifests into one (their shards must lie below OUT)"
    )
    merge.add_argument("output", metavar="OUT", help="the merged manifest: a directory or a file")
    merge.add_argument(
        "manifests", nargs="+", metavar="MANIFEST", help="manifests or their directories"
    )
    common_options(merge)
    merge.set_defaults(func=cmd_merge)
    show = actions.add_parser("show", help="print a dataset's shards")
    show.add_argument("directory", metavar="DIR", help="a dataset directory or a manifest file")
    show.add_argument("--json", action="store_true", help="print the manifest's JSON")
    common_options(show)
    show.set_defaults(func=cmd_show)
