"""The ``manifest`` command (``build``, ``merge``, ``show``) and ``verify`` of a dataset directory."""

from __future__ import annotations

import argparse
import dataclasses
import itertools
import os
from typing import Any

import recordkit as rk
from recordkit.cli.common import EXIT_CORRUPT, EXIT_OK, damage_line
from recordkit.cli.payload import Schema
from recordkit.datasets import (
    MANIFEST_NAME,
    Manifest,
    ShardCheck,
    build_manifest,
    load_dataset,
    merge_manifests,
    repair_dataset,
)
from recordkit.decode.payloads import detect_payload
from recordkit.io import find_dataset, open_shard
from recordkit.io.manifest import shard_listing

_SCHEMA_SAMPLE = 1000


def is_dataset_directory(path: str) -> bool:
    """Whether ``path`` is a dataset (:func:`recordkit.io.find_dataset`): a directory holding a recordkit
    manifest or a tensorflow-datasets ``dataset_info.json``, or a manifest file (``.json``)."""
    return find_dataset(path, all_splits=True) is not None


def _summary(manifest: Manifest) -> str:
    splits = f", splits {', '.join(manifest.splits)}" if manifest.splits else ""
    return (
        f"{len(manifest.shards)} shards, {manifest.records} records, {manifest.format} "
        f"({manifest.compression or 'uncompressed'}){splits}"
    )


def _inferred_schema(directory: str, manifest: Manifest) -> dict[str, Any] | None:
    """The feature schema of the first shard's first records, as ``recordkit info`` infers it."""
    if not manifest.shards:
        return None
    fmt, compression = manifest.format, manifest.compression
    with open_shard(directory, manifest.shards[0], format=fmt, compression=compression) as reader:
        sample = list(itertools.islice(reader, _SCHEMA_SAMPLE))
    kind = detect_payload(sample, prefer=rk.get_format(fmt).payload)
    if kind in (None, "raw"):
        return None
    schema = Schema.of(sample, kind)
    return {"payload": kind, **schema.as_dict(lists=bool(schema.feature_lists))}


def cmd_build(args: argparse.Namespace) -> int:
    """Describe the record files of a directory in a new manifest (every record is read and checked)."""
    checksum = not args.no_checksum
    manifest = build_manifest(
        args.directory, format=args.format, split=args.split, checksum=checksum, save=False
    )
    if args.schema:
        manifest = dataclasses.replace(manifest, schema=_inferred_schema(args.directory, manifest))
    return _saved(args, manifest, os.path.join(args.directory, MANIFEST_NAME))


def cmd_merge(args: argparse.Namespace) -> int:
    """Merge the manifests of several writers into one, for the directory that holds all their shards."""
    return _saved(args, merge_manifests(args.manifests, args.output), args.output)


def _saved(args: argparse.Namespace, manifest: Manifest, path: str) -> int:
    target = manifest.save(path)
    if not args.quiet:
        print(f"{target}: {_summary(manifest)}")
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
    listing = shard_listing(manifest)
    tfds = manifest.metadata.get("tfds") if listing else None
    what = ""
    if isinstance(tfds, dict):
        what = f"tensorflow-datasets {tfds.get('name')} {tfds.get('version')} ({listing}): "
    print(f"{args.directory}: {what}{_summary(manifest)}")
    for shard in manifest.shards:
        split = f"  [{shard.split}]" if shard.split is not None else ""
        print(f"{shard.records:>12}  {shard.size:>14} B  {shard.path}{split}")
    return EXIT_OK


def print_checks(directory: str, checks: list[ShardCheck]) -> int:
    """Print a line per checked shard of a dataset directory and a summary; return the exit status."""
    for check in checks:
        if check.ok:
            print(f"{check.path}: OK ({check.shard.records} records)")
        elif isinstance(check.error, (rk.CorruptRecordError, rk.DecodeError)):
            print(damage_line(check.path, check.error))
        else:
            print(f"{check.path}: CORRUPT: {check.problem}")
    bad = sum(not check.ok for check in checks)
    print(f"{directory}: {len(checks)} shards: {len(checks) - bad} OK, {bad} bad")
    return EXIT_CORRUPT if bad else EXIT_OK


def repair_directory(directory: str) -> int:
    """Verify a dataset directory, then repair its bad shards in place (``verify DIR --salvage``)."""
    checks, repairs = repair_dataset(directory)
    status = print_checks(directory, checks)
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
    help = "describe the shards of a directory (written by anything) in a manifest"
    build = actions.add_parser("build", help=help)
    build.add_argument("directory", metavar="DIR")
    build.add_argument("--split", help="the split of every shard (default: from TFDS names)")
    help = "also record the feature schema of the first records"
    build.add_argument("--schema", action="store_true", help=help)
    help = "do not record SHA-256 checksums (one read less)"
    build.add_argument("--no-checksum", action="store_true", help=help)
    help = "merge manifests into one (their shards must lie below OUT)"
    merge = actions.add_parser("merge", help=help)
    merge.add_argument("output", metavar="OUT", help="the merged manifest: a directory or a file")
    help = "manifests or their directories"
    merge.add_argument("manifests", nargs="+", metavar="MANIFEST", help=help)
    show = actions.add_parser("show", help="print a dataset's shards")
    show.add_argument("directory", metavar="DIR", help="a dataset directory or a manifest file")
    show.add_argument("--json", action="store_true", help="print the manifest's JSON")
    for action, func in ((build, cmd_build), (merge, cmd_merge), (show, cmd_show)):
        common_options(action)
        action.set_defaults(func=func)
