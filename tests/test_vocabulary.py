"""One word per concept: the keyword arguments of the public API follow docs/api.md's vocabulary.

Every public callable of every public module (docs/api.md lists them; ``test_public_api.public_all`` reads
them from the source) is introspected: functions, classes' ``__init__`` and public methods. A parameter
named by one of the synonyms the vocabulary replaced fails, unless ALLOWED gives a reason for it; the old
names keep working only through ``recordkit.support.moved.renamed_arguments``, which does not show them in
the signature. The copied APIs (``recordkit.compat``) keep the names of the APIs they copy.
"""

from __future__ import annotations

import importlib
import inspect
import re
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from test_public_api import COPIED_APIS, public_all

from recordkit.support.moved import REMOVED_IN, RENAMED, RENAMED_IN, renamed_arguments

API_MD = Path(__file__).resolve().parents[1] / "docs" / "api.md"

# Synonym -> the vocabulary's word for the concept (docs/api.md, "Vocabulary").
FORBIDDEN = {
    "src": "sources",
    "source": "sources",
    "logdir_or_file": "sources",
    "logdir": "sources",
    "ds": "data",
    "bag": "data",
    "out": "dest",
    "output": "dest",
    "dst": "dest",
    "destination": "dest",
    "pattern": "dest",
    "spec": "features",
    "rows_per_shard": "max_records",
    "shard_size": "max_records",
    "records_per_shard": "max_records",
    "poll": "poll_interval",
    "interval": "poll_interval",
    "writer_options": "options",
}

# (callable's dotted path, or a module prefix ending in ".", parameter) -> why the synonym is right there.
ALLOWED = {
    (
        "recordkit.formats.",
        "source",
    ): "a frame reader takes one opened stream (formats.base.Source), the "
    "protocol a registered format implements, not sources to resolve",
    (
        "recordkit.io.sources.open_source",
        "src",
    ): "opens one element of sources (one path, URL or file "
    "object), the building block below resolve_sources",
    ("recordkit.io.sources.Opened.__init__", "source"): "a field: the one opened Source",
    ("recordkit.io.sources.resolve_format", "source"): "one opened Source",
    ("recordkit.io.reading_format", "source"): "one opened Source",
    (
        "recordkit.io.find_dataset",
        "source",
    ): "one element of sources, asked whether it is a dataset",
    (
        "recordkit.io.is_glob_pattern",
        "source",
    ): "one element of sources, asked whether it is a glob",
    ("recordkit.io.ResolvedSources.__new__", "source"): "a field (ResolvedSources.source): the one "
    "element the sources were, for messages",
    ("recordkit.decode.images.decode_images", "spec"): "one Image spec, not a mapping of features",
    (
        "recordkit.decode.specs.ColumnReader.",
        "spec",
    ): "one feature's spec, not a mapping of features",
}

# Each writer of a dataset takes what it writes, then where it goes.
WRITERS = ("write", "write_records")
WRITER_PARAMETERS = ["data", "dest"]


def callables() -> Iterator[tuple[str, Callable[..., Any]]]:
    """(dotted path, callable) for every public function, class ``__init__`` and public method."""
    for module_name, names in sorted(public_all().items()):
        if module_name == COPIED_APIS or module_name.startswith(COPIED_APIS + "."):
            continue
        try:
            module = importlib.import_module(module_name)
        except (
            ImportError
        ):  # an integration whose extra is missing here: checked where it is installed
            continue
        for name in names:
            value = getattr(module, name)
            path = f"{module_name}.{name}"
            if inspect.isclass(value):
                for attribute, member in vars(value).items():
                    if attribute.startswith("_") and attribute not in ("__init__", "__new__"):
                        continue
                    if isinstance(member, (staticmethod, classmethod)):
                        member = member.__func__
                    if inspect.isfunction(member):
                        yield f"{path}.{attribute}", member
            elif inspect.isfunction(value):
                yield path, value


def allowed(path: str, parameter: str) -> bool:
    return any(
        name == parameter and (path == where or (where.endswith(".") and path.startswith(where)))
        for where, name in ALLOWED
    )


@pytest.fixture(scope="module")
def signatures() -> dict[str, inspect.Signature]:
    with warnings.catch_warnings():
        warnings.simplefilter(
            "ignore", DeprecationWarning
        )  # a moved name is still listed somewhere
        return {path: inspect.signature(function) for path, function in callables()}


def test_the_public_callables_are_found(signatures):
    assert "recordkit.io.open" in signatures
    assert "recordkit.datasets.ShardWriter.__init__" in signatures
    assert "recordkit.tensorboard.scalars" in signatures
    if _importable("recordkit.integrations.ray"):
        assert "recordkit.integrations.ray.write_records" in signatures
    assert len(signatures) > 150


