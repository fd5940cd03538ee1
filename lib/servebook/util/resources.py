"""What the library reads at run time, shipped inside the package and read through `importlib.resources`.

The prompt corpora, the recorded engine contracts, the notebooks papermill executes and the candidate and plan
the qualify notebook names as its defaults live in `lib/servebook/data/` (package data in pyproject.toml), laid
out as the repository's `data/`, so an installed wheel has them wherever it is installed; nothing the library
runs reads the repository's folders. They live in the package rather than being mapped in at build time because
an editable install, a wheel and a plain checkout then all read the same files through the same call. The
repository keeps its user-facing paths (`data/corpora`, `data/engine-contracts`,
`data/candidates/tiny-llamacpp.yaml`, `data/plans/quick.yaml`) as symbolic links to these files, so there is one
copy of each. The notebooks are the exception: `notebooks/*.ipynb` are copies, because JupyterLab saves (and
autosaves) what a researcher types into the file it opened, and a link would carry that into the template
`servebook sweep` runs (issue 56, item 4). The other examples (studies, sample journals) stay in `data/`, as
they are inputs a user names, not data the library reads by itself."""

from __future__ import annotations

import atexit
from contextlib import ExitStack
from importlib.resources import as_file, files
from importlib.resources.abc import Traversable
from pathlib import Path

PACKAGE = "servebook"
FOLDER = "data"

# The extracted copies `shipped_file` hands out (none for an unpacked install, where the file is its own path)
# must outlive every caller in the process: they are removed at exit.
_extracted = ExitStack()
atexit.register(_extracted.close)


def shipped(*parts: str) -> Traversable:
    """A file or folder the package ships, e.g. `shipped("corpora", "prose.txt")`."""
    return files(PACKAGE).joinpath(FOLDER, *parts)


def shipped_file(*parts: str) -> Path:
    """A shipped file as a real path, for what hands it to another program by name (papermill opens the
    notebook from a path): the file itself in an unpacked install, else a copy kept until the process exits."""
    resource = shipped(*parts)
    if not resource.is_file():
        raise FileNotFoundError(f"servebook ships no {'/'.join(parts)} (looked in {resource})")
    return _extracted.enter_context(as_file(resource))
