"""The CLI reference (docs/reference/cli.md), generated from the typer app itself: every command's summary, usage,
arguments and options as `servebook COMMAND --help` gives them, so the page cannot say what the command does not.

Written by `scripts/write_reference.py` with the JSON Schemas, and compared with a fresh rendering by
tests/unit/test_reference.py. The text depends on the commands' declarations only (never on the terminal, the
environment or the machine), so a rendering here equals one anywhere.
"""

from __future__ import annotations

import inspect
from collections.abc import Iterator
from typing import Any

import typer

from . import app

HEADER = """# Command-line reference

Every `servebook` command, its arguments and options, generated from the commands themselves by
`python scripts/write_reference.py` (do not edit this page; a test fails when it is stale).
`servebook COMMAND --help` prints the same in the terminal.
"""


def cli_markdown() -> str:
    """The whole reference page, one section per command (groups, then their commands, in the order `--help` lists
    them)."""
    root = typer.main.get_command(app)
    # typer carries its own copy of click: its command's own context class, not the click package's
    context = root.context_class(root, info_name="servebook")
    listing = ["## Commands", "", *_listing(root, context), ""]
    return "\n".join([HEADER, *listing, *_sections(root, context, level=2)]).rstrip() + "\n"


def _listing(group: Any, context: Any, indent: str = "") -> Iterator[str]:
    """A nested list of every command linking to its section."""
    for command, sub in _subcommands(group, context):
        summary = command.get_short_help_str(limit=200)
        yield f"{indent}- [`{sub.command_path}`](#{_anchor(sub.command_path)}){': ' + summary if summary else ''}"
        yield from _listing(command, sub, indent + "  ")


def _subcommands(group: Any, context: Any) -> Iterator[tuple[Any, Any]]:
    """(command, its context) of a group's visible commands; nothing for a plain command."""
    for name in group.list_commands(context) if hasattr(group, "list_commands") else []:
        command = group.get_command(context, name)
        if command is not None and not command.hidden:
            yield command, command.context_class(command, info_name=name, parent=context)


def _sections(command: Any, context: Any, level: int) -> Iterator[str]:
    for sub, sub_context in _subcommands(command, context):
        yield from _section(sub, sub_context, level)
        yield from _sections(sub, sub_context, level + 1)


def _section(command: Any, context: Any, level: int) -> Iterator[str]:
    yield f"{'#' * min(level, 4)} `{context.command_path}`"
    yield ""
    if command.help:
        yield inspect.cleandoc(command.help)
        yield ""
    yield "```console"
    yield f"$ {context.command_path} {' '.join(command.collect_usage_pieces(context))}".rstrip()
    yield "```"
    yield ""
    for title, kind in (("Arguments", "argument"), ("Options", "option")):
        records = [record for param in command.get_params(context)
                   if param.param_type_name == kind and (record := param.get_help_record(context)) is not None]
        if records:
            yield f"**{title}**:"
            yield ""
            yield from (f"- `{names}`" + (f": {_one_line(text)}" if text else "") for names, text in records)
            yield ""


def _one_line(text: str) -> str:
    return " ".join(text.split())


def _anchor(heading: str) -> str:
    """GitHub's anchor of a `servebook journal ls` heading: lower case, spaces to hyphens, punctuation dropped."""
    return "".join(c for c in heading.lower().replace(" ", "-") if c.isalnum() or c in "-_")


METRICS_HEADER = """# Metrics reference

The figures verdict rules judge, the figures a recommendation's side effects are read from, and every column of
cells.parquet, generated from their definitions (`config/metrics.py`, `config/figures.py`, `config/columns/`) by
`python scripts/write_reference.py` (do not edit this page; a test fails when it is stale). How each is measured, and
how it compares with the peers' figures: [metrics](../metrics.md).
"""


def metrics_markdown() -> str:
    """The judged metrics (what a rule's `metric` may name) and the side-effect figures, one table each."""
    from ..config.figures import FIGURES
    from ..config.metrics import METRICS

    lines = [METRICS_HEADER, "## Judged metrics", "",
             "A verdict rule names one as `metric`; a guard too. It regresses by rising (lower is better) or by "
             "falling; a rule narrows its cells by the selectors it allows.", "",
             "| metric | measured by | reads as | unit | better | selectors | notes |", "|---|---|---|---|---|---|---|"]
    for m in METRICS.values():
        notes = [note for note in (m.where and f"where: {m.where}", m.no_selectors,
                                   m.needs and f"needs plan.{m.kind}.{m.needs}",
                                   m.scales and "scaling rules may judge it") if note]
        lines.append(f"| `{m.name}` | {m.kind} | {m.words} | {m.unit or '-'} | {m.direction} | "
                     f"{', '.join(m.selects) or '-'} | {'; '.join(notes) or '-'} |")
    lines += ["", "## Side-effect figures", "",
              "Every cell column below that changed beyond the noise against the baseline, where no rule judges it, is "
              "listed beside a recommendation, worse ones first (`verdicts/side_effects.py`). Where two columns say "
              "the same of one cell, the first listed is the one read.", "",
              "| column | reads as | better |", "|---|---|---|"]
    lines += [f"| `{f.column}` | {f.words} | {f.direction} |" for f in FIGURES]
    return "\n".join(lines + ["", *_columns_markdown()]) + "\n"


def _columns_markdown() -> list[str]:
    """Every column of cells.parquet as the catalogue declares it (config.columns), one row each."""
    from ..config.columns import CATALOGUE, OBSERVERS

    lines = ["## Columns of cells.parquet", "",
             "One row per measured cell; a column a cell's kind does not measure is empty there. Written by: a cell "
             "kind (`measure/kinds/`) or one of these observers: "
             + "; ".join(f"{name}, {what}" for name, what in OBSERVERS.items()) + ".", "",
             "| column | type | unit | title | definition | written by |", "|---|---|---|---|---|---|"]
    lines += [f"| `{c.name}` | {c.dtype} | {c.unit or '-'} | {c.title} | {c.definition.replace('|', '/')} | "
              f"{', '.join(c.written_by)} |" for c in CATALOGUE]
    return lines


def generated_files() -> dict[str, str]:
    """Every generated reference file, by its path in the repository: the CLI and metrics references and the JSON
    Schemas."""
    from ..config.schemas import FOLDER, schema_texts

    files = {"docs/reference/cli.md": cli_markdown(), "docs/reference/metrics.md": metrics_markdown()}
    files.update({f"lib/servebook/data/{FOLDER}/{name}": text for name, text in schema_texts().items()})
    return files
