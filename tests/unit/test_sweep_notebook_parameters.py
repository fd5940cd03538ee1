"""A researcher's saved notebook cannot change what `servebook sweep` runs (issue 56, item 4): JupyterLab's autosave
wrote `overrides = {"knobs.chunk_size": 128}` into the template a sweep hands papermill, and every later candidate
carried it. The sweep now sets every parameter the template declares, refuses a template declaring one it does not
set, and the repository's notebooks/ are copies for editing, not links to the template."""

import json

import nbformat
import papermill
import pytest

from servebook.config import load_study
from servebook.journal import Journal
from servebook.present import DryRunView
from servebook.sweeps import PapermillRunner
from servebook.sweeps.dryrun import planned
from servebook.util.errors import InputError
from servebook.util.paths import project_root
from servebook.util.progress import Reporter
from servebook.util.render import to_plain
from servebook.util.resources import shipped_file

STUDY = "data/studies/tiny-demo.yaml"


def saved_by_a_researcher(tmp_path, old: str, new: str):
    """The shipped template with one line of its parameters cell changed, as JupyterLab would save it."""
    notebook = nbformat.read(shipped_file("notebooks", "qualify.ipynb"), as_version=4)
    cell = next(c for c in notebook.cells if "parameters" in c.metadata.get("tags", []))
    assert old in cell.source
    cell.source = cell.source.replace(old, new)
    path = tmp_path / "qualify.ipynb"
    nbformat.write(notebook, path)
    return path


def parameters_given(runner, tmp_path, monkeypatch):
    """What one run of the study's first candidate hands papermill (nothing executes)."""
    given = []

    def execute(self, output, parameters, progress):
        given.append(parameters)
        return "stopped here"

    monkeypatch.setattr(PapermillRunner, "_execute", execute)
    study = load_study(project_root() / STUDY)
    entry = study.expand()[1]
    runner.run(study, entry, Journal(tmp_path / "j"), Reporter())
    return study, entry, given[0]


def as_the_kernel_sees_it(template, parameters):
    """The notebook's parameters after papermill's injection, evaluated as the kernel would."""
    notebook = papermill.parameterize.parameterize_notebook(papermill.iorw.load_notebook_node(str(template)), parameters)
    namespace: dict = {}
    for cell in notebook.cells:
        if {"parameters", "injected-parameters"} & set(cell.metadata.get("tags", [])):
            exec(cell.source, namespace)  # noqa: S102 - the test's own notebook
    return namespace


def test_a_value_saved_in_the_templates_parameters_cell_never_reaches_a_sweeps_run(tmp_path, monkeypatch):
    template = saved_by_a_researcher(tmp_path, "overrides = {}", 'overrides = {"knobs.chunk_size": 128}')
    study, entry, parameters = parameters_given(PapermillRunner(notebook=template), tmp_path, monkeypatch)
    seen = as_the_kernel_sees_it(template, parameters)
    assert seen["overrides"] == {}
    assert seen["candidate_path"] is None and seen["plan_path"] is None and seen["fail_on"] is None
    assert seen["candidate"] == entry.candidate.model_dump(mode="json")
    assert seen["plan"] == study.plan.model_dump(mode="json")


def test_a_parameter_the_sweep_does_not_set_is_refused_naming_the_notebook_and_the_parameter(tmp_path, monkeypatch):
    template = saved_by_a_researcher(tmp_path, "fail_on = None", "fail_on = None\nchunk = 128")
    with pytest.raises(InputError, match=r"qualify.ipynb: parameter 'chunk' is not one servebook sweep sets"):
        parameters_given(PapermillRunner(notebook=template), tmp_path, monkeypatch)
    assert not (tmp_path / "j" / "runs").exists() or not any((tmp_path / "j" / "runs").iterdir())


def test_a_template_without_a_parameters_cell_is_refused(tmp_path, monkeypatch):
    template = saved_by_a_researcher(tmp_path, "fail_on = None", "fail_on = None")
    notebook = nbformat.read(template, as_version=4)
    for cell in notebook.cells:
        cell.metadata.pop("tags", None)
    nbformat.write(notebook, template)
    with pytest.raises(InputError, match="no cell tagged `parameters`"):
        parameters_given(PapermillRunner(notebook=template), tmp_path, monkeypatch)


def test_the_shipped_template_declares_only_what_the_sweep_sets(tmp_path, monkeypatch):
    _, _, parameters = parameters_given(PapermillRunner(), tmp_path, monkeypatch)
    assert set(papermill.inspect_notebook(str(shipped_file("notebooks", "qualify.ipynb")))) == set(parameters)


def test_the_dry_run_shows_what_each_notebook_execution_gets():
    study = load_study(project_root() / STUDY)
    text = to_plain(DryRunView(planned(study, None).entries, study.plan.id, None).blocks())
    entry = study.expand()[0]
    assert "overrides={}" in text and "fail_on=None" in text
    assert f"candidate=<candidate {entry.candidate.id}, inline>" in text
    assert f"plan=<plan {study.plan.id}, inline>" in text and "candidate_path=None" in text


@pytest.mark.parametrize("name", ["qualify.ipynb", "compare.ipynb"])
def test_the_notebooks_jupyterlab_opens_are_copies_not_the_template(name):
    """JupyterLab saves into the file it opened: a link would write a researcher's edits into the template. The
    committed copy starts as the template's cells (a developer who changes the template copies it over)."""
    copy = project_root() / "notebooks" / name
    assert not copy.is_symlink() and copy.is_file()
    template = shipped_file("notebooks", name)
    assert copy.resolve() != template.resolve()
    sources = [[c["source"] for c in json.loads(p.read_text())["cells"]] for p in (copy, template)]
    assert sources[0] == sources[1]


def test_checkpoints_jupyterlab_writes_are_not_committed():
    assert ".ipynb_checkpoints/" in (project_root() / ".gitignore").read_text().splitlines()

