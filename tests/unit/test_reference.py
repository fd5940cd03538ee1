"""The reference generated from the code (issue 53, items 4 and 6): docs/reference/cli.md is what the typer app
renders now, it names every command, and its index links what exists."""

import importlib.util
import re
from pathlib import Path

from servebook.cli import app
from servebook.cli.reference import cli_markdown, generated_files
from servebook.config.schemas import REGENERATE

REPO = Path(__file__).resolve().parents[2]
REFERENCE = REPO / "docs" / "reference"


def test_the_cli_reference_is_what_the_commands_render_now():
    assert (REFERENCE / "cli.md").read_text(encoding="utf-8") == cli_markdown(), \
        f"docs/reference/cli.md is stale: run `{REGENERATE}`"


def _commands(typer_app, prefix="servebook") -> list[str]:
    names = []
    for info in typer_app.registered_commands:
        names.append(f"{prefix} {info.name or info.callback.__name__}")
    for group in typer_app.registered_groups:
        names.append(f"{prefix} {group.name}")
        names += _commands(group.typer_instance, f"{prefix} {group.name}")
    return names


def test_every_command_has_its_section_with_its_options():
    text = cli_markdown()
    commands = _commands(app)
    assert "servebook init" in commands and "servebook journal ls" in commands
    for command in commands:
        assert re.search(rf"^#+ `{re.escape(command)}`$", text, re.M), f"{command} has no section"
    init = text.split("`servebook init`\n", 1)[1].split("\n#", 1)[0]
    for option in ("--model", "--out", "--name", "--gpus"):
        assert f"`{option}" in init or f", {option}" in init, option


def test_the_reference_does_not_depend_on_the_terminal(monkeypatch):
    first = cli_markdown()
    monkeypatch.setenv("COLUMNS", "40")
    monkeypatch.setenv("SERVEBOOK_JOURNAL", "/elsewhere")
    assert cli_markdown() == first


def test_the_listing_links_resolve_to_sections():
    text = cli_markdown()
    anchors = set(re.findall(r"\]\(#([^)]+)\)", text))
    headings = {re.sub(r"[^a-z0-9_-]", "", h.lower().replace(" ", "-")) for h in re.findall(r"^#+ `([^`]+)`$", text, re.M)}
    assert anchors and anchors <= headings, anchors - headings


def test_the_reference_index_links_what_exists():
    index = REFERENCE / "README.md"
    links = re.findall(r"\]\(([^)#]+)\)", index.read_text(encoding="utf-8"))
    assert "cli.md" in links and sum(link.endswith(".schema.json") for link in links) == 3
    for link in links:
        assert (index.parent / link).resolve().is_file(), link


def test_the_script_checks_and_writes_every_generated_file(tmp_path, monkeypatch):
    spec = importlib.util.spec_from_file_location("write_reference", REPO / "scripts" / "write_reference.py")
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    assert script.main(["--check"]) == 0, f"stale generated files: run `{REGENERATE}`"
    assert set(generated_files()) == {"docs/reference/cli.md", "docs/reference/metrics.md",
                                      "lib/servebook/data/schemas/candidate.schema.json",
                                      "lib/servebook/data/schemas/plan.schema.json",
                                      "lib/servebook/data/schemas/study.schema.json"}
    monkeypatch.setattr(script, "REPO", tmp_path)
    assert script.main(["--check"]) == 1, "nothing written yet: every file is stale"
    assert script.main([]) == 0 and script.main(["--check"]) == 0
    assert (tmp_path / "docs" / "reference" / "cli.md").read_text() == cli_markdown()


def test_the_metrics_reference_is_what_their_definitions_render_now():
    from servebook.cli.reference import metrics_markdown
    from servebook.config.figures import FIGURES
    from servebook.config.metrics import METRICS

    text = metrics_markdown()
    assert (REFERENCE / "metrics.md").read_text(encoding="utf-8") == text, \
        f"docs/reference/metrics.md is stale: run `{REGENERATE}`"
    for name in METRICS:
        assert f"| `{name}` |" in text, name
    for figure in FIGURES:
        assert f"| `{figure.column}` | {figure.words} |" in text, figure.column
