"""What the library reads at run time ships in the package (issue 31, item 7), with one copy of each file: the
repository's user-facing paths link to the shipped files. tests/e2e/test_wheel.py installs the built wheel."""

import fnmatch
import re
import tomllib
from pathlib import Path

import pytest

from servebook.engines.contracts import recorded_contracts
from servebook.sweeps import QUALIFY_NOTEBOOK
from servebook.util.resources import shipped, shipped_file

REPO = Path(__file__).resolve().parents[2]
PACKAGE = REPO / "lib" / "servebook"


def test_every_file_of_the_package_that_is_not_python_is_package_data():
    """A template, corpus, contract or notebook added under lib/servebook and missed by the globs would be absent
    from the wheel only: the checkout and the editable install would still find it."""
    globs = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"]["servebook"]
    files = [p.relative_to(PACKAGE).as_posix() for p in PACKAGE.rglob("*")
             if p.is_file() and p.suffix not in (".py", ".pyc") and "__pycache__" not in p.parts]
    assert files, "the package ships no data at all"
    unshipped = [f for f in files if not any(fnmatch.fnmatch(f, g) for g in globs)]
    assert not unshipped, f"not in [tool.setuptools.package-data]: {unshipped}"


@pytest.mark.parametrize("link, shipped_as", [
    ("data/corpora", "corpora"),
    ("data/engine-contracts", "engine-contracts"),
    ("data/candidates/tiny-llamacpp.yaml", "candidates/tiny-llamacpp.yaml"),
    ("data/plans/quick.yaml", "plans/quick.yaml"),
    ("data/traces", "traces"),
])
def test_the_user_facing_paths_are_the_shipped_files(link, shipped_as):
    """The notebooks are the exception, copies a researcher edits (tests/unit/test_sweep_notebook_parameters.py)."""
    path = REPO / link
    assert path.is_symlink(), f"{link} should link to lib/servebook/data/{shipped_as}, not be a second copy"
    assert path.resolve() == (PACKAGE / "data" / shipped_as).resolve()


def test_the_library_reads_its_data_from_the_package():
    assert QUALIFY_NOTEBOOK == shipped_file("notebooks", "qualify.ipynb")
    assert QUALIFY_NOTEBOOK.is_relative_to(PACKAGE)
    assert shipped("corpora", "prose.txt").read_text().strip()
    assert {engine for engine, _ in recorded_contracts()} == {"sglang", "vllm"}
    with pytest.raises(FileNotFoundError, match="ships no notebooks/missing.ipynb"):
        shipped_file("notebooks", "missing.ipynb")


def test_no_library_module_reads_the_checkout():
    """Only util/paths.py knows where the checkout is (for a user's relative path); nothing the library runs
    reads from it, or an installed wheel would miss the file."""
    pattern = re.compile(r"\b(repo_data_dir|project_root)\b")
    readers = sorted(p.relative_to(PACKAGE).as_posix() for p in PACKAGE.rglob("*.py")
                     if p.name != "paths.py" and pattern.search(p.read_text()))
    assert not readers, f"these modules read the checkout, which a wheel does not have: {readers}"


def test_the_qualify_notebook_defaults_are_found_where_no_checkout_has_them(tmp_path, monkeypatch, capsys):
    """An installed wheel has no project root: the defaults its notebook names come from the package, said aloud."""
    from servebook.config.errors import InputError
    from servebook.config.loading import load_candidate, load_plan
    from servebook.util import paths

    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(paths, "project_root", lambda: None)
    assert load_candidate("data/candidates/tiny-llamacpp.yaml").name == "tiny-baseline"
    assert load_plan("data/plans/quick.yaml").name == "quick"
    assert "the copy servebook ships" in capsys.readouterr().err
    with pytest.raises(InputError, match="not found in"):
        load_plan("data/plans/missing.yaml")
