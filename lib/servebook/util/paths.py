"""Where servebook keeps things outside the repository (engine builds, generated models)."""

from __future__ import annotations

import os
from pathlib import Path

from .resources import FOLDER, shipped, shipped_file


def cache_root() -> Path:
    """The cache directory; SERVEBOOK_CACHE overrides it so CI and tests can pin a location."""
    override = os.environ.get("SERVEBOOK_CACHE")
    if override:
        return Path(override).expanduser()
    xdg = os.environ.get("XDG_CACHE_HOME")
    base = Path(xdg).expanduser() if xdg else Path.home() / ".cache"
    return base / "servebook"


def project_root() -> Path | None:
    """The servebook checkout the package is imported from (where `data/`, `notebooks/` and, by default,
    `journal/` are), or None for an installed wheel, which has no project beside it. The library reads nothing
    from here by itself (what it ships is in `util.resources`); this is only where a user's relative path may
    also be found."""
    root = Path(__file__).resolve().parents[3]
    return root if (root / "pyproject.toml").is_file() and (root / "lib" / "servebook").is_dir() else None


def repo_data_dir() -> Path:
    """The checkout's `data/` folder (example candidates, plans, studies, sample journals), for tests, scripts
    and benchmarks run in the repository."""
    root = project_root()
    if root is None:
        raise FileNotFoundError("servebook is installed, not imported from a checkout: there is no data/ beside it")
    return root / "data"


def sample_journals_archive(name: str) -> Path:
    """The checkout's archive of sample journals (`name` under data/, e.g.
    data/sample-journals.tar.xz; journal/samples.py reads it): recorded evidence the docs
    cite, not shipped in the wheel (FileNotFoundError where servebook is installed)."""
    return repo_data_dir() / name


def locate(path: str | Path, what: str = "file") -> Path:
    """The one rule for a user's relative path, in the CLI, the notebooks and the library alike: from the current
    directory where it exists there, else from the project root where it exists there (said aloud: JupyterLab starts
    kernels in notebooks/, the CLI usually runs in the root), else, for `data/...`, the copy the package ships
    where it ships one (the defaults the shipped qualify notebook names, so it runs as shipped from an installed
    wheel; said aloud too), else from the current directory, where a command that creates it will create it.
    Absolute paths are taken as given."""
    given = Path(str(path).removeprefix("file://")).expanduser()
    if given.is_absolute() or given.exists():
        return given
    root = project_root()
    if root is not None and (root / given).exists():
        say(f"{what} {path}: not in {Path.cwd()}; using {root / given} (a relative path is read from the current "
            "directory, then from the project root)")
        return root / given
    copy = _shipped_copy(given)
    if copy is not None:
        say(f"{what} {path}: not in {Path.cwd()}; using the copy servebook ships, {copy}")
        return copy
    return given


def _shipped_copy(given: Path) -> Path | None:
    parts = given.parts
    if len(parts) < 2 or parts[0] != FOLDER or not shipped(*parts[1:]).is_file():
        return None
    return shipped_file(*parts[1:])


def not_found(path: str | Path, what: str) -> str:
    """The message for a relative path found in neither place `locate` looks."""
    given, root = Path(str(path)), project_root()
    if given.is_absolute():
        return f"{path}: {what} not found"
    if root is None:
        return f"{path}: {what} not found in {Path.cwd()}"
    return f"{path}: {what} not found (looked in {Path.cwd()} and in the project root {root})"


def say(message: str) -> None:
    """A note to the user beside the work: on stdout in a Jupyter kernel (stderr shows there as a warning box),
    on stderr elsewhere (stdout may carry a command's JSON)."""
    from .progress import notes_stream

    print(f"note: {message}", file=notes_stream(), flush=True)
