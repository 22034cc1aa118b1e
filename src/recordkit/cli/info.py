"""``recordkit info``: what a file holds, or a summary of a source of many shards.

An argument that resolves to one file is described in a block of its own (format, sizes, index, payload kind,
feature schema). One that resolves to several (a directory, a glob, a dataset) is summarised once: the number of
shards, the totals, the schema of every shard's sample merged, where the shards' schemas differ, and a line for
each shard that has a problem (each shard with ``--shards``). ``--json`` prints the same, one object per argument.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import recordkit as rk
from recordkit.cli.common import (
    EXIT_CORRUPT,
    EXIT_ERROR,
    EXIT_OK,
    InputPath,
    damage_line,
    describe_error,
    error,
    expand_inputs,
    progress,
    reader_len,
    report_each,
)
from recordkit.cli.payload import Schema, sampled_payload_kind
from recordkit.io import index_problem
from recordkit.io.index import find_index
from recordkit.io.sources import source_size

__all__ = ["cmd_info"]

_SHOWN_NAMES = 3
"""Shards named in one schema difference before ``and N more``."""


def _index_note(reader: rk.RecordReader, path: str) -> tuple[str | None, str | None]:
    """Where the file's record offsets come from (``None`` when it has no index), and why a sidecar index
    is ignored (``None`` when it describes the file): what the reader found when it checked it."""
    if rk.get_format(reader.format).capabilities.self_indexed:
        return rk.get_format(reader.format).index_place, None
    found = None if reader.compression else find_index(path)
    if found is None:
        return None, None
    problem = index_problem(path, found, format=reader.format)
    return found, None if problem is None else problem.reason


def _file_info(args: argparse.Namespace, path: InputPath) -> tuple[dict[str, Any], Schema | None]:
    """Read one file through: its description, and the schema of its first ``--sample`` records (``None``
    when they are not decoded)."""
    with path.open() as reader:
        records = progress(reader, total=reader_len(reader), desc=path, enabled=not args.quiet)
        sample = list(itertools.islice(records, args.sample))
        sizes = [len(record) for record in itertools.chain(sample, records)]
        info: dict[str, Any] = {
            "path": path,
            "format": reader.format,
            # The whole file's compression, or its chunks' (ArrayRecord compresses chunk by chunk).
            "compression": reader.compression or reader.chunk_compression or "none",
            "records": len(sizes),
            "file_size": source_size(path),
            "payload_bytes": sum(sizes),
            "mean_size": sum(sizes) / len(sizes) if sizes else 0.0,
            "min_size": min(sizes, default=0),
            "max_size": max(sizes, default=0),
        }
        info["index"], info["index_stale"] = _index_note(reader, path)
        kind = sampled_payload_kind(args.payload, args.sample, reader, iter(sample))[0]
    info["payload"] = kind
    info["sampled"] = len(sample)
    return info, None if kind in (None, "raw") else Schema.of(sample, kind)


def _with_schema(info: dict[str, Any], schema: Schema | None) -> dict[str, Any]:
    """``info`` with the schema's keys: ``undecodable``, ``features`` (and ``feature_lists``)."""
    if schema is None:
        return info
    lists = info["payload"] == "sequence_example"
    return {**info, "undecodable": schema.undecodable, **schema.as_dict(lists=lists)}


def _feature_table(title: str, rows: list[dict[str, Any]], length: str) -> list[str]:
    header = ("name", "kind", "present", f"min {length}", f"max {length}")
    keys = ("name", "kind", "present", "min_len", "max_len")
    lines = [header, *([str(row[key]) for key in keys] for row in rows)]
    widths = [max(len(line[i]) for line in lines) for i in range(len(header))]
    return [title] + [
        "  "
        + "  ".join(cell.ljust(width) for cell, width in zip(line, widths, strict=True)).rstrip()
        for line in lines
    ]


def _schema_lines(info: dict[str, Any], sequence: bool) -> list[str]:
    lines = []
    if "features" in info:
        title = "  context features:" if sequence else "  features:"
        lines += _feature_table(title, info["features"], "len")
    if "feature_lists" in info:
        lines += _feature_table("  feature lists:", info["feature_lists"], "steps")
    return lines


