"""A drop-in replacement for HFAiLab's ``ffrecord`` Python API, in pure Python.

Existing scripts keep working with only the import changed::

    # from ffrecord import FileReader, FileWriter
    from recordkit.ffrecord import FileReader, FileWriter   # recordkit.compat.ffrecord is the same module

    with FileWriter("train.ffr", n=len(samples)) as writer:
        for sample in samples:
            writer.write_one(sample)

    reader = FileReader("train.ffr", check_data=True)
    batch = reader.read([3, 1, 4])      # list of numpy uint8 arrays
    first = reader.read_one(0)           # one numpy uint8 array
    reader.close()

Differences from the C++ original, all on bad input: a damaged file raises a
:class:`~recordkit.errors.CorruptRecordError` subclass instead of aborting the process or returning wrong
bytes; an index out of range raises :class:`IndexError`; a writer that receives fewer (or more) samples
than ``n`` raises :class:`ValueError` and leaves no file behind (the original aborts the process and
leaves a file with an empty header). Files are written atomically.
"""

from __future__ import annotations

import itertools
import operator
import os
from array import array
from bisect import bisect_right
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from recordkit.io import RecordReader, RecordWriter, ResolvedSources, resolve_sources
from recordkit.io import open as _open
from recordkit.support.closing import Closing
from recordkit.support.extras import needs

if TYPE_CHECKING:
    import numpy.typing as npt

__all__ = ["FileReader", "FileWriter", "dump"]


def _sample(n: int) -> npt.NDArray[np.uint8]:
    """A writable uint8 array of ``n`` bytes for one sample (what the C++ bindings return)."""
    return np.empty(n, np.uint8)


def _resolve(fname: Any) -> ResolvedSources:
    if not isinstance(fname, (str, os.PathLike, list, tuple)):
        raise TypeError("fname must be str, os.PathLike, list or tuple")
    # Sorted by name, not naturally: sample i is the same sample as with the original.
    return resolve_sources(fname, format="ffrecord", natural=False)


class FileReader(Closing):
    """Read one FFRecord file, a list of them, or a directory of ``*.ffr`` files as one sequence.

    Parameters
    ----------
    fname
        A file, a directory (its ``*.ffr`` files, sorted by name as ffrecord does), a glob pattern, or a
        list of these; or a dataset directory (with a manifest), read as its manifest lists it, as
        :func:`recordkit.open` reads it (see :func:`recordkit.io.resolve_sources`).
    check_data
        Verify the header checksum and each sample's CRC-32.

    Attributes
    ----------
    n
        The total number of samples.
    fnames
        The files read, in order.
    check_data
        As given.
    """

    def __init__(self, fname: Any, check_data: bool = True) -> None:
        self._setup(_resolve(fname), check_data)

    def _setup(self, resolved: ResolvedSources, check_data: bool) -> None:
        self._resolved = resolved
        self.fnames: list[str] = list(resolved.files)
        self.check_data = check_data
        self._reader: RecordReader = self._resolved.open(check_crc=check_data)
        # A manifest's count must be the header's: samples are located from the headers.
        self._parts: list[Any] = [self._reader.frame_reader(i) for i in range(len(self.fnames))]
        self._starts = list(itertools.accumulate(map(len, self._parts), initial=0))
        self.n = self._starts[-1]

    def _index(self, index: Any) -> int:
        """Return ``index`` as a sample number; negative indexes count from the end."""
        i = operator.index(index)
        if i < 0:
            i += self.n
        if not 0 <= i < self.n:
            raise IndexError(f"sample index {index} out of range for {self.n} samples")
        return i

    def _indexes(self, indices: Iterable[int]) -> array[int]:
        """Return ``indices`` checked, in one C-level conversion when they are in-range integers."""
        if not isinstance(indices, (Sequence, array, np.ndarray)):
            indices = list(indices)
        try:
            wanted = array("q", indices)
        except (TypeError, OverflowError):
            return array("q", map(self._index, indices))
        if wanted and (min(wanted) < 0 or max(wanted) >= self.n):
            wanted = array("q", map(self._index, wanted))
        return wanted

    def read(self, indices: Iterable[int]) -> list[npt.NDArray[np.uint8]]:
        """Return the samples at ``indices`` as a list of writable uint8 arrays, in the order asked.

        Negative indexes count from the end, as with :func:`recordkit.open`'s readers.
        """
        if self._reader.closed:
            raise ValueError("I/O operation on a closed FileReader")
        wanted = self._indexes(indices)
        parts = self._parts
        if len(parts) == 1:
            return parts[0].read_into(wanted, _sample)  # type: ignore[no-any-return]
        starts = self._starts
        samples: list[npt.NDArray[np.uint8]] = []
        for i in wanted:
            part = bisect_right(starts, i) - 1
            samples += parts[part].read_into((i - starts[part],), _sample)
        return samples

    def read_one(self, index: int) -> npt.NDArray[np.uint8]:
        """Return sample ``index`` as a writable uint8 array (a negative index counts from the end)."""
        return self.read((self._index(index),))[0]

    def validate(self) -> None:
        """Verify the header checksum of every file (as ``ffrecord.FileReader.validate`` does).

        Samples are not read; their CRCs are checked as they are read when ``check_data`` is on. Iterate
        ``recordkit.open(reader.fnames)`` to verify every sample.

        Raises
        ------
        recordkit.errors.ChecksumError
            If a header checksum does not match.
        """
        self._resolved.open(check_crc=True).close()

    def get_offsets(self, file_index: int) -> npt.NDArray[np.int64]:
        """Return the sample offsets of file ``file_index`` followed by its size (``n + 1`` values)."""
        frames = self._parts[file_index]
        return np.append(np.frombuffer(frames.offsets, np.int64), np.int64(frames.size))

    def get_checksums(self, file_index: int) -> npt.NDArray[np.uint32]:
        """Return the sample CRC-32 values stored in the header of file ``file_index`` (``n`` values)."""
        return np.array(self._parts[file_index].crcs, dtype=np.uint32)

    def close(self) -> None:
        """Close the files."""
        self._reader.close()

    def __reduce__(self) -> tuple[Any, ...]:
        # Readers are sent to DataLoader workers by pickling; each worker reopens the same files (a
        # dataset's with its manifest's checks).
        return (_reopen_file_reader, (self._resolved, self.check_data))


