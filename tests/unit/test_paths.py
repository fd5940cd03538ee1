"""One path rule for every entry point (issue 19): a relative path is read from the current directory, then from
the project root (said aloud); a journal that does not exist is an error wherever a command only reads it."""

import pytest
from typer.testing import CliRunner

import servebook as sb
from servebook.config.errors import InputError
from servebook.util.paths import project_root


@pytest.fixture
def in_notebooks_dir(tmp_path, monkeypatch):
    """Where JupyterLab starts a kernel: a directory below the project, not its root."""
    monkeypatch.chdir(tmp_path)
    return tmp_path


def test_every_loader_falls_back_to_the_project_root_and_says_so(in_notebooks_dir, capsys):
    study = sb.load_study("data/studies/tiny-demo.yaml")
    candidate = sb.load_candidate("data/candidates/tiny-llamacpp.yaml")
    assert study.name == "tiny-demo" and candidate.engine == "llamacpp"
    said = capsys.readouterr().err
    assert "not in" in said and str(project_root() / "data" / "studies" / "tiny-demo.yaml") in said


def test_a_file_in_neither_place_names_both(in_notebooks_dir):
    with pytest.raises(InputError, match="looked in .* and in the project root"):
        sb.load_study("data/studies/missing.yaml")


def test_the_current_directory_wins_over_the_project_root(in_notebooks_dir, capsys):
    (in_notebooks_dir / "data" / "studies").mkdir(parents=True)
    (in_notebooks_dir / "data" / "studies" / "tiny-demo.yaml").write_text(
        (project_root() / "data" / "studies" / "tiny-demo.yaml").read_text().replace("name: tiny-demo", "name: mine"))
    assert sb.load_study("data/studies/tiny-demo.yaml").name == "mine"
    assert "not in" not in capsys.readouterr().err


def test_a_journal_that_does_not_exist_is_not_an_empty_journal(in_notebooks_dir):
    journal = sb.Journal("j-nb")
    assert "no journal at" in str(journal)
    with pytest.raises(InputError, match="nothing has been written there"):
        journal.run("r1")
    with pytest.raises(InputError, match="nothing has been written there"):
        sb.judge(sb.load_study("data/studies/tiny-demo.yaml"), journal)


def test_a_journal_written_from_one_directory_is_read_there(in_notebooks_dir):
    sb.Journal("j-nb").ensure_writable()  # what qualify does first
    assert sb.Journal("j-nb").exists and (in_notebooks_dir / "j-nb").is_dir()


@pytest.mark.parametrize("command", [["journal", "ls"], ["journal", "show", "r1"], ["judge", "STUDY"],
                                     ["history", "baseline"]])
def test_cli_commands_that_read_refuse_a_missing_journal(in_notebooks_dir, command):
    from servebook.cli import app

    study = str(project_root() / "data" / "studies" / "tiny-demo.yaml")
    args = [study if a == "STUDY" else a for a in command] + ["--journal", str(in_notebooks_dir / "nowhere")]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 2, result.output
    assert "nothing has been written there" in " ".join(result.output.split())