def _index_text(info: dict[str, Any], *, named: bool = True) -> str:
    """Where a file's offsets come from; with ``named=False`` without the index's own path and reason (the
    same for shards read alike)."""
    if rk.get_format(info["format"]).capabilities.self_indexed:
        return f"in the file {info['index']}"
    if info["index_stale"] is not None and not named:
        return "stale sidecar, ignored (offsets from a header scan)"
    if info["index_stale"] is not None:
        return f"stale sidecar {info['index']}, ignored ({info['index_stale']}); offsets from a header scan"
    if info["index"] is not None:
        return f"sidecar {info['index']}" if named else "sidecar"
    if info["compression"] != "none":
        return "none (compressed files are read sequentially)"
    writes = "one" if named else "them"
    return f"none (offsets found by a header scan when needed; `recordkit index` writes {writes})"


def _info_text(info: dict[str, Any]) -> str:
    lines = [
        info["path"],
        f"  format       {info['format']}",
        f"  compression  {info['compression']}",
        f"  records      {info['records']}",
        f"  file size    {info['file_size']} bytes",
        _payloads_line(info),
        f"  index        {_index_text(info)}",
    ]
    kind = info["payload"]
    if kind is None:
        return "\n".join([*lines, "  payload      - (no records)"])
    failed = info.get("undecodable")
    note = f"; {failed} of them did not decode" if failed else ""
    lines.append(f"  payload      {kind} (from the first {info['sampled']} records{note})")
    return "\n".join(lines + _schema_lines(info, kind == "sequence_example"))


def _payloads_line(info: dict[str, Any]) -> str:
    return (
        f"  payloads     {info['payload_bytes']} bytes; per record mean "
        f"{info['mean_size']:.1f}, min {info['min_size']}, max {info['max_size']}"
    )


# -- the summary of several shards ------------------------------------------------------------------


@dataclass
class _Shard:
    """One shard as ``info`` read it: its description and schema, or the line and object of its failure."""

    path: InputPath
    info: dict[str, Any] | None = None
    schema: Schema | None = None
    status: int = EXIT_OK
    failure: str = ""
    failure_json: dict[str, Any] = field(default_factory=dict)

    def warnings(self) -> list[str]:
        """What is worth a look in a shard that was read: each said in a few words."""
        if self.info is None:
            return []
        found = []
        if self.info["records"] == 0:
            found.append("no records")
        if self.info["index_stale"] is not None:
            found.append(f"stale sidecar index ignored ({self.info['index_stale']})")
        if self.schema is not None and self.schema.undecodable:
            found.append(f"{self.schema.undecodable} of the sampled records did not decode")
        return found

    def as_json(self) -> dict[str, Any]:
        """Its entry in the summary's ``shards`` list: the file's description without its schema."""
        if self.info is None:
            return self.failure_json
        undecodable = {} if self.schema is None else {"undecodable": self.schema.undecodable}
        return {**self.info, **undecodable, "warnings": self.warnings()}


def _read_shard(args: argparse.Namespace, path: InputPath) -> _Shard:
    try:
        info, schema = _file_info(args, path)
    except (rk.CorruptRecordError, rk.DecodeError) as exc:
        return _Shard(
            path,
            status=EXIT_CORRUPT,
            failure=damage_line(path, exc),
            failure_json=_damage(path, exc),
        )
    except (rk.RecordKitError, OSError, ValueError) as exc:
        error(describe_error(exc))  # on stderr, as for a file on its own
        reason = describe_error(exc)
        found = {"path": path, "error": type(exc).__name__, "reason": reason}
        return _Shard(
            path, status=EXIT_ERROR, failure=f"{path}: not read: {reason}", failure_json=found
        )
    return _Shard(path, info, schema)


def _damage(path: str, exc: rk.CorruptRecordError | rk.DecodeError) -> dict[str, Any]:
    offset, reason = (
        (exc.offset, exc.reason) if isinstance(exc, rk.CorruptRecordError) else (None, str(exc))
    )
    return {
        "path": path,
        "error": type(exc).__name__,
        "index": exc.index,
        "offset": offset,
        "reason": reason,
    }


def _short_names(paths: Sequence[str]) -> dict[str, str]:
    """Each path relative to the folder all of them are in (the path itself when that is unclear)."""
    try:
        common = os.path.commonpath([os.path.dirname(p) for p in paths])
    except ValueError:
        return {p: p for p in paths}
    return {p: os.path.relpath(p, common) if common else p for p in paths}