def _reopen_file_reader(resolved: ResolvedSources, check_data: bool) -> FileReader:
    reader = FileReader.__new__(FileReader)
    reader._setup(resolved, check_data)
    return reader


class FileWriter(Closing):
    """Write ``n`` samples to an FFRecord file.

    Parameters
    ----------
    fname
        The output file.
    n
        The number of samples that will be written.

    Attributes
    ----------
    n
        As given.
    count
        Samples written so far.
    """

    def __init__(self, fname: str | os.PathLike[str], n: int) -> None:
        if not isinstance(fname, (str, os.PathLike)):
            raise TypeError("fname must be str or os.PathLike")
        self.n = operator.index(n)
        self._writer: RecordWriter = _open(fname, "w", format="ffrecord", n=self.n)

    @property
    def count(self) -> int:
        """The number of samples written so far."""
        return self._writer.count

    def write_one(self, data: Any) -> None:
        """Append one sample (``bytes``, ``bytearray``, a uint8 array or any buffer)."""
        self._writer.write(data)

    def close(self) -> None:
        """Write the header and move the file into place.

        Raises
        ------
        ValueError
            If fewer than ``n`` samples were written; no file is left.
        """
        self._writer.close()

    def _leave(self, *, failed: bool) -> None:
        if failed:
            self._writer.abort()
        else:
            self.close()


def dump(
    dataset: Sequence[Any], fname: str | os.PathLike[str], nfiles: int, verbose: bool = False
) -> None:
    """Write the items of ``dataset`` (indexable, with ``len``) to ``nfiles`` FFRecord files.

    With ``nfiles == 1``, ``fname`` is the output file. Otherwise ``fname`` is a directory that receives
    ``PART_00000.ffr``, ``PART_00001.ffr``, ... of ``ceil(len / nfiles)`` items each (the last ones may
    have fewer, and there may be fewer files than asked), as ``ffrecord.utils.dump`` does.

    Parameters
    ----------
    dataset
        Items of bytes-like data.
    fname
        The output file or directory.
    nfiles
        How many files to split into.
    verbose
        Show a progress bar (needs ``tqdm``).
    """
    count = len(dataset)
    if nfiles == 1:
        _write_part(dataset, range(count), fname, verbose)
        return
    if nfiles < 1:
        raise ValueError(f"nfiles must be at least 1, not {nfiles}")
    os.makedirs(fname, exist_ok=True)
    per_file = max(1, -(-count // nfiles))
    for number, first in enumerate(range(0, count, per_file)):
        part = os.path.join(fname, f"PART_{number:05d}.ffr")
        _write_part(dataset, range(first, min(first + per_file, count)), part, verbose)


def _write_part(
    dataset: Sequence[Any], indices: range, fname: str | os.PathLike[str], verbose: bool
) -> None:
    steps: Iterable[int] = indices
    if verbose:
        with needs("verbose=True", "tqdm", "cli", "tqdm"):
            from tqdm import tqdm

        steps = tqdm(indices)
    with FileWriter(fname, len(indices)) as writer:
        for i in steps:
            writer.write_one(dataset[i])
