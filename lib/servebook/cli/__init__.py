"""The `servebook` command: a thin shell that turns arguments into models and calls the library."""

from __future__ import annotations

from . import commands, init, journal, models, report, search  # noqa: F401  (each registers its commands on the app)
from ._app import EXIT_CODES, app

__all__ = ["EXIT_CODES", "app", "main"]


def _one_line_summaries(typer_app) -> None:
    """Each command's summary in a listing (`servebook --help`) as one paragraph: typer's rich help keeps the
    docstring's line breaks there, which broke sentences at 80 columns whatever the width."""
    for info in typer_app.registered_commands:
        doc = (info.help or (info.callback.__doc__ if info.callback else None) or "").strip()
        if info.short_help is None and doc:
            info.short_help = " ".join(doc.split("\n\n")[0].split())
    for group in typer_app.registered_groups:
        _one_line_summaries(group.typer_instance)


_one_line_summaries(app)


def main() -> None:
    app()