def _spread(groups: dict[str, list[str]], names: dict[str, str]) -> str:
    """``a in 3 shards; b in 1 (x)``: how many shards each label covers, naming the shards of all but the
    largest group."""
    largest = max(groups, key=lambda label: len(groups[label]))
    parts = []
    for i, (label, paths) in enumerate(groups.items()):
        count = f"{len(paths)} shard{'s' if len(paths) != 1 else ''}" if i == 0 else str(len(paths))
        part = f"{label} in {count}"
        if label != largest:
            shown = [names[p] for p in paths[:_SHOWN_NAMES]]
            more = len(paths) - len(shown)
            part += f" ({', '.join(shown)}{f' and {more} more' if more else ''})"
        parts.append(part)
    return "; ".join(parts)


def _grouped(pairs: Iterable[tuple[str, str]]) -> dict[str, list[str]]:
    """{label: the paths with that label}, the largest group first (then in order of appearance)."""
    groups: dict[str, list[str]] = {}
    for path, label in pairs:
        groups.setdefault(label, []).append(path)
    return dict(sorted(groups.items(), key=lambda item: -len(item[1])))


def _one_or_spread(pairs: list[tuple[str, str]], names: dict[str, str]) -> str:
    groups = _grouped(pairs)
    return next(iter(groups)) if len(groups) == 1 else _spread(groups, names)


def _differences(decoded: list[_Shard]) -> list[dict[str, Any]]:
    """The features whose list type differs between the shards' samples, or that some samples lack."""
    found = []
    tables = [(s.path, s.schema.as_dict(lists=True)) for s in decoded if s.schema is not None]
    for table in ("features", "feature_lists"):
        kinds = [(path, {row["name"]: row["kind"] for row in rows[table]}) for path, rows in tables]
        for name in dict.fromkeys(name for _, seen in kinds for name in seen):
            by_kind = _grouped((path, seen[name]) for path, seen in kinds if name in seen)
            missing = [path for path, seen in kinds if name not in seen]
            if len(by_kind) > 1 or missing:
                found.append({"table": table, "name": name, "kinds": by_kind, "missing": missing})
    return found


def _difference_text(difference: dict[str, Any], names: dict[str, str]) -> str:
    groups = dict(difference["kinds"])
    if difference["missing"]:
        groups["not seen"] = difference["missing"]
    where = " (feature list)" if difference["table"] == "feature_lists" else ""
    return f"    {difference['name']}{where}: {_spread(groups, names)}"


def _summary(source: str, shards: list[_Shard]) -> dict[str, Any]:
    """The JSON object of a source of several shards (the text is made from it)."""
    read = [s for s in shards if s.info is not None]
    infos = [s.info for s in read if s.info is not None]
    records = sum(i["records"] for i in infos)
    payload_bytes = sum(i["payload_bytes"] for i in infos)
    with_records = [i for i in infos if i["records"]]
    kinds = Counter(i["payload"] for i in with_records)
    decoded = [s for s in read if s.schema is not None]
    schema = Schema.merged(s.schema for s in decoded if s.schema is not None)
    lists = any(i["payload"] == "sequence_example" for i in infos)
    resolved = shards[0].path.resolved
    summary: dict[str, Any] = {
        "source": source,
        "num_shards": len(shards),
        "damaged": sum(s.status == EXIT_CORRUPT for s in shards),
        "unreadable": sum(s.status == EXIT_ERROR for s in shards),
        "formats": dict(Counter(i["format"] for i in infos)),
        "compressions": dict(Counter(i["compression"] for i in infos)),
        "records": records,
        "manifest": resolved.manifest is not None,
        "file_size": sum(i["file_size"] for i in infos),
        "payload_bytes": payload_bytes,
        "mean_size": payload_bytes / records if records else 0.0,
        "min_size": min((i["min_size"] for i in with_records), default=0),
        "max_size": max((i["max_size"] for i in with_records), default=0),
        "payload": next(iter(kinds)) if len(kinds) == 1 else None,
        "payloads": dict(kinds),
        "sampled": sum(i["sampled"] for i in infos),
    }
    if decoded:
        summary["undecodable"] = schema.undecodable
        summary.update(schema.as_dict(lists=lists))
    summary["differences"] = _differences(decoded)
    summary["shards"] = [s.as_json() for s in shards]
    return summary


