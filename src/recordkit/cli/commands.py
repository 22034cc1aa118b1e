"""The ``recordkit`` command line: inspect, check, convert and index record files.

Run ``recordkit --help`` (or ``python -m recordkit --help``) for the commands; ``docs/cli.md`` describes
them in full. Exit status: 0 when all went well, 1 when corrupt data was found (a damaged file, a payload
that does not decode), 2 for usage errors and other failures (a missing file, an unknown format), 130 when
interrupted (Ctrl-C), 141 when the reader of the output went away (``recordkit cat ... | head``).

Examples
--------
>>> from recordkit.cli import main
>>> main(["count", "no-such-file.tfrecord"])  # doctest: +SKIP
recordkit: error: no-such-file.tfrecord: No such file or directory
2
"""

from __future__ import annotations

import argparse
import base64
import contextlib
import dataclasses
import functools
import itertools
import os
import sys
import warnings
from collections.abc import Iterator, Sequence
from typing import Any

import recordkit as rk
from recordkit.cli.common import (
    EXIT_CORRUPT,
    EXIT_ERROR,
    EXIT_OK,
    PROG,
    CliError,
    InputPath,
    damage_line,
    describe_error,
    error,
    expand_inputs,
    progress,
    reader_len,
    records_text,
    report_each,
    resolve_input,
)
from recordkit.cli.convert import run_convert, run_reshard
from recordkit.cli.info import cmd_info
from recordkit.cli.manifest import (
    add_manifest_command,
    is_dataset_directory,
    print_checks,
    repair_directory,
)
from recordkit.cli.payload import record_json, record_text, sampled_payload_kind
from recordkit.datasets import ShardCheck, verify_dataset
from recordkit.decode.payloads import PAYLOAD_KINDS, decode_payload
from recordkit.io import ResolvedSources, write_index

__all__ = ["build_parser"]

EXIT_INTERRUPTED = 130
"""Interrupted by Ctrl-C (SIGINT): 128 + the signal number, as shells report it."""
EXIT_BROKEN_PIPE = 141
"""The reader of the output went away (SIGPIPE): 128 + the signal number, like ``cat``."""


# -- count -----------------------------------------------------------------------------------------


def cmd_count(args: argparse.Namespace) -> int:
    """Print the number of records of each file.

    Only record headers are read (and their length checksums checked): an FFRecord file's count is in its
    header, a TFRecord or OFRecord file's comes from a scan of the length fields. Compressed files are
    decompressed and read through. A dataset's shards are counted the same way, not taken from its
    manifest: a shard whose count differs from its entry is reported (ManifestError, status 1).
    """
    paths = expand_inputs(args.files, format=args.format, split=args.split)
    results = report_each(
        paths,
        lambda path: path.count_records(recount=True, enabled=not args.quiet),
        lambda path, n: f"{n:>12}  {path}",
        lambda path, exc: error(describe_error(exc)),
    )
    if len(paths) > 1:
        print(f"{sum(n or 0 for _, n in results):>12}  total")
    return max(status for status, _ in results)


# -- verify ----------------------------------------------------------------------------------------


def _verify_file(args: argparse.Namespace, path: InputPath) -> int:
    """Check one file, with its format's slow checks too (:meth:`RecordFormat.verifying`); return how
    many records it holds."""
    with contextlib.ExitStack() as slow_checks:
        # Every format's, since the file's format may be known only once it is open, and a stream (a
        # FIFO, stdin) cannot be opened twice to learn it first.
        for name in rk.available_formats():
            slow_checks.enter_context(rk.get_format(name).verifying())
        return _count_verified(args, path)


def _count_verified(args: argparse.Namespace, path: InputPath) -> int:
    """Read one file as :func:`_verify_file` checks it; return how many records it holds."""
    with path.open() as reader:
        records = progress(reader, total=reader_len(reader), desc=path, enabled=not args.quiet)
        if not args.decode:
            return sum(1 for _ in records)
        kind, records = sampled_payload_kind(args.payload, args.sample, reader, records)
        count = 0
        for count, record in enumerate(records, 1):
            if kind not in (None, "raw"):
                try:
                    decode_payload(kind, record)
                except rk.DecodeError as exc:
                    raise rk.DecodeError(str(exc), index=count - 1, feature=exc.feature) from exc
        return count


