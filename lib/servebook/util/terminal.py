"""How wide servebook's terminal output is: one rule for every console it makes (the commands' tables and
messages, progress, `--help`).

rich falls back to 80 columns wherever it finds no terminal, so a pipe or a CI log got run ids broken over two
lines and wide listings wrapped in every cell. The rule: `$COLUMNS` when the user sets it; the terminal's own
width when the stream is one; `DEFAULT_WIDTH` otherwise.
"""

from __future__ import annotations

import os
import sys
from typing import IO, Any

from rich.console import Console

#: the width of output that goes to no terminal (a pipe, a file, a CI log)
DEFAULT_WIDTH = 120


def output_width(stream: IO[str] | None = None, environ: dict[str, str] | None = None) -> int | None:
    """The columns output to `stream` (default stdout) gets; None: a terminal, whose width rich measures (and
    follows when the window is resized)."""
    columns = (os.environ if environ is None else environ).get("COLUMNS", "").strip()
    if columns.isdigit() and int(columns) > 0:
        return int(columns)
    stream = sys.stdout if stream is None else stream
    try:
        if stream.isatty():
            return None
    except (AttributeError, ValueError):  # a closed or replaced stream is no terminal
        pass
    return DEFAULT_WIDTH


class UncroppedConsole(Console):
    """A console that lets a table too wide for it run past the edge instead of cropping the line (a cropped run
    id is lost; the tables themselves wrap only their prose, see util/render.py)."""

    def print(self, *objects: Any, crop: bool = False, **kwargs: Any) -> None:
        super().print(*objects, crop=crop, **kwargs)


def make_console(*, stderr: bool = False, file: IO[str] | None = None, **kwargs: Any) -> Console:
    """A console for `file` (default: stdout or stderr) under the width rule (unless `width` is given)."""
    stream = file if file is not None else (sys.stderr if stderr else sys.stdout)
    kwargs.setdefault("width", output_width(stream))
    return UncroppedConsole(stderr=stderr, file=file, **kwargs)
