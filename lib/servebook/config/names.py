"""Names that become file names (study entries, run ids): one rule, so nothing in a YAML writes outside the journal."""

from __future__ import annotations

import re

SAFE_NAME = r"^[A-Za-z0-9][A-Za-z0-9_.,=+@:-]{0,119}$"
_SAFE = re.compile(SAFE_NAME)


def is_safe_name(name: str) -> bool:
    """Letters, digits and `_ . , = + @ : -`, starting with a letter or digit, at most 120 characters:
    no path separator, no `..` component, no hidden file, nothing a shell or a URL needs to quote."""
    return bool(_SAFE.match(name)) and ".." not in name


def check_safe_name(name: str, what: str) -> str:
    if not is_safe_name(name):
        raise ValueError(f"{what} {name!r} cannot be used as a file name: use letters, digits and _ . , = + @ : - "
                         "(starting with a letter or digit, no '..', at most 120 characters)")
    return name


def safe_name_from(text: str) -> str:
    """A safe name made from generated text (an axis combination such as `drafter={"kind": "ngram"}`)."""
    cleaned = re.sub(r"[^A-Za-z0-9_.,=+@:-]+", "_", text).strip("_.") or "candidate"
    cleaned = re.sub(r"\.{2,}", ".", cleaned)
    return cleaned[:120] if cleaned[0].isalnum() else f"c{cleaned}"[:120]