_IN_PLACE = True
"""``args.salvage`` when ``--salvage`` is given without OUT: repair a dataset directory in place."""


def _decoded(
    args: argparse.Namespace, check: ShardCheck, resolved: ResolvedSources, parts: dict[str, int]
) -> ShardCheck:
    """``check``, or when its shard matched its entry but a payload does not decode (``--decode``), the
    check with that damage: the shard's records read as :func:`recordkit.open` reads them."""
    part = parts.get(os.path.normpath(check.path))
    if not check.ok or part is None:
        return check
    try:
        _verify_file(args, InputPath(check.path, resolved, part))
    except (rk.CorruptRecordError, rk.DecodeError) as exc:
        return dataclasses.replace(check, problem=str(exc), error=exc)
    return check


def _verify_dataset(args: argparse.Namespace, path: str) -> int:
    """Check every shard of a dataset (or ``--split``'s) against its manifest; with ``--decode``, also
    decode the records of each shard that matched its entry. Return the exit status."""
    checks = verify_dataset(path, split=args.split)
    if args.decode:
        resolved = resolve_input(
            path, format=args.format, split=args.split, all_splits=args.split is None
        )
        parts = {os.path.normpath(file): i for i, file in enumerate(resolved.files)}
        checks = [_decoded(args, check, resolved, parts) for check in checks]
    return print_checks(path, checks)


def _repair_datasets(args: argparse.Namespace, datasets: list[bool]) -> int:
    """``verify DIR... --salvage``: repair each dataset directory in place."""
    if not all(datasets):
        one = "a file is not one: for a file, name where its intact records go: --salvage OUT"
        many = "every argument must be one; salvage a file on its own: --salvage OUT"
        raise CliError(
            "--salvage without OUT repairs dataset directories (with a manifest) in place, and "
            + (one if len(datasets) == 1 else many)
        )
    if args.split is not None:
        raise CliError(
            "--salvage repairs a whole dataset directory in place: run it without --split"
        )
    if args.decode:
        raise CliError(
            "--salvage repairs a dataset's framing and manifest: run it without --decode"
        )
    return max(repair_directory(path) for path in args.files)


def cmd_verify(args: argparse.Namespace) -> int:
    """Read every record of each file, checking every checksum and the structure.

    Each argument is checked as it is: a dataset directory with a manifest against it (every shard's
    presence, size, SHA-256, record count, checksums and index), a tensorflow-datasets directory against
    the record counts of its ``dataset_info.json``, and any other file, directory or glob by the framing
    of its files. Every split is checked, or only ``--split``'s shards. ``--decode`` also decodes every
    payload. ``--salvage`` without OUT repairs manifest datasets in place; with OUT, one damaged file.
    """
    datasets = [is_dataset_directory(path) for path in args.files]
    if args.salvage is _IN_PLACE:
        return _repair_datasets(args, datasets)
    if args.salvage is not None and any(datasets):
        raise CliError(
            "a dataset directory is repaired in place: pass --salvage without OUT (each damaged "
            "shard is salvaged under its own name, the original kept aside)"
        )
    # Every argument is resolved before any is checked, so a usage error prints nothing else.
    groups: list[str | list[InputPath]] = []
    for path, dataset in zip(args.files, datasets, strict=True):
        if dataset and args.split is not None:
            # An unknown split is refused as every reading command refuses it (status 2).
            resolve_input(path, format=args.format, split=args.split)
        groups.append(
            path if dataset else expand_inputs([path], format=args.format, split=args.split)
        )
    files = [file for group in groups if not isinstance(group, str) for file in group]
    if args.salvage is not None and len(files) != 1:
        raise CliError("--salvage applies to a single file")
    statuses: list[int] = []  # the files'
    dataset_statuses: list[int] = []
    for group in groups:
        if isinstance(group, str):
            dataset_statuses.append(_verify_dataset(args, group))
            continue
        results = report_each(
            group,
            functools.partial(_verify_file, args),
            lambda path, count: f"{path}: OK ({records_text(count)})",
            lambda path, exc: print(damage_line(path, exc)),
        )
        statuses.extend(status for status, _ in results)
    if args.salvage is not None and statuses[0] == EXIT_CORRUPT:
        from recordkit.recover import salvage

        if os.path.exists(args.salvage) and not args.force:
            raise CliError(f"{args.salvage} exists; pass --force to overwrite")
        summary = salvage(files[0], args.salvage, format=args.format, warn=False).summary()
        print(f"  salvaged into {args.salvage}: {summary}")
    if len(files) > 1:
        bad = sum(status != EXIT_OK for status in statuses)
        print(f"{len(files)} files: {len(files) - bad} OK, {bad} bad")
    return max(statuses + dataset_statuses)


