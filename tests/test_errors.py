"""The error tree: common root, standard-library bases, pickling and message formats."""

from __future__ import annotations

import io
import pickle
from pathlib import Path

import pytest

import recordkit as rk
from recordkit import errors

ERROR_CLASSES = [
    obj
    for obj in (getattr(errors, name) for name in errors.__all__)
    if isinstance(obj, type) and issubclass(obj, BaseException) and not issubclass(obj, Warning)
]
WARNING_CLASSES = [
    obj
    for obj in (getattr(errors, name) for name in errors.__all__)
    if isinstance(obj, type) and issubclass(obj, Warning)
]

# class -> standard-library classes a caller may catch it as
STDLIB_BASES: dict[type[BaseException], tuple[type[BaseException], ...]] = {
    errors.RecordKitError: (Exception,),
    errors.UnknownFormatError: (ValueError,),
    errors.CorruptRecordError: (OSError,),
    errors.ChecksumError: (OSError,),
    errors.TruncatedRecordError: (OSError, EOFError),
    errors.FileChangedError: (OSError,),
    errors.HeaderError: (OSError,),
    errors.StaleIndexError: (OSError,),
    errors.ManifestError: (OSError,),
    errors.DecodeError: (ValueError,),
    errors.UnsupportedOperationError: (io.UnsupportedOperation, OSError, ValueError),
    errors.NoLengthError: (io.UnsupportedOperation, TypeError),
    errors.UnsafePathError: (PermissionError, OSError),
    errors.StateError: (ValueError,),
    errors.OptionsError: (ValueError,),
    errors.OutputExistsError: (FileExistsError,),
    errors.RemoteReadError: (OSError,),
}
CORRUPT_CLASSES = [
    errors.CorruptRecordError,
    errors.ChecksumError,
    errors.TruncatedRecordError,
    errors.FileChangedError,
    errors.HeaderError,
    errors.StaleIndexError,
    errors.ManifestError,
]


def test_every_error_is_listed_here() -> None:
    assert set(ERROR_CLASSES) == set(STDLIB_BASES)


@pytest.mark.parametrize("cls", ERROR_CLASSES, ids=lambda c: c.__name__)
def test_errors_derive_from_root_and_stdlib(cls: type[BaseException]) -> None:
    assert issubclass(cls, errors.RecordKitError)
    for base in STDLIB_BASES[cls]:
        assert issubclass(cls, base)


@pytest.mark.parametrize("cls", CORRUPT_CLASSES, ids=lambda c: c.__name__)
def test_corrupt_file_errors_share_a_base(cls: type[errors.CorruptRecordError]) -> None:
    assert issubclass(cls, errors.CorruptRecordError)


def test_warnings() -> None:
    assert set(WARNING_CLASSES) == {
        errors.RecordKitWarning,
        errors.LegacyFormatWarning,
        errors.SlowCRCWarning,
        errors.DataLossWarning,
        errors.StaleIndexWarning,
    }
    for cls in WARNING_CLASSES:
        assert issubclass(cls, errors.RecordKitWarning)
        assert issubclass(cls, UserWarning)
        assert not issubclass(cls, errors.RecordKitError)
    assert issubclass(errors.SlowCRCWarning, RuntimeWarning)


def test_errors_have_one_home_and_the_common_ones_are_at_top_level() -> None:
    for cls in ERROR_CLASSES + WARNING_CLASSES:
        assert cls.__name__ in errors.__all__
        assert getattr(errors, cls.__name__) is cls
        if cls.__name__ in rk.__all__:
            assert getattr(rk, cls.__name__) is cls
    common = {
        "RecordKitError",
        "CorruptRecordError",
        "ChecksumError",
        "TruncatedRecordError",
        "DecodeError",
    }
    assert common <= set(rk.__all__)


