"""Where servebook keeps things outside the repository (engine builds, generated models)."""

from __future__ import annotations

import os
from pathlib import Path


def cache_root() -> Path:
    """The cache directory; SERVEBOOK_CACHE overrides it so CI and tests can pin a location."""
    override = os.environ.get("SERVEBOOK_CACHE")
    if override:
        return Path(override).expanduser()
    xdg = os.environ.get("XDG_CACHE_HOME")
    base = Path(xdg).expanduser() if xdg else Path.home() / ".cache"
    return base / "servebook"


def repo_data_dir() -> Path:
    """The `data/` folder shipped beside the library (prompt corpora, example candidates, plans)."""
    return Path(__file__).resolve().parents[3] / "data"
