"""Charts legible at a glance (issue 19, item 10): limits neutral and in the legend, comparable histogram bins,
measured ticks only, words left-aligned and figures right-aligned in every table."""

from servebook.present.figures import GAP_EDGES_MS, chunk_gap_spec, forest_spec, prefill_vs_prompt_size_spec
from servebook.util.render import Table, to_html


def comparison(candidate, cell, change, metric="aggregate_tok_s", limit=5.0):
    return {"candidate": candidate, "metric": metric, "cell_id": cell, "change_pct": change, "change_low_pct": change - 3,
            "change_high_pct": change + 3, "limit_pct": limit, "decision": "pass", "runs": 3, "baseline_runs": 3}


def test_the_forest_plot_names_its_limits_in_the_legend_in_a_neutral_colour():
    spec = forest_spec([comparison("a", "decode@1", -1.0), comparison("b", "decode@1", -7.0),
                        comparison("a", "prefill@8192", -2.0, "prefill_tok_s", 10.0)])
    limits = [t for t in spec["data"] if t.get("legendgroup") == "limits"]
    assert [t["name"].replace("<br>", " ") for t in limits] == ["limit -10% (prefill_tok_s prefill@8192)",
                                                                "limit -5% (aggregate_tok_s decode@1)"]
    assert {t["line"]["color"] for t in limits} == {"#374151"}
    assert all(s["x0"] == 0 for s in spec["layout"]["shapes"])  # only the zero line is a shape


def test_chunk_gap_histograms_share_their_bins_and_hide_nothing():
    fast = {"edges": list(GAP_EDGES_MS[10:14]), "counts": [5, 40, 3]}
    slow = {"edges": list(GAP_EDGES_MS[30:33]), "counts": [7, 9]}
    spec = chunk_gap_spec({"baseline": fast, "one-slot": slow})
    assert [t["type"] for t in spec["data"]] == ["scatter", "scatter"]  # outlines, not overlaid bars
    assert all(set(t["x"]) <= set(GAP_EDGES_MS) for t in spec["data"])
    assert spec["layout"]["xaxis"]["type"] == "log"


def test_a_one_point_prefill_chart_has_one_tick_and_room_around_it():
    cells = [{"kind": "prefill", "candidate": "a", "target_prompt_tokens": 2048, "prefill_tok_s": 900.0, "valid": True,
              "run_id": "r1"}]
    axis = prefill_vs_prompt_size_spec(cells)["layout"]["xaxis"]
    assert axis["tickvals"] == [2048.0] and axis["ticktext"] == ["2K"] and axis["range"][1] - axis["range"][0] == 1.0


def test_words_are_left_aligned_and_figures_right_aligned_in_notebook_tables():
    table = Table(["candidate", "tok/s", "change"])
    table.add(["baseline", "31.2", "-42.5% [-73.8, +26.2]"])
    html = to_html([table])
    assert '<td style="text-align:left">baseline</td>' in html
    assert '<td style="text-align:right">31.2</td>' in html
    assert '<td style="text-align:right">-42.5% [-73.8, +26.2]</td>' in html
