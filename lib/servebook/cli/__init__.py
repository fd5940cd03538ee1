"""The `servebook` command: a thin shell that turns arguments into models and calls the library."""

from __future__ import annotations

from . import commands, journal, report, search  # noqa: F401  (each registers its commands on the app)
from ._app import EXIT_CODES, app

__all__ = ["EXIT_CODES", "app", "main"]


def main() -> None:
    app()