# -- cat -------------------------------------------------------------------------------------------


def _hexdump(data: bytes) -> Iterator[str]:
    for start in range(0, len(data), 16):
        chunk = data[start : start + 16]
        text = "".join(chr(b) if 32 <= b < 127 else "." for b in chunk)
        yield f"  {start:08x}  {chunk.hex(' '):<47}  |{text}|"


def cmd_cat(args: argparse.Namespace) -> int:
    """Print records: decoded (text or JSON lines), base64 lines, or hexdumps."""
    if args.offset < 0 or (args.limit is not None and args.limit < 0):
        raise CliError("--offset and --limit must be >= 0")
    ensure_ascii = "utf" not in (sys.stdout.encoding or "").lower()
    # The sources are resolved as one list, as recordkit.open(["a", "b"]) resolves them.
    sources = args.files[0] if len(args.files) == 1 else args.files
    with resolve_input(sources, format=args.format, split=args.split).open() as reader:
        stop = None if args.limit is None else args.offset + args.limit
        records: Iterator[bytes] = itertools.islice(reader, args.offset, stop)
        kind: str | None = "raw"
        if not (args.raw or args.hex):
            kind, records = sampled_payload_kind(args.payload, args.sample, reader, records)
        for index, record in enumerate(records, args.offset):
            try:
                if args.raw:
                    line = base64.b64encode(record).decode("ascii")
                elif args.hex:
                    line = "\n".join([f"record {index} ({len(record)} bytes)", *_hexdump(record)])
                elif args.json:
                    line = record_json(kind or "raw", record, ensure_ascii=ensure_ascii)
                else:
                    line = record_text(kind or "raw", index, record)
            except rk.DecodeError as exc:
                # Printed as every command prints a typed error (describe_error), with its class.
                raise rk.DecodeError(
                    f"{' '.join(args.files)}: record {index} is not a valid {kind} payload: {exc}",
                    index=index,
                    feature=exc.feature,
                ) from exc
            print(line)
    return EXIT_OK


# -- index -----------------------------------------------------------------------------------------


def cmd_index(args: argparse.Namespace) -> int:
    """Write the sidecar offset index of each file whose format uses one (TFRecord, OFRecord)."""
    paths = expand_inputs(args.files, format=args.format, split=args.split)
    if args.output is not None and len(paths) != 1:
        raise CliError("--output applies to a single file")
    for path in paths:
        with path.open() as reader:
            fmt, compression = reader.format, reader.compression
            if not rk.get_format(fmt).capabilities.sidecar_index:
                print(
                    f"{path}: {fmt} files carry their index in the "
                    f"{rk.get_format(fmt).index_place}; nothing to write"
                )
                continue
            if compression:
                raise CliError(
                    f"{path}: a {compression}-compressed file has no random access, so no "
                    "index; decompress it first (recordkit convert --compression none)"
                )
        written = write_index(path, args.output, format=fmt, hidden=args.hidden or None)
        if not args.quiet:
            print(f"{path}: wrote {written} ({records_text(path.count_records())})")
    return EXIT_OK


