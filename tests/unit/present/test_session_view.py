"""The agents kind on the site and in notebooks (issue 33): its run table and section, its side-by-side figures, and
the session view drawn from a run's turns (the same figure dict in both)."""

from servebook.present.figures import figure_specs
from servebook.present.kinds import AGENTS_DEFINITIONS, PRESENT, session_view_kinds
from servebook.present.load_tables import cell_tables
from servebook.present.sessions import COLUMNS, cached_by_turn, newest_sessions, session_view_spec

CELL = {"kind": "agents", "cell_id": "agents", "category": "prose", "concurrency": 4, "sessions": 4, "subagents": 1,
        "turns": 30, "session_p95_turn_ttft_s": 0.412, "session_turns_per_s": 0.8, "ideal_hit_rate": 0.91,
        "measured_hit_rate": 0.88, "overflow_share": 0.0, "send_lag_p99_ms": 3.2, "valid": True,
        "reconciliation": "ok", "candidate": "a", "run_id": "r", "order": 0}


def _view():
    # two sessions of two turns, and a sub-agent's turn of session 0; the second turn of session 1 overflowed
    rows = [(0, False, 1, 0.0, 0.2, 0.5, 1000, 0, 0, False, False),
            (1, False, 1, 0.1, 0.3, 0.6, 1000, 800, 900, False, False),
            (0, True, 1, 0.7, 0.8, 0.9, 1200, 1100, 1150, False, False),
            (0, False, 2, 1.0, 1.1, 1.3, 1500, 1400, 1450, False, False),
            (1, False, 2, 1.2, None, None, None, None, None, True, True)]
    return {name: [row[i] for row in rows] for i, name in enumerate(COLUMNS)}


def test_the_run_table_and_section_read_the_cells_figures():
    [table] = [t for t in cell_tables([CELL]) if t.title == "Agent sessions"]
    assert table.rows[0].values[:9] == [4, 1, 30, "412 ms", "0.80", "91%", "88%", "0.0%", "3 ms"]
    assert PRESENT["agents"].section.definitions == AGENTS_DEFINITIONS
    assert session_view_kinds() == {"agents"}


def test_cached_share_per_turn_against_the_ideal():
    points = cached_by_turn([dict(zip(COLUMNS, values, strict=True)) for values in zip(*_view().values(), strict=True)])
    assert points[0] == {"turn": 1, "cached_share": 1900 / 3200, "ideal_share": 2050 / 3200, "turns": 3}
    assert points[1] == {"turn": 2, "cached_share": 1400 / 1500, "ideal_share": 1450 / 1500, "turns": 1}


def test_the_session_view_has_its_four_panels_and_marks_what_overflowed():
    spec = session_view_spec(_view(), "a")
    axes = {trace.get("xaxis") for trace in spec["data"]}
    assert axes == {"x", "x2", "x3", "x4"}
    names = [trace["name"] for trace in spec["data"]]
    assert "overflowed or failed turn" in names and any("sub-agent" in n for n in names)
    [bad] = [t for t in spec["data"] if t["name"] == "overflowed or failed turn"]
    assert bad["x"] == [1.2] and bad["y"] == [1]
    [ttft] = [t for t in spec["data"] if t["name"] == "TTFT of a turn"]
    assert ttft["x"] == [1000, 1000, 1200, 1500] and ttft["y"] == [200.0, 200.0, 100.0, 100.0]
    empty = session_view_spec({}, "a")
    assert empty["data"] == [] and empty["layout"]["annotations"][0]["text"] == "no agent sessions measured"


def test_the_charts_of_runs_carry_one_session_view_per_candidate_from_its_newest_run():
    assert newest_sessions([_view(), {}, {"session": [3]}]) == {"session": [3]}
    specs = figure_specs([CELL], {}, {}, sessions={"a": _view(), "b": {}})
    titles = [s["layout"]["title"]["text"] for s in specs]
    assert sum(t.startswith("Agent sessions") for t in titles) == 1
