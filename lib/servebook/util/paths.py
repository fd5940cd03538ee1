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


def project_root() -> Path:
    """The servebook checkout: where `data/`, `notebooks/` and (by default) `journal/` are."""
    return repo_data_dir().parent


def locate(path: str | Path, what: str = "file") -> Path:
    """The one rule for a user's relative path, in the CLI, the notebooks and the library alike: from the current
    directory where it exists there, else from the project root where it exists there (said aloud: JupyterLab starts
    kernels in notebooks/, the CLI usually runs in the root), else from the current directory, where a command
    that creates it will create it. Absolute paths are taken as given."""
    given = Path(str(path).removeprefix("file://")).expanduser()
    if given.is_absolute() or given.exists():
        return given
    fallback = project_root() / given
    if fallback.exists():
        say(f"{what} {path}: not in {Path.cwd()}; using {fallback} (a relative path is read from the current "
            "directory, then from the project root)")
        return fallback
    return given


def not_found(path: str | Path, what: str) -> str:
    """The message for a relative path found in neither place `locate` looks."""
    given = Path(str(path))
    if given.is_absolute():
        return f"{path}: {what} not found"
    return f"{path}: {what} not found (looked in {Path.cwd()} and in the project root {project_root()})"


def say(message: str) -> None:
    """A note to the user beside the work: on stdout in a Jupyter kernel (stderr shows there as a warning box),
    on stderr elsewhere (stdout may carry a command's JSON)."""
    from .progress import notes_stream

    print(f"note: {message}", file=notes_stream(), flush=True)
