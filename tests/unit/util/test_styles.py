"""Render styles are a closed Literal (mypy refuses any other name); every one of them draws in each medium, and the
search's headline, which once named three styles that do not exist, is drawn in styles that do."""

import json
from pathlib import Path
from typing import get_args

from servebook.journal import samples
from servebook.sweeps.search import SearchResult
from servebook.util.render import STYLES, Style, Table, Text

ROOT = Path(__file__).parents[3]


def test_every_style_name_has_a_terminal_and_a_site_form():
    assert set(get_args(Style)) == set(STYLES)


def test_the_recorded_search_draws_only_known_styles():
    [path] = samples.sample_journal("sample-journal").glob("searches/h200-1b-search/*.json")
    blocks = SearchResult.from_json(json.loads(path.read_text())).blocks()
    used = [b.style for b in blocks if isinstance(b, Text)] + [
        r.css for b in blocks if isinstance(b, Table) for r in b.rows]
    assert used and set(used) <= set(get_args(Style))
    assert blocks[0].style == "heading" and blocks[1].style in ("accepted", "warn")
    assert "accepted" in used  # the winner's confirmed row is marked
