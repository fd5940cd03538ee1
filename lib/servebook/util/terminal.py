"""How wide servebook's terminal output is: one rule for every console it makes (the commands' tables and
messages, progress, `--help`); and how user text is shown there.

rich falls back to 80 columns wherever it finds no terminal, so a pipe or a CI log got run ids broken over two
lines and wide listings wrapped in every cell. The rule: `$COLUMNS` when the user sets it; the terminal's own
width when the stream is one; `DEFAULT_WIDTH` otherwise.
"""

from __future__ import annotations

import os
import re
import sys
from typing import IO, Any

from rich.console import Console

#: the width of output that goes to no terminal (a pipe, a file, a CI log)
DEFAULT_WIDTH = 120
#: control characters (C0 but newline and tab, DEL, C1): an ESC in a note would restyle or clear the reader's
#: terminal, a CR overwrite what came before
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def terminal_safe(text: str) -> str:
    """User text (a run id, a path, a note, an engine's message) as a terminal may show it: each control character
    written out as its escape (`\\x1b`), so it is seen, not obeyed."""
    return _CONTROL.sub(lambda m: ascii(m.group())[1:-1], text)


def markup_safe(text: object) -> str:
    """User text to put inside rich markup (`f"[red]error:[/] {markup_safe(message)}"`): its brackets are
    escaped, so `[/x]` is shown, not parsed (a MarkupError) and `[red]` is not taken as a style."""
    from rich.markup import escape

    return escape(terminal_safe(str(text)))


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
    id is lost; the tables themselves wrap only their prose, see util/render.py). What it prints as a string has
    its control characters written out (`terminal_safe`); tables and views do the same in `render.to_rich`."""

    def print(self, *objects: Any, crop: bool = False, **kwargs: Any) -> None:
        objects = tuple(terminal_safe(o) if isinstance(o, str) else o for o in objects)
        super().print(*objects, crop=crop, **kwargs)


def make_console(*, stderr: bool = False, file: IO[str] | None = None, **kwargs: Any) -> Console:
    """A console for `file` (default: stdout or stderr) under the width rule (unless `width` is given). Markup is
    off: messages are made of user text (run ids, paths, notes), which rich would otherwise parse. A message
    that styles itself passes `markup=True` and puts its user text through `markup_safe`."""
    stream = file if file is not None else (sys.stderr if stderr else sys.stdout)
    kwargs.setdefault("width", output_width(stream))
    kwargs.setdefault("markup", False)
    return UncroppedConsole(stderr=stderr, file=file, **kwargs)
