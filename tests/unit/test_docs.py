"""The docs a newcomer walks are checked (issue 53, item 6): every relative link in README.md, CHANGELOG.md, docs/
and tools/*/README.md resolves to a file of the repository, and a `#anchor` to a heading of that file as GitHub
slugs it; the README stays within two screens and holds no dated measurement (those live in docs/findings/); every
`servebook` command the front pages name is one the CLI has; every finding says when, where and how it was
measured.

Pure and fast: the checks read Markdown and the typer app, nothing else. Each check is a function of a folder, so
the tests below also show it failing on a tree with a broken link, anchor or command."""

import re
from pathlib import Path

import typer.main

REPO = Path(__file__).resolve().parents[2]

# The issue asks for "about 15 KB at most"; read strictly as 15,000 bytes, so two screens stay two screens.
README_MAX_BYTES = 15_000
DATE = re.compile(r"20\d\d-\d\d-\d\d")

# Only command names are checked, not their options (`servebook run --url` passes as `run`).

_FENCE = re.compile(r"^(```|~~~).*?^\1[^\n]*$", re.M | re.S)
_CODE_SPAN = re.compile(r"(`+)(.+?)\1", re.S)
_LINK = re.compile(r"!?\[(?:[^\]\[]|\[[^\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
_COMMENT = re.compile(r"(?:^|(?<=\s))#.*$", re.M)  # a shell or YAML comment: prose, not a command
_HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$", re.M)
# `servebook CMD [SUB]` where a shell would run it: not `import servebook as sb`, not `servebook.cli`
_COMMAND = re.compile(r"(?<![\w.-])(?<!import )(?<!from )servebook ([a-z][a-z0-9-]*)(?: ([a-z][a-z0-9-]*))?")


def _without_code(text: str) -> str:
    """The prose of a page: fenced blocks dropped, code spans emptied (a link or heading inside them is text)."""
    text = _FENCE.sub("", text)
    return "\n\n".join(_CODE_SPAN.sub("", para) for para in text.split("\n\n"))


def _code(text: str) -> list[str]:
    """What a reader would type: the fenced blocks, their comments left out, and the code spans of a page."""
    blocks = [_COMMENT.sub("", m.group(0)) for m in _FENCE.finditer(text)]
    prose = _FENCE.sub("", text)
    spans = [m.group(2) for para in prose.split("\n\n") for m in _CODE_SPAN.finditer(para)]
    return blocks + spans


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: its rendered text lower-cased, punctuation other than `-` and `_` dropped,
    spaces made hyphens (github-slugger)."""
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link's text, not its target
    text = re.sub(r"(\*\*|__|(?<!\w)[*_]|[*_](?!\w)|`)", "", text).lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def anchors(path: Path) -> set[str]:
    """Every anchor of a Markdown file's headings, repeats numbered as GitHub numbers them (`name`, `name-1`)."""
    seen: dict[str, int] = {}
    found = set()
    for match in _HEADING.finditer(_FENCE.sub("", path.read_text())):
        base = slug(match.group(2))
        n = seen.get(base, 0)
        seen[base] = n + 1
        found.add(base if n == 0 else f"{base}-{n}")
    return found


def doc_pages(root: Path) -> list[Path]:
    """README.md, CHANGELOG.md, docs/ and each tool's README (tools/gpu-host/README.md: the GPU host path's how)."""
    pages = [root / "README.md", root / "CHANGELOG.md", *sorted((root / "docs").rglob("*.md")),
             *sorted((root / "tools").glob("*/README.md"))]
    return [p for p in pages if p.is_file()]


def broken_links(page: Path, root: Path) -> list[str]:
    """The relative links of `page` that name no file (or folder) of the repository, or no heading of it."""
    broken = []
    for target in _LINK.findall(_without_code(page.read_text())):
        if re.match(r"[a-z][a-z0-9+.-]*:", target):  # http:, https:, mailto: are not the repository's to check
            continue
        path, _, anchor = target.partition("#")
        dest = (page.parent / path).resolve() if path else page
        if not dest.exists() or root.resolve() not in (dest, *dest.parents):
            broken.append(f"{target} (no such file)")
        elif anchor and (dest.is_dir() or dest.suffix != ".md" or anchor not in anchors(dest)):
            broken.append(f"{target} (no such heading)")
    return broken


def cli_commands() -> dict[str, set[str]]:
    """The CLI's commands, each with its subcommands (empty for a plain command), read from the typer app."""
    import servebook.cli  # noqa: F401  (each command module registers itself on the app)
    from servebook.cli._app import app

    def names(typer_app: typer.Typer) -> dict[str, set[str]]:
        found = {info.name or typer.main.get_command_name(info.callback.__name__): set()
                 for info in typer_app.registered_commands if info.callback}
        for group in typer_app.registered_groups:
            found[group.name or group.typer_instance.info.name] = set(names(group.typer_instance))
        return found

    return names(app)


def unknown_commands(text: str, commands: dict[str, set[str]]) -> list[str]:
    """`servebook CMD [SUB]` in the code of `text` that the CLI has no command for."""
    unknown = []
    for code in _code(text):
        for cmd, sub in _COMMAND.findall(code):
            if cmd not in commands:
                unknown.append(f"servebook {cmd}")
            elif commands[cmd] and sub and sub not in commands[cmd]:
                unknown.append(f"servebook {cmd} {sub}")
    return unknown


def test_every_relative_link_of_the_docs_resolves():
    broken = {p.relative_to(REPO).as_posix(): b for p in doc_pages(REPO) if (b := broken_links(p, REPO))}
    assert not broken, f"links that lead nowhere: {broken}"


def test_the_readme_is_two_screens_with_no_dated_measurement():
    readme = (REPO / "README.md").read_bytes()
    assert len(readme) <= README_MAX_BYTES, f"README.md is {len(readme):,} bytes; move detail into docs/"
    dates = DATE.findall(readme.decode())
    assert not dates, f"README.md carries dates {dates}: a dated measurement belongs in docs/findings/"


def test_every_command_the_front_pages_name_is_a_command_of_the_cli():
    """README.md, getting started and the guide: the pages a newcomer types from. Findings record what was run on
    their day, so they are left as they were."""
    commands = cli_commands()
    pages = [REPO / "README.md", REPO / "docs" / "getting-started.md", *sorted((REPO / "docs" / "guide").glob("*.md")),
             *sorted((REPO / "tools").glob("*/README.md"))]
    unknown = {p.relative_to(REPO).as_posix(): u for p in pages if (u := unknown_commands(p.read_text(), commands))}
    assert not unknown, f"commands the CLI does not have: {unknown}"


def test_the_front_pages_name_commands_at_all():
    """The check has something to check: the README names the commands getting started walks through."""
    named = {cmd for code in _code((REPO / "README.md").read_text()) for cmd, _ in _COMMAND.findall(code)}
    assert {"run", "sweep", "report", "journal", "site"} <= named


def test_every_finding_says_when_where_how_and_which_journal():
    findings = sorted((REPO / "docs" / "findings").glob("20*.md"))
    assert findings, "docs/findings/ holds the dated reports"
    index = (REPO / "docs" / "findings" / "README.md").read_text()
    for page in findings:
        text = page.read_text()
        for field in ("Date", "Machine", "Commands", "Journal"):
            assert f"- **{field}:**" in text, f"{page.name}: no {field} line"
        date = re.search(r"- \*\*Date:\*\* (20\d\d-\d\d-\d\d)", text)
        assert date and date.group(1) == page.name[:10], f"{page.name}: its name starts with the date it reports"
        assert f"]({page.name})" in index, f"{page.name} is not in docs/findings/README.md"


def test_a_broken_link_or_anchor_is_found(tmp_path):
    (tmp_path / "docs" / "guide").mkdir(parents=True)
    (tmp_path / "docs" / "guide" / "a.md").write_text("# A page\n\n## Resident rounds: `sweep --resident`\n\n## Notes\n")
    page = tmp_path / "README.md"
    page.write_text(
        "[ok](docs/guide/a.md) [ok](docs/guide/a.md#resident-rounds-sweep---resident) [web](https://example.com)\n"
        "[gone](docs/guide/b.md) [bad anchor](docs/guide/a.md#nowhere) [self](#a-heading-here)\n\n"
        "`[in code](nowhere.md)`\n\n```\n[in a block](nowhere.md)\n```\n")
    assert broken_links(page, tmp_path) == ["docs/guide/b.md (no such file)", "docs/guide/a.md#nowhere (no such heading)",
                                            "#a-heading-here (no such heading)"]


def test_slugs_and_repeated_headings_follow_github(tmp_path):
    assert slug("One study on several machines: `servebook journal import`") == \
        "one-study-on-several-machines-servebook-journal-import"
    assert slug("Resident rounds: `sweep --resident`") == "resident-rounds-sweep---resident"
    assert slug("What the 8B model's `knobs.reasoning` does (2026-12-04)") == \
        "what-the-8b-models-knobsreasoning-does-2026-12-04"
    page = tmp_path / "p.md"
    page.write_text("# Notes\n\n## Notes\n\n```\n# not a heading\n```\n")
    assert anchors(page) == {"notes", "notes-1"}


def test_an_unknown_command_is_found():
    commands = {"run": set(), "journal": {"ls", "show"}}
    text = ("Run `servebook run --url http://127.0.0.1:8000`, then `servebook journal ls` and\n\n"
            "```bash\nservebook jornal ls\nservebook journal lst\n.venv/bin/servebook init vllm --model M  # servebook writes it\n```\n\n"
            "`import servebook as sb` is the notebook's; servebook measures in prose, which is not checked.")
    assert unknown_commands(text, commands) == ["servebook jornal", "servebook journal lst", "servebook init"]