def test_no_parameter_uses_a_forbidden_synonym(signatures):
    drifted = [
        f"{path}({name}=): call it {FORBIDDEN[name]}="
        for path, signature in signatures.items()
        for name in signature.parameters
        if name in FORBIDDEN and not allowed(path, name)
    ]
    assert not drifted, "docs/api.md's vocabulary names these differently: " + "; ".join(drifted)


def _importable(module_name: str) -> bool:
    try:
        importlib.import_module(module_name)
    except ImportError:
        return False
    return True


def test_every_allowed_entry_is_still_used(signatures):
    modules = sorted(public_all(), key=len, reverse=True)
    checked = {
        where
        for where, _ in ALLOWED
        if _importable(next(m for m in modules if where.startswith(m + ".")))
    }
    used = {
        (where, name)
        for where, name in ALLOWED
        for path, signature in signatures.items()
        if name in signature.parameters
        and (path == where or (where.endswith(".") and path.startswith(where)))
    }
    assert used == {(where, name) for where, name in ALLOWED if where in checked}


def test_the_writers_take_data_then_dest(signatures):
    modules = set(public_all())
    writers = {  # module-level functions; a writer object's write(record) is another verb
        path: signature
        for path, signature in signatures.items()
        if path.rsplit(".", 1)[0] in modules and path.rsplit(".", 1)[1] in WRITERS
    }
    for module_name in ("recordkit.integrations.hf", "recordkit.integrations.dask"):
        if _importable(module_name):
            assert (
                f"{module_name}.{'write' if module_name.endswith('hf') else 'write_records'}"
                in writers
            )
    for path, signature in writers.items():
        assert list(signature.parameters)[:2] == WRITER_PARAMETERS, path


def test_the_signatures_show_the_new_names_only(signatures):
    for path, renames in RENAMED.items():
        key = path if path in signatures else path + ".__init__"
        if key not in signatures:  # defined in a private module and re-exported: found by its home
            continue
        parameters = signatures[key].parameters
        assert not set(renames) & set(parameters), path
        assert set(renames.values()) <= set(parameters), path


# -- the decorator ----------------------------------------------------------------------------------------


@renamed_arguments(old="new", gone="kept")
def _sample(new: int, second: int = 0, *, kept: int = 0) -> tuple[int, int, int]:
    return new, second, kept


def test_an_old_keyword_warns_naming_the_new_one_and_works():
    with pytest.warns(DeprecationWarning, match="is now") as caught:
        assert _sample(old=1, gone=3) == (1, 0, 3)
    messages = sorted(str(warning.message) for warning in caught)
    assert "_sample(old=...) is now" in messages[1]
    assert f"(new=...) since {RENAMED_IN}" in messages[1]
    assert f"will be removed in {REMOVED_IN}" in messages[1]
    assert "(kept=...)" in messages[0]
    assert {warning.filename for warning in caught} == {__file__}  # the caller's line


def test_new_keywords_and_positions_do_not_warn():
    assert _sample(1, 2, kept=3) == (1, 2, 3)
    assert _sample(new=1, second=2) == (1, 2, 0)


def test_an_old_keyword_beside_its_new_name_is_refused():
    with pytest.raises(TypeError, match="both old= and new"):
        _sample(1, old=2)
    with pytest.raises(TypeError, match="both gone= and kept"):
        _sample(1, gone=2, kept=3)


def test_a_rename_to_a_parameter_that_does_not_exist_is_refused():
    with pytest.raises(TypeError, match="no parameter"):
        renamed_arguments(old="missing")(_sample.__wrapped__)  # type: ignore[attr-defined]


def test_a_renamed_class_keeps_its_signature_and_is_recorded():
    @renamed_arguments(pattern="dest")
    class Writer:
        def __init__(self, dest: str) -> None:
            self.dest = dest

    assert list(inspect.signature(Writer).parameters) == ["dest"]
    with pytest.warns(DeprecationWarning, match=r"Writer\(pattern=\.\.\.\) is now"):
        assert Writer(pattern="x").dest == "x"
    assert RENAMED[f"{__name__}.{Writer.__qualname__}"] == {"pattern": "dest"}
    del RENAMED[f"{__name__}.{Writer.__qualname__}"]


# -- docs/api.md ------------------------------------------------------------------------------------------


def _documented_renames() -> set[tuple[str, str, str]]:
    """(callable, old, new) from the table of renamed arguments in docs/api.md."""
    text = API_MD.read_text(encoding="utf-8")
    section = text.split("## Arguments renamed in 0.4", 1)[1].split("\n## ", 1)[0]
    found = set()
    for row in re.findall(r"^\| `([\w.]+)` \| (.+?) \|$", section, re.MULTILINE):
        for old, new in re.findall(r"`(\w+)=` → `(\w+)=`", row[1]):
            found.add((row[0], old, new))
    return found


def test_api_md_lists_every_renamed_argument(signatures):
    assert (
        signatures
    )  # every public module that imports here is imported: RENAMED holds their renames
    recorded = {
        (path, old, new)
        for path, renames in RENAMED.items()
        if path.startswith("recordkit.")
        for old, new in renames.items()
    }
    modules = sorted(public_all(), key=len, reverse=True)
    documented = {
        row
        for row in _documented_renames()
        if _importable(next((m for m in modules if row[0].startswith(m + ".")), row[0]))
    }
    assert documented == recorded


