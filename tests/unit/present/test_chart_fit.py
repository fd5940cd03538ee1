"""Charts that fit any width (issue 34, item 6): legends in rows below the plot and inside the figure's own box,
long names wrapped, every candidate named once, each candidate's every run counted. The browser checks the layout
itself (tests/e2e/test_site_charts_browser.py); these check what the figures ask plotly for."""

import copy

from servebook.present.figures import (
    GAP_EDGES_MS,
    aggregate_vs_concurrency_spec,
    forest_spec,
    mean_gap_histogram,
    mean_turns,
)
from servebook.present.style import LAYOUT, LEGEND_CHARS, fit


def decode(candidate, category, concurrency, rate, run="r1"):
    return {"kind": "decode", "candidate": candidate, "category": category, "concurrency": concurrency,
            "aggregate_tok_s": rate, "valid": True, "run_id": run}


def test_the_legend_sits_below_the_plot_against_the_figures_box_and_grows_the_figure():
    before = copy.deepcopy(LAYOUT)
    few = aggregate_vs_concurrency_spec([decode(n, "prose", 1, 10.0) for n in ("a", "b")])
    many = aggregate_vs_concurrency_spec([decode(f"candidate-{i}", "prose", 1, 10.0) for i in range(9)])
    for spec in (few, many):
        legend = spec["layout"]["legend"]
        assert legend["orientation"] == "h" and legend["yref"] == "container" and legend["y"] == 0
        assert legend["yanchor"] == "bottom" and legend["xref"] == "container" and legend["title"]["side"] == "top"
    assert many["layout"]["height"] > few["layout"]["height"]
    assert LAYOUT == before, "the shared layout is never modified"


def test_every_candidate_is_named_once_even_one_missing_from_the_first_panel():
    cells = [decode("baseline", "prose", 1, 10.0), decode("baseline", "code", 1, 11.0),
             decode("one-slot", "code", 1, 9.0)]  # one-slot has no prose cell: the first panel lacks it
    spec = aggregate_vs_concurrency_spec(cells)
    named = [t["name"] for t in spec["data"] if t["showlegend"]]
    assert sorted(named) == ["baseline", "one-slot"]


def test_long_names_and_titles_are_wrapped_and_a_lone_candidate_gets_no_legend():
    long = "max_running_requests-32-chunk_size-8192-drafter-ngram-8 with notes"
    spec = fit({"data": [{"name": long}, {"name": "b"}], "layout": {"title": {"text": "a title " * 12}}})
    assert all(len(line) <= LEGEND_CHARS for line in spec["data"][0]["name"].split("<br>"))
    assert "".join(spec["data"][0]["name"].replace("<br>", "").split()) == "".join(long.split())
    assert "<br>" in spec["layout"]["title"]["text"] and spec["layout"]["margin"]["t"] > LAYOUT["margin"]["t"]
    alone = fit({"data": [{"name": "a"}], "layout": {}})
    assert alone["layout"]["showlegend"] is False and "legend" not in alone["layout"]


def test_the_verdict_chart_keeps_its_legend_below_and_its_limit_names_short_lines():
    def comparison(cell, metric="aggregate_tok_s", limit=7.0):
        return {"candidate": "ngram", "metric": metric, "cell_id": cell, "change_pct": -1.0, "change_low_pct": -4.0,
                "change_high_pct": 2.0, "limit_pct": limit, "decision": "pass", "runs": 3, "baseline_runs": 3}

    spec = forest_spec([comparison(f"decode-prose-c{c}") for c in (1, 4, 16)]
                       + [comparison("prefill-8192", "prefill_tok_s", 10.0)])
    assert spec["layout"]["legend"]["orientation"] == "h"
    limits = ["".join(t["name"].replace("<br>", "").split()) for t in spec["data"] if t.get("legendgroup") == "limits"]
    assert limits[1] == "".join("limit -7% (aggregate_tok_s decode-prose-c1, decode-prose-c4, decode-prose-c16)".split())
    assert all(len(line) <= LEGEND_CHARS for t in spec["data"] for line in t["name"].split("<br>"))


def test_a_candidates_runs_are_averaged_not_the_newest_alone():
    one = {"edges": list(GAP_EDGES_MS[10:13]), "counts": [4, 2]}
    other = {"edges": list(GAP_EDGES_MS[11:14]), "counts": [6, 8]}
    merged = mean_gap_histogram([one, other, {"edges": [], "counts": []}])
    assert merged["edges"] == list(GAP_EDGES_MS[10:14]) and merged["counts"] == [2.0, 4.0, 4.0]
    turns = mean_turns([[{"turn": 1, "ttft_ms": 100.0, "cached_share": 0.0}],
                        [{"turn": 1, "ttft_ms": 300.0, "cached_share": 0.5}, {"turn": 2, "ttft_ms": 50.0,
                                                                              "cached_share": None}]])
    assert turns == [{"turn": 1, "ttft_ms": 200.0, "runs": 2, "cached_share": 0.25},
                     {"turn": 2, "ttft_ms": 50.0, "runs": 1, "cached_share": None}]
