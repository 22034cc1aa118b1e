"""Turning what the user passes (paths, globs, fsspec URLs, OneFlow part names) into a list of files."""

from __future__ import annotations

import os
from collections.abc import Iterable
from typing import Union

from recordkit.io import source_exists

__all__ = ["Sources", "expand_sources", "part_files"]

Sources = Union[str, "os.PathLike[str]", Iterable[Union[str, "os.PathLike[str]"]]]
"""A path, a glob pattern, an fsspec URL, or a list of them."""


def expand_sources(
    sources: Sources, *, format: str | None = None, split: str | None = None
) -> list[str]:
    """Return the files named by ``sources``, in a deterministic order: the files a :class:`Dataset` reads.

    The same resolution as :func:`recordkit.open` and the command line
    (:func:`recordkit.io.resolve_sources`).

    Parameters
    ----------
    sources
        A file, a directory (its record files in natural order, hidden files left out), a glob pattern
        (``*``, ``?``, ``[...]``; its matches in natural order), an fsspec URL (globs allowed), or a list of
        any of these, which keeps its order. A dataset directory (with a manifest, or a tensorflow-datasets
        ``dataset_info.json``) gives the shards its manifest lists, and nothing else.
    format
        With a directory: take its files with this format's suffixes.
    split
        A dataset directory's split; required when it has several.

    Returns
    -------
    list of str
        The file names (URLs stay URLs).

    Raises
    ------
    FileNotFoundError
        A file does not exist, a glob matches nothing, or a directory holds no record file.
    ManifestError
        A dataset's manifest is malformed, or its split is missing or needed.
    ValueError
        No source was given, or ``split`` was given for sources that are not a dataset.
    """
    from recordkit.io import resolve_sources

    items = sources if isinstance(sources, (str, os.PathLike)) else list(sources)
    return list(resolve_sources(items, format=format, split=split).files)


def part_files(
    data_dir: str | os.PathLike[str],
    data_part_num: int,
    part_name_prefix: str = "part-",
    part_name_suffix_length: int = -1,
) -> list[str]:
    """Return OneFlow's part file names: ``data_dir/prefix + str(i).zfill(suffix_length)``.

    Parameters
    ----------
    data_dir
        The folder holding the parts (a local path or an fsspec URL).
    data_part_num
        How many parts there are; parts ``0 .. data_part_num - 1`` are returned in order.
    part_name_prefix
        What each name starts with (OneFlow's default is ``"part-"``).
    part_name_suffix_length
        The width the part number is zero-padded to; ``-1`` (the default) means no padding, as in OneFlow.

    Returns
    -------
    list of str
        The paths of the parts.

    Raises
    ------
    FileNotFoundError
        A part is missing; the message names it.
    ValueError
        ``data_part_num`` is below 1 or ``part_name_suffix_length`` below -1.

    Examples
    --------
    >>> import tempfile, pathlib
    >>> d = tempfile.mkdtemp()
    >>> for name in ("part-00000", "part-00001"):
    ...     _ = (pathlib.Path(d) / name).write_bytes(b"")
    >>> [os.path.basename(p) for p in part_files(d, 2, part_name_suffix_length=5)]
    ['part-00000', 'part-00001']
    """
    if data_part_num < 1:
        raise ValueError(f"data_part_num must be at least 1, not {data_part_num}")
    if part_name_suffix_length < -1:
        raise ValueError(
            f"part_name_suffix_length must be -1 or more, not {part_name_suffix_length}"
        )
    folder = os.fspath(data_dir).rstrip("/")
    paths = []
    for i in range(data_part_num):
        number = str(i) if part_name_suffix_length == -1 else str(i).zfill(part_name_suffix_length)
        path = f"{folder}/{part_name_prefix}{number}"
        if not source_exists(path):
            raise FileNotFoundError(f"OFRecord part {i} is missing: {path}")
        paths.append(path)
    return paths