def test_api_md_has_the_vocabulary():
    section = API_MD.read_text(encoding="utf-8").split("## Vocabulary", 1)[1].split("\n## ", 1)[0]
    for word in set(FORBIDDEN.values()) | {"path", "to", "idle_timeout", "timeout", "min_records"}:
        assert f"`{word}`" in section, word


# -- the old keywords of the real entry points ------------------------------------------------------------


def _old(match: str) -> Any:
    return pytest.warns(DeprecationWarning, match=re.escape(match))


def test_old_keywords_of_opening_writing_and_following_still_work(tmp_path):
    import recordkit as rk
    from recordkit.io import open_writer

    path = tmp_path / "a.tfrecord"
    with _old("open_writer(dst=...) is now recordkit.io.writer.open_writer(dest=...)"):
        writer = open_writer(dst=path)
    with writer:
        writer.write_many([b"a", b"b"])
    with (
        _old("recordkit.io.open(src=...) is now recordkit.io.open(sources=...)"),
        rk.open(src=path) as r,
    ):
        assert list(r) == [b"a", b"b"]
    with _old("follow(poll=...) is now recordkit.io.following.follow(poll_interval=...)"):
        assert list(rk.follow(path, idle_timeout=0, poll=0.01)) == [b"a", b"b"]
    with (
        _old("ShardWriter(pattern=...) is now"),
        rk.ShardWriter(pattern=str(tmp_path / "s-{shard}.tfrecord"), max_records=1) as shards,
    ):
        shards.write_many([b"x", b"y"])
    assert len(shards.manifest.shards) == 2


def test_old_keywords_of_recovery_still_work(tmp_path):
    from recordkit.formats.tfrecord import frame
    from recordkit.recover import salvage, scan

    damaged = tmp_path / "damaged.tfrecord"
    damaged.write_bytes(frame(b"a") + frame(b"b")[:-1] + frame(b"c"))
    with _old("scan(src=...) is now recordkit.recover.scan(path=...)"):
        records = scan(src=damaged, warn=False)
    with records:
        assert list(records) == [b"a", b"c"]
    with (
        _old("salvage(src=...)"),
        _old("salvage(dst=...) is now recordkit.recover.salvage(dest=...)"),
    ):
        report = salvage(src=damaged, dst=tmp_path / "fixed.tfrecord", warn=False)
    assert report.records == 2


def test_old_keywords_of_the_dask_writer_still_work(tmp_path):
    bag = pytest.importorskip("dask.bag")
    from recordkit.integrations import dask as rkd

    items = bag.from_sequence([b"a", b"b", b"c"], npartitions=2)
    with _old("write_records(bag=...)"), _old("write_records(path=...) is now"):
        manifest = rkd.write_records(bag=items, path=tmp_path / "out", format="tfrecord")
    assert sum(shard.records for shard in manifest.shards) == 3


def test_old_keywords_of_the_tensorboard_readers_still_work(tmp_path):
    pytest.importorskip("pandas")
    import recordkit as rk

    tmp_path.joinpath("events.out.tfevents.1.host").write_bytes(b"")
    with _old("scalars(logdir_or_file=...) is now recordkit.tensorboard.scalars(sources=...)"):
        assert len(rk.tensorboard.scalars(logdir_or_file=tmp_path)) == 0
    with _old("follow(poll=...)"), _old("follow(logdir_or_file=...)"):
        follower = rk.tensorboard.follow(logdir_or_file=tmp_path, idle_timeout=0, poll=0.01)
    with follower:
        assert list(follower) == []


def test_old_keywords_of_the_followers_still_work(tmp_path):
    pytest.importorskip("pandas")
    from recordkit.io import Follower, Following
    from recordkit.tensorboard import LogFollower, _frames

    path = tmp_path / "events.out.tfevents.1.host"
    path.write_bytes(b"")
    with _old("Following(interval=...) is now recordkit.io.following.Following(poll_interval=...)"):
        following = Following(Follower(path), idle_timeout=0, interval=0.01)
    with following:
        assert following.poll_interval == 0.01
        assert list(following) == []
    build = _frames.builder("scalars", None, "RGB")
    with (
        _old("LogFollower(logdir=...) is now recordkit.tensorboard._follow.LogFollower(sources="),
        _old("LogFollower(interval=...) is now"),
    ):
        follower = LogFollower(
            logdir=str(tmp_path),
            kind="scalars",
            build=build,
            idle_timeout=0,
            interval=0.01,
            check_crc=True,
        )
    with follower:
        assert follower.poll_interval == 0.01
        assert list(follower) == []
        with _old("LogFollower.logdir is now LogFollower.sources"):
            assert follower.logdir == follower.sources == str(tmp_path)
