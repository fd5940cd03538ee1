"""A name that is not among the known ones: said, with the close names, instead of an empty answer.

A misspelled filter (`--study tiny-dmeo`) used to return 0 runs as if there were none; every command that takes
a name of something recorded (a study, a candidate, a status, a format) says it is unknown and what was meant.
"""

from __future__ import annotations

import difflib
from typing import Iterable

from .errors import InputError


def close_names(name: str, known: Iterable[str], n: int = 3) -> list[str]:
    """The known names closest to `name`, best first (difflib's ratio of at least 0.6; case ignored)."""
    names = sorted({str(k) for k in known if k is not None and str(k) != ""})
    by_folded = {k.casefold(): k for k in names}
    matches = difflib.get_close_matches(name.casefold(), list(by_folded), n=n, cutoff=0.6)
    return [by_folded[m] for m in matches]


def suggestion(name: str, known: Iterable[str], *, listed: int = 12) -> str:
    """`; did you mean 'x'?` when a name is close, else the known names (at most `listed` of them)."""
    names = sorted({str(k) for k in known if k is not None and str(k) != ""})
    close = close_names(name, names)
    if close:
        return "; did you mean " + " or ".join(repr(c) for c in close) + "?"
    if not names:
        return ""
    shown = ", ".join(names[:listed]) + (f", ... ({len(names)} in all)" if len(names) > listed else "")
    return f"; known: {shown}"


def unknown(what: str, name: str, known: Iterable[str], where: str = "") -> InputError:
    """The error for a name that is none of `known`: `--study 'tiny-dmeo': no such study in X; did you mean ...`."""
    return InputError(f"{what} {name!r}: not known{' ' + where if where else ''}{suggestion(name, known)}")