def _summary_text(args: argparse.Namespace, summary: dict[str, Any], shards: list[_Shard]) -> str:
    names = _short_names([s.path for s in shards])
    infos = [(s.path, s.info) for s in shards if s.info is not None]
    left_out = [
        f"{summary['damaged']} damaged" if summary["damaged"] else "",
        f"{summary['unreadable']} not read" if summary["unreadable"] else "",
    ]
    left_out = [part for part in left_out if part]
    files = ", ".join([f"{len(shards)} files", *left_out])
    counted = "every record read, checksums checked"
    if summary["manifest"]:
        counted += "; each shard checked against the manifest"
    lines = [
        summary["source"],
        f"  shards       {files}{' (left out of the totals)' if left_out else ''}",
    ]
    if infos:
        lines += [
            f"  format       {_one_or_spread([(p, i['format']) for p, i in infos], names)}",
            f"  compression  {_one_or_spread([(p, i['compression']) for p, i in infos], names)}",
            f"  records      {summary['records']} ({counted})",
            f"  file size    {summary['file_size']} bytes",
            _payloads_line(summary),
            f"  index        {_one_or_spread([(p, _index_text(i, named=False)) for p, i in infos], names)}",
            _payload_line(args, summary, infos, names),
        ]
    lines += _schema_lines(summary, sequence="feature_lists" in summary)
    if summary["differences"]:
        lines.append("  schemas differ between shards:")
        lines += [_difference_text(d, names) for d in summary["differences"]]
    listed = shards if args.shards else [s for s in shards if s.failure or s.warnings()]
    if listed:
        lines.append("  shards:" if args.shards else "  shards with problems:")
        lines += _shard_lines(listed)
    if not args.shards:
        lines.append(f"  {len(shards)} shards: --shards lists them")
    return "\n".join(lines)


def _payload_line(
    args: argparse.Namespace,
    summary: dict[str, Any],
    infos: Sequence[tuple[str, dict[str, Any]]],
    names: dict[str, str],
) -> str:
    if not summary["payloads"]:
        return "  payload      - (no records)"
    failed = summary.get("undecodable")
    note = f"; {failed} of them did not decode" if failed else ""
    sampled = (
        f"from the first {args.sample} records of each shard: {summary['sampled']} records{note}"
    )
    if summary["payload"] is not None:
        return f"  payload      {summary['payload']} ({sampled})"
    kinds = _spread(_grouped((p, i["payload"]) for p, i in infos if i["records"]), names)
    return f"  payload      {kinds}; {sampled}"


def _shard_lines(shards: list[_Shard]) -> list[str]:
    rows = [s for s in shards if s.info is not None]
    path_width = max((len(s.path) for s in rows), default=0)
    count_width = max((len(str(s.info["records"])) for s in rows if s.info), default=0)
    lines = []
    for shard in shards:
        if shard.info is None:
            lines.append(f"    {shard.failure}")
            continue
        line = (
            f"    {shard.path:<{path_width}}  {shard.info['records']:>{count_width}} "
            f"{'record ' if shard.info['records'] == 1 else 'records'}  {shard.info['file_size']} bytes"
        )
        warnings = shard.warnings()
        lines.append(f"{line}  {'; '.join(warnings)}" if warnings else line)
    return lines


def _summarise(args: argparse.Namespace, source: str, paths: list[InputPath]) -> int:
    """Print the summary of a source of several shards; return the exit status."""
    shards = [_read_shard(args, path) for path in paths]
    summary = _summary(source, shards)
    print(json.dumps(summary) if args.json else _summary_text(args, summary, shards))
    return max(s.status for s in shards)


def cmd_info(args: argparse.Namespace) -> int:
    """Describe each argument: a file's format, sizes, index, payload kind and feature schema; a source of
    several files (directory, glob, dataset) summarised once, with its shards listed on ``--shards``.

    A damaged file is reported in its place (the error, the record index, the byte offset) and the
    others are still described; the status is then 1.
    """

    def show(path: str, found: tuple[dict[str, Any], Schema | None]) -> str:
        info = _with_schema(*found)
        return json.dumps(info) if args.json else _info_text(info)

    def damaged(path: str, exc: rk.CorruptRecordError) -> None:
        print(json.dumps(_damage(path, exc)) if args.json else damage_line(path, exc))

    # Every argument is resolved before any is read, so a usage error prints nothing else.
    groups = [
        (source, expand_inputs([source], format=args.format, split=args.split))
        for source in args.files
    ]
    statuses = []
    for source, paths in groups:
        if len(paths) > 1:
            statuses.append(_summarise(args, source, paths))
            continue
        results = report_each(paths, lambda path: _file_info(args, path), show, damaged)
        statuses += [status for status, _ in results]
    return max(statuses)
