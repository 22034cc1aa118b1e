"""How a format's names and file suffixes are made to agree (the format contract's ``aliases``)."""

from __future__ import annotations

import re

_SUFFIX_LIKE = re.compile(r"[a-z0-9_]+")


def agreeing_names(
    name: str, aliases: tuple[str, ...], extensions: tuple[str, ...]
) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """A format's aliases and extensions made to agree: each suffix is a name, each name a suffix.

    A suffix (``.ffr``) names the format (``format="ffr"``), and a name that could be a suffix
    (``"ffrecord"``) is one (``x.ffrecord``); the declared ones keep their order, the derived ones follow.
    """
    stems = (ext[1:] for ext in extensions if ext.startswith("."))
    key = name.lower()
    agreed_aliases = tuple(
        dict.fromkeys(known.lower() for known in (*aliases, *stems) if known.lower() != key)
    )
    as_suffixes = (f".{known}" for known in (key, *agreed_aliases) if _SUFFIX_LIKE.fullmatch(known))
    return agreed_aliases, tuple(dict.fromkeys((*extensions, *as_suffixes)))