@pytest.mark.parametrize(
    ("kwargs", "expected"),
    [
        (
            {"path": "a.tfrecord", "index": 3, "offset": 1036},
            "a.tfrecord: record 3 at byte 1036: bad",
        ),
        ({"path": "a.tfrecord", "offset": 12}, "a.tfrecord: byte 12: bad"),
        ({"path": "a.tfrecord", "index": 0}, "a.tfrecord: record 0: bad"),
        ({"path": "a.tfrecord"}, "a.tfrecord: bad"),
        ({"index": 5, "offset": 0}, "record 5 at byte 0: bad"),
        ({"offset": 7}, "byte 7: bad"),
        ({}, "bad"),
        ({"path": Path("d") / "x.ffr", "index": 1}, f"{Path('d') / 'x.ffr'}: record 1: bad"),
    ],
)
def test_corrupt_record_message(kwargs: dict[str, object], expected: str) -> None:
    err = errors.CorruptRecordError("bad", **kwargs)  # type: ignore[arg-type]
    assert str(err) == expected
    assert err.reason == "bad"
    assert err.path == (None if "path" not in kwargs else str(kwargs["path"]))
    assert isinstance(err.path, (str, type(None)))
    assert err.index == kwargs.get("index")
    assert err.offset == kwargs.get("offset")


def test_checksum_message_shows_both_values() -> None:
    err = errors.ChecksumError(
        "data checksum mismatch",
        path="a.tfrecord",
        index=3,
        offset=1036,
        expected=0x1234,
        actual=0xDEADBEEF,
    )
    assert str(err) == (
        "a.tfrecord: record 3 at byte 1036: data checksum mismatch (expected 0x00001234, found 0xdeadbeef)"
    )
    assert (err.expected, err.actual) == (0x1234, 0xDEADBEEF)
    assert str(errors.ChecksumError("mismatch", expected=1)) == "mismatch"


def test_decode_error_attributes() -> None:
    err = errors.DecodeError("feature 'x' is missing", index=4, feature="x")
    assert str(err) == "feature 'x' is missing"
    assert (err.index, err.feature) == (4, "x")
    assert errors.DecodeError("plain").index is None


PICKLE_CASES: list[BaseException] = [
    errors.RecordKitError("root"),
    errors.UnknownFormatError("no format 'xyz'", name="xyz"),
    errors.CorruptRecordError("bad", path="a.tfrecord", index=3, offset=1036),
    errors.ChecksumError("mismatch", path="a.tfrecord", index=1, offset=12, expected=1, actual=2),
    errors.TruncatedRecordError("ends inside the payload", path="t.tfrecord", index=9, offset=99),
    errors.HeaderError("offsets decrease", path="h.ffr", index=2, offset=20),
    errors.StaleIndexError("index is older than the file", path="s.tfrecord"),
    errors.DecodeError("not an Example", index=7, feature="label"),
    errors.UnsupportedOperationError("random access into a GZIP file"),
    errors.NoLengthError("len() of a GZIP file"),
]
ATTRIBUTES = ("path", "index", "offset", "reason", "expected", "actual", "feature", "name")


@pytest.mark.parametrize("err", PICKLE_CASES, ids=lambda e: type(e).__name__)
@pytest.mark.parametrize("protocol", [0, 2, pickle.HIGHEST_PROTOCOL])
def test_pickle_round_trip(err: BaseException, protocol: int) -> None:
    copy = pickle.loads(pickle.dumps(err, protocol=protocol))
    assert type(copy) is type(err)
    assert str(copy) == str(err)
    for attr in ATTRIBUTES:
        assert getattr(copy, attr, "absent") == getattr(err, attr, "absent"), attr


def test_pickled_checksum_error_keeps_a_single_suffix() -> None:
    err = errors.ChecksumError("mismatch", path="p", index=0, offset=0, expected=1, actual=2)
    twice = pickle.loads(pickle.dumps(pickle.loads(pickle.dumps(err))))
    assert str(twice) == str(err)
    assert str(twice).count("expected") == 1


def test_payload_errors_from_example_are_recordkit_errors() -> None:
    with pytest.raises(errors.RecordKitError):
        rk.decode_example(b"\xff")
    with pytest.raises(ValueError, match="malformed OFRecord"):
        rk.decode_ofrecord(b"\x0a\x05ab")