# -- parser and main -------------------------------------------------------------------------------


def _common_options(parser: argparse.ArgumentParser) -> None:
    formats = ", ".join(rk.available_formats())
    help = f"input format: {formats} (default: from the suffix, else the content)"
    parser.add_argument("--format", type=str.lower, metavar="FORMAT", help=help)
    help = "no progress bar (nor summary from convert, index)"
    parser.add_argument("-q", "--quiet", action="store_true", help=help)


def _positive(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text}")
    return value


def _command(
    commands: Any,
    name: str,
    help: str,
    func: Any,
    *,
    payload: bool = False,
    split: str = "the split of a dataset directory to read (required when it has several)",
    files: str = "record files, directories or quoted glob patterns",
    description: str | None = None,
) -> argparse.ArgumentParser:
    """Add a command with ``--split``, ``--format`` and ``--quiet``, and with ``payload`` ``--payload``
    and ``--sample``. It takes record files (or directories of them), which ``files`` describes;
    ``convert`` (with a ``description``) adds its own."""
    p: argparse.ArgumentParser = commands.add_parser(name, help=help, description=description)
    if description is None:
        p.add_argument("files", nargs="+", metavar="FILE", help=files)
    if payload:
        help = "how to decode the records (default: detected from the first records)"
        p.add_argument("--payload", choices=("auto", *PAYLOAD_KINDS), default="auto", help=help)
        help = "records used to detect the payload kind and schema (default: 100)"
        p.add_argument("--sample", type=_positive, default=100, metavar="N", help=help)
    p.add_argument("--split", metavar="SPLIT", help=split)
    _common_options(p)
    p.set_defaults(func=func)
    return p


def _add_commands(commands: Any) -> None:
    help = "describe files, or summarise a dataset's shards: format, sizes, index, payload schema"
    info = _command(commands, "info", help, cmd_info, payload=True)
    help = "one JSON object per file, and per source of several files (its summary)"
    info.add_argument("--json", action="store_true", help=help)
    help = "for a source of several files, also list each file: records, bytes, warnings"
    info.add_argument("--shards", action="store_true", help=help)
    _command(commands, "count", "count records (header scan only)", cmd_count)
    help = "check every checksum; exit 1 on corrupt data"
    split = "check only this split of a dataset directory (default: every split)"
    verify = _command(commands, "verify", help, cmd_verify, payload=True, split=split)
    verify.add_argument("--decode", action="store_true", help="also decode every payload")
    help = (
        "if the file is damaged, copy its intact records to OUT (one FILE only); for a dataset "
        "directory, no OUT: repair its damaged shards and its manifest in place"
    )
    verify.add_argument("--salvage", nargs="?", const=_IN_PLACE, metavar="OUT", help=help)
    verify.add_argument("-f", "--force", action="store_true", help="overwrite OUT if it exists")
    help = "print records (decoded, JSON lines, base64 or hex)"
    files = "record files, directories or quoted globs, read as one sequence"
    cat = _command(commands, "cat", help, cmd_cat, payload=True, files=files)
    cat.add_argument("--offset", type=int, default=0, metavar="K", help="skip the first K records")
    cat.add_argument("--limit", type=int, metavar="N", help="print at most N records")
    mode = cat.add_mutually_exclusive_group()
    mode.add_argument("--json", action="store_true", help="one JSON object per record")
    mode.add_argument("--raw", action="store_true", help="one base64 line per record, undecoded")
    mode.add_argument("--hex", action="store_true", help="a hexdump of each record, undecoded")
    _add_convert(commands)
    _add_reshard(commands)
    help = "write sidecar offset indexes (TFRecord, OFRecord)"
    index = _command(commands, "index", help, cmd_index)
    help = "index path (default: FILE.idx beside FILE, .FILE.idx in a dataset directory; one FILE only)"
    index.add_argument("-o", "--output", help=help)
    help = "write .FILE.idx, a name that tools reading every file of the directory pass by"
    index.add_argument("--hidden", action="store_true", help=help)


