"""Progress for long work: a live rich display in a terminal, plain log lines in CI.

Everything long in servebook (engine builds, runs, cells) reports through a `Reporter`, so the
same code reads well in a terminal and in a CI log without a carriage-return soup.
"""

from __future__ import annotations

import os
import sys
import time
from contextlib import contextmanager
from typing import Any, Iterator

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    SpinnerColumn,
    TextColumn,
    TimeElapsedColumn,
)

from .terminal import make_console, markup_safe, terminal_safe


def in_kernel() -> bool:
    """Whether this code runs in a Jupyter kernel (where stderr shows as a warning box)."""
    return type(sys.stdout).__module__.startswith("ipykernel")


def notes_stream():
    """Where notes and progress lines go: stdout in a Jupyter kernel, stderr elsewhere (stdout may carry JSON)."""
    return sys.stdout if in_kernel() else sys.stderr


def _interactive(console: Console) -> bool:
    if os.environ.get("CI") or os.environ.get("SERVEBOOK_PLAIN_PROGRESS"):
        return False
    return console.is_terminal and not console.is_dumb_terminal


class Task:
    """One unit of progress. `advance` and `note` are cheap enough to call per request."""

    def __init__(self, reporter: "Reporter", description: str, total: float | None, unit: str = ""):
        self._reporter = reporter
        self.description = description
        self.total = total
        self.unit = unit
        self.completed = 0.0
        self._rich_id: Any = None
        self._last_logged_step = -1
        self._started = time.monotonic()

    def advance(self, amount: float = 1.0) -> None:
        self.update(self.completed + amount)

    def update(self, completed: float, description: str | None = None) -> None:
        self.completed = completed
        if description:
            self.description = description
        self._reporter._refresh(self)

    def note(self, message: str) -> None:
        self._reporter.log(f"{self.description}: {message}")


class Reporter:
    """Shows tasks live in a terminal; in CI logs a line per task at start, every 25%, and end."""

    def __init__(self, console: Console | None = None, *, quiet: bool = False):
        self.console = console or make_console(stderr=True)
        self.quiet = quiet
        self.live = (not quiet) and _interactive(self.console)
        self._progress: Progress | None = None
        self._depth = 0

    def log(self, message: str) -> None:
        if self.quiet:
            return
        if self._progress is not None:
            self._progress.console.print(message, markup=False, highlight=False, soft_wrap=True)
        else:
            # Plain lines: in a CI log they read as a log, and inside a Jupyter kernel they stay a text stream on
            # stdout (rich would turn them into HTML displays, and stderr shows there as a warning box).
            stream = notes_stream()
            stream.write(terminal_safe(message) + "\n")  # a label or an engine's line may carry escapes
            stream.flush()

    @contextmanager
    def task(self, description: str, total: float | None = None, unit: str = "") -> Iterator[Task]:
        """A unit of progress; `unit` says what `total` counts ("requests", "runs"), in the log and the bar."""
        task = Task(self, description, total, unit)
        if self.live:
            if self._progress is None:
                self._progress = Progress(
                    SpinnerColumn(),
                    # a description holds user text (a candidate's label, a path): shown, never parsed as markup
                    TextColumn("{task.description}", style="progress.description", markup=False),
                    BarColumn(),
                    MofNCompleteColumn(),
                    TimeElapsedColumn(),
                    console=self.console,
                    transient=False,
                )
                self._progress.start()
            self._depth += 1
            task._rich_id = self._progress.add_task(f"{description}" + (f" ({unit})" if unit else ""), total=total)
        else:
            self.log(f"[start] {description}" + (f" ({total:g} {unit})".replace(" )", ")") if total else ""))
        outcome = "done"
        try:
            yield task
        except BaseException:
            outcome = "stopped"
            raise
        finally:
            elapsed = time.monotonic() - task._started
            if self.live and self._progress is not None:
                self._progress.update(task._rich_id, completed=task.total or task.completed)
                self._progress.remove_task(task._rich_id)
                color = "green" if outcome == "done" else "red"
                self._progress.console.print(
                    f"[{color}]{outcome}[/] {markup_safe(task.description)} [dim]({elapsed:.1f}s)[/]", markup=True
                )
                self._depth -= 1
                if self._depth == 0:
                    self._progress.stop()
                    self._progress = None
            else:
                self.log(f"[{outcome}] {task.description} ({elapsed:.1f}s)")

    def _refresh(self, task: Task) -> None:
        if self.quiet:
            return
        if self.live and self._progress is not None and task._rich_id is not None:
            self._progress.update(task._rich_id, completed=task.completed, description=task.description)
            return
        if task.total:
            step = int(4 * task.completed / task.total)
            if step != task._last_logged_step and 0 < step < 4:
                task._last_logged_step = step
                done = f" ({task.completed:g} of {task.total:g} {task.unit})".replace(" )", ")")
                self.log(f"[{25 * step:3d}%] {task.description}{done}")


def default_reporter() -> Reporter:
    return Reporter(make_console(stderr=True, file=sys.stderr))
