"""Progress in notebooks (issue 19, item 9): plain lines on stdout inside a kernel, labels that say what they count."""

import io
import sys

from servebook.util.progress import Reporter


class _KernelStream(io.StringIO):
    """Stands in for ipykernel's OutStream: what servebook looks at is the class's module."""


_KernelStream.__module__ = "ipykernel.iostream"


def test_inside_a_kernel_progress_goes_to_stdout_and_says_what_it_counts(monkeypatch):
    out, err = _KernelStream(), io.StringIO()
    monkeypatch.setattr(sys, "stdout", out)
    monkeypatch.setattr(sys, "stderr", err)
    monkeypatch.setenv("SERVEBOOK_PLAIN_PROGRESS", "1")
    reporter = Reporter()
    with reporter.task("measure 8 cells", total=32, unit="requests") as task:
        for _ in range(32):
            task.advance()
    lines = out.getvalue().splitlines()
    assert lines[0] == "[start] measure 8 cells (32 requests)"
    assert "[ 50%] measure 8 cells (16 of 32 requests)" in lines
    assert lines[-1].startswith("[done] measure 8 cells") and err.getvalue() == ""


def test_outside_a_kernel_progress_stays_off_stdout(monkeypatch):
    out, err = io.StringIO(), io.StringIO()
    monkeypatch.setattr(sys, "stdout", out)
    monkeypatch.setattr(sys, "stderr", err)
    monkeypatch.setenv("SERVEBOOK_PLAIN_PROGRESS", "1")
    with Reporter().task("warm up", total=2, unit="requests"):
        pass
    assert out.getvalue() == "" and "[start] warm up (2 requests)" in err.getvalue()
