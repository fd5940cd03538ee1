"""User text (run ids, paths, notes, archive reasons, labels) reaches a terminal as written: never parsed as rich
markup (`[/x]` was a MarkupError, `[red]` a style that ate the text), and its control characters written out rather
than obeyed (an ESC in a note reached the reader's terminal)."""

import io

from typer.testing import CliRunner

from servebook.cli import app
from servebook.journal import Journal
from servebook.journal.synthetic import write_synthetic_run
from servebook.util.progress import Reporter
from servebook.util.terminal import make_console, markup_safe, terminal_safe

runner = CliRunner()


def test_control_characters_are_written_out_and_brackets_escaped():
    assert terminal_safe("a\x1b[2Jb\x07c\r\x9b\nd\te") == "a\\x1b[2Jb\\x07c\\r\\x9b\nd\te"
    assert markup_safe("[/x] [red]old\x1b") == "\\[/x] \\[red]old\\x1b"


def test_a_note_and_an_archive_reason_holding_markup_and_escapes_are_shown_as_written(tmp_path):
    journal = Journal(tmp_path / "journal")
    run_id = write_synthetic_run(journal, index=1, requests=10).run_id
    where = ["--journal", str(journal.root)]
    noted = runner.invoke(app, ["journal", "note", run_id, "[/x] host \x1b[2J rebooted [red]", *where])
    assert noted.exit_code == 0, noted.output
    archived = runner.invoke(app, ["journal", "archive", run_id, "--why", "[/x] shared GPU", *where])
    assert archived.exit_code == 0, archived.output
    assert "[/x] shared GPU" in archived.output
    shown = runner.invoke(app, ["journal", "show", run_id, *where])
    assert shown.exit_code == 0, shown.output
    assert "[/x] host \\x1b[2J rebooted [red]" in shown.output and "\x1b" not in shown.output


def test_a_run_id_and_a_path_with_brackets_are_named_as_given(tmp_path):
    journal = tmp_path / "runs-[red]old"
    write_synthetic_run(Journal(journal), index=1, requests=10)
    listed = runner.invoke(app, ["journal", "ls", "--journal", str(tmp_path / "runs-[red]old[/x]")])
    assert "runs-[red]old[/x]" in " ".join(listed.output.split()), listed.output
    missing = runner.invoke(app, ["journal", "show", "[/x]", "--journal", str(journal)])
    assert missing.exit_code == 2 and "'[/x]' is not a run id" in missing.output, missing.output
    imported = runner.invoke(app, ["journal", "import", str(tmp_path / "nowhere[/x]"), "--journal", str(journal)])
    assert imported.exit_code == 2 and "nowhere[/x] does not exist" in " ".join(imported.output.split())


def test_a_progress_line_with_brackets_in_its_label_is_shown_as_written(monkeypatch):
    monkeypatch.delenv("CI", raising=False)  # a live progress display, as in a terminal
    monkeypatch.delenv("SERVEBOOK_PLAIN_PROGRESS", raising=False)
    buffer = io.StringIO()
    reporter = Reporter(make_console(file=buffer, force_terminal=True, width=200))
    with reporter.task("start sim-[/x] [red]label"):
        pass
    assert reporter.live and "sim-[/x] [red]label" in buffer.getvalue()
