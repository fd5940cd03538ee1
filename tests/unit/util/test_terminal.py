"""Terminal output that reads well piped (issue 34, item 7): one width rule, and tables that wrap only prose."""

import csv
import io

import pytest

from servebook.util.render import Table, Text, to_csv, to_plain, to_rich
from servebook.util.suggest import close_names, suggestion
from servebook.util.terminal import DEFAULT_WIDTH, make_console, output_width

RUN_ID = "20261201T005647Z-3b28606c"


class Pipe(io.StringIO):
    def isatty(self):
        return False


class Tty(io.StringIO):
    def isatty(self):
        return True


def test_the_width_rule_columns_then_the_terminal_then_120():
    assert output_width(Pipe(), environ={}) == DEFAULT_WIDTH == 120
    assert output_width(Tty(), environ={}) is None  # rich measures the terminal itself
    assert output_width(Pipe(), environ={"COLUMNS": "200"}) == 200
    assert output_width(Tty(), environ={"COLUMNS": "90"}) == 90
    assert output_width(Pipe(), environ={"COLUMNS": "wide"}) == 120  # not a number: ignored
    closed = Pipe()
    closed.close()
    assert output_width(closed, environ={}) == 120


def test_a_console_on_a_pipe_is_120_wide(monkeypatch):
    monkeypatch.delenv("COLUMNS", raising=False)
    assert make_console(file=Pipe()).width == 120


def drawn(blocks, width: int) -> list[str]:
    buffer = Pipe()
    make_console(file=buffer, width=width, color_system=None).print(to_rich(blocks))
    return buffer.getvalue().splitlines()


def listing(rows: int = 3, cause: str = "") -> Table:
    table = Table(["run", "status", "candidate", "valid", "started"])
    for i in range(rows):
        table.add([f"{RUN_ID[:-1]}{i}", f"failed: {cause}" if cause else "completed", f"chunk-{512 * (i + 1)}",
                   "5/5", "2026-12-01T00:56:47Z"])
    return table


@pytest.mark.parametrize("width", [40, 80, 120])
def test_run_ids_and_figures_are_never_broken_over_lines(width):
    lines = drawn([listing(cause="the engine could not load the drafter model at all")], width)
    for i in range(3):
        assert sum(f"{RUN_ID[:-1]}{i}" in line for line in lines) == 1, "each run id whole, on one line"
        assert sum("2026-12-01T00:56:47Z" in line for line in lines) == 3
    assert all("chunk-" not in line or "chunk-512" in line or "chunk-1024" in line or "chunk-1536" in line
               for line in lines)


def test_a_table_that_fits_keeps_one_line_per_row_and_the_width():
    lines = drawn([listing()], 120)
    assert len(lines) == 3 + 4  # header, its rules and the frame: no row wrapped
    assert max(len(line) for line in lines) <= 120


def test_only_prose_wraps_and_the_table_holds_the_width():
    lines = drawn([listing(rows=2, cause="the engine could not load the drafter model " * 4)], 120)
    assert max(len(line) for line in lines) == 120
    assert len(lines) > 2 + 4, "the cause wrapped"
    assert sum(RUN_ID[:-1] in line for line in lines) == 2


def test_text_blocks_wrap_at_the_width_and_to_text_crops_nothing():
    from servebook.util.render import to_text

    shown = to_text([Text("word " * 60), listing()], width=60)
    prose = shown[:shown.index("┏")].splitlines()
    assert len(prose) == 5 and all(len(line) <= 60 for line in prose)
    assert all(f"{RUN_ID[:-1]}{i}" in shown for i in range(3))  # the table ran past 60 columns, uncropped


def test_plain_is_one_line_per_row_and_csv_reads_back():
    table = listing(rows=2)
    table.add(["r9", "failed", "a\nb", "0/5", "-"])
    plain = to_plain([Text("journal j: 3 runs", "heading"), table]).splitlines()
    assert plain[0] == "journal j: 3 runs" and plain[1].split() == ["run", "status", "candidate", "valid", "started"]
    assert len(plain) == 2 + 3 and "a | b" in plain[-1]
    assert "│" not in "".join(plain)
    rows = list(csv.reader(io.StringIO(to_csv([Text("ignored"), table]))))
    assert rows[0] == table.columns and rows[1][0] == f"{RUN_ID[:-1]}0" and rows[3][2] == "a\nb"
    two = to_csv([Table(["a"], title="first"), Table(["b"], title="second")])
    assert two == "# first\na\n\n# second\nb\n"


def test_close_names_are_suggested_and_far_ones_listed():
    assert close_names("basline", ["baseline", "one-slot", "ngram"]) == ["baseline"]
    assert close_names("Tiny-Demo", ["tiny-demo"]) == ["tiny-demo"]
    assert "did you mean 'completed'" in suggestion("complete", ["completed", "failed"])
    assert suggestion("zzz", ["b", "a"]) == "; known: a, b"
    assert suggestion("zzz", []) == ""
    assert "(30 in all)" in suggestion("zzz", [f"s{i:02d}" for i in range(30)])


def test_headers_stay_on_one_line_where_the_table_fits_and_wrap_only_where_it_does_not():
    table = Table(["Concurrency", "Per request tok/s", "Check"])
    table.add([16, "1,811.0", "valid; counters ok"])
    assert any("Per request tok/s" in line for line in drawn([table], 120))
    narrow = drawn([table], 36)
    assert not any("Per request tok/s" in line for line in narrow) and any("1,811.0" in line for line in narrow)
    assert max(len(line) for line in narrow) <= 36