_OPTIONS_HELP = (
    "the output format's writer option string: ArrayRecord's, e.g. 'group_size:1,zstd:3' (its "
    "default), 'group_size:65536,brotli:6'"
)


def _add_convert(commands: Any) -> None:
    description = (
        "Copy the records of SRC... into DST. Records are unchanged byte for byte, except that Example "
        "payloads become OFRecords in an OFRecord output and OFRecord payloads become Examples in a "
        "TFRecord output (--keep-payload copies them as they are; --payload forces a kind). DST is a "
        "file, or a directory when --shards N > 1, --pattern is given, or DST is a directory or ends "
        "with '/'. A tensorflow-datasets directory given whole (no --split) converts shard for shard "
        "into a TFDS directory of the --to format."
    )
    help = "convert between formats, optionally sharded"
    p = _command(commands, "convert", help, run_convert, description=description)
    p.add_argument("src", nargs="+", metavar="SRC", help="input files or directories")
    p.add_argument("dst", metavar="DST", help="output file or directory")
    p.add_argument("--to", type=str.lower, metavar="FORMAT", help="output format")
    help = "output compression (TFRecord only)"
    p.add_argument("--compression", choices=("none", "gzip", "zlib"), help=help)
    p.add_argument("--options", help=_OPTIONS_HELP)
    p.add_argument("--shards", type=_positive, default=1, metavar="N", help="write N files")
    help = (
        "shard file name, with {shard} and {num_shards}, e.g. part-{shard:05d} (default: per "
        "format, see the docs)"
    )
    p.add_argument("--pattern", help=help)
    payload = p.add_mutually_exclusive_group()
    help = (
        "convert the payloads to this message kind (Example <-> OFRecord); default: the output "
        "format's own (OFRecord for ofrecord, Example for tfrecord, none for ffrecord)"
    )
    payload.add_argument("--payload", choices=("example", "ofrecord"), help=help)
    help = "copy every record byte for byte, with no payload conversion"
    payload.add_argument("--keep-payload", action="store_true", help=help)
    help = "allow rounding double_list values to float32"
    p.add_argument("--lossy", action="store_true", help=help)
    p.add_argument("-f", "--force", action="store_true", help="overwrite existing outputs")


def _add_reshard(commands: Any) -> None:
    description = (
        "Write the records of SRC... (read as one sequence, as recordkit cat reads them) again as a "
        "dataset of --shards N shards, sizes within one record, with a manifest, in the new directory "
        "DST. It is written beside DST and renamed into place once complete. Records are copied as "
        "they are, in order, or with --shuffle in a seeded global shuffle within --memory."
    )
    help = "write a dataset again as N shards, optionally shuffled"
    p = _command(commands, "reshard", help, run_reshard, description=description)
    p.add_argument("src", nargs="+", metavar="SRC", help="input files, directories or datasets")
    p.add_argument("dst", metavar="DST", help="output directory")
    p.add_argument("--shards", type=_positive, required=True, metavar="N", help="write N shards")
    p.add_argument("--to", type=str.lower, metavar="FORMAT", help="output format (default: SRC's)")
    help = "output compression (TFRecord only; default: SRC's when the format is SRC's)"
    p.add_argument("--compression", choices=("none", "gzip", "zlib"), help=help)
    p.add_argument("--options", help=_OPTIONS_HELP)
    p.add_argument("--shuffle", action="store_true", help="shuffle the records globally")
    p.add_argument("--seed", type=int, default=0, help="the seed of --shuffle (default 0)")
    help = "memory budget of --shuffle in MiB (default 256)"
    p.add_argument("--memory", type=_positive, default=256, metavar="MIB", help=help)
    p.add_argument("-f", "--force", action="store_true", help="replace DST if it holds files")


class _Parser(argparse.ArgumentParser):
    """A command's parser: its options may come anywhere among its sources (``cat a --json b``).

    ``parse_known_args`` parses as :meth:`~argparse.ArgumentParser.parse_known_intermixed_args` does:
    the options first, then the positional arguments that are left, in their order. A parser with
    subcommands of its own (``manifest``) parses as argparse does, which intermixed parsing cannot.
    """

    _parsing = False

    def parse_known_args(  # type: ignore[override]
        self, args: Sequence[str] | None = None, namespace: argparse.Namespace | None = None
    ) -> tuple[argparse.Namespace, list[str]]:
        """Parse ``args``, options and positional arguments intermixed."""
        nested = any(isinstance(action, argparse._SubParsersAction) for action in self._actions)
        if self._parsing or nested or (args is not None and "--" in args):
            # parse_known_intermixed_args parses in two passes of the plain parse_known_args; and
            # after "--" (every argument a source, even one that starts with "-") argparse's plain
            # parsing is the one that keeps them.
            return super().parse_known_args(args, namespace)
        self._parsing = True
        try:
            return self.parse_known_intermixed_args(args, namespace)
        finally:
            self._parsing = False


def _description() -> str:
    """What the command does, with the formats from the registry (those only read said so)."""
    formats = [
        name if rk.get_format(name).capabilities.writable else f"{name} (read only)"
        for name in rk.available_formats()
    ]
    return f"Inspect, check, convert and index record files: {', '.join(formats)}."


def build_parser() -> argparse.ArgumentParser:
    """Return the argument parser of the ``recordkit`` command."""
    parser = argparse.ArgumentParser(
        prog=PROG,
        description=_description(),
        epilog="Exit status: 0 ok, 1 corrupt data found, 2 usage error or other failure, "
        "130 interrupted, 141 output pipe closed.",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {rk.__version__}")
    commands = parser.add_subparsers(
        dest="command", metavar="COMMAND", required=True, parser_class=_Parser
    )
    _add_commands(commands)
    add_manifest_command(commands, _common_options)
    return parser


def _show_warning(message: Warning | str, *args: Any, **kwargs: Any) -> None:
    print(f"{PROG}: warning: {message}", file=sys.stderr)


def _run(argv: Sequence[str] | None) -> int:
    try:
        args = build_parser().parse_args(argv)
    except SystemExit as exc:
        return exc.code if isinstance(exc.code, int) else EXIT_ERROR
    try:
        with warnings.catch_warnings():
            # Each of recordkit's warnings is news about the data; others keep Python's filters.
            warnings.simplefilter("always", rk.RecordKitWarning)
            warnings.showwarning = _show_warning
            return int(args.func(args))
    except CliError as exc:
        error(str(exc))
        return exc.code
    except BrokenPipeError:
        raise  # main's to handle: not an error of the input
    except (rk.RecordKitError, OSError, ValueError, ImportError) as exc:
        error(describe_error(exc))
        corrupt = isinstance(exc, (rk.CorruptRecordError, rk.DecodeError))  # the data's fault
        return EXIT_CORRUPT if corrupt else EXIT_ERROR


def main(argv: Sequence[str] | None = None) -> int:
    """Run the ``recordkit`` command with ``argv`` (default: ``sys.argv[1:]``); return the exit status.

    Parameters
    ----------
    argv
        The arguments, without the program name.

    Returns
    -------
    int
        0 when all went well, 1 when corrupt data was found, 2 for usage errors and other failures,
        130 when interrupted (Ctrl-C), 141 when the reader of the output went away (``| head``).
    """
    try:
        code = _run(argv)
        sys.stdout.flush()  # a closed pipe shows here, not as a message at interpreter exit
    except KeyboardInterrupt:
        print(f"{PROG}: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except BrokenPipeError:
        # ``recordkit cat ... | head``: stop quietly, with the status `cat` has when SIGPIPE stops it.
        # stdout goes to the null device, so that the interpreter's last flush cannot fail again.
        with contextlib.suppress(AttributeError, ValueError, OSError):
            fd = sys.stdout.fileno()
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, fd)
            os.close(devnull)
        return EXIT_BROKEN_PIPE
    return code
