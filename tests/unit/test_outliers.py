"""Outlier runs (verdicts.outliers): a whole run apart from its siblings, left out only with a sign of disturbance."""

import numpy as np
import pandas as pd

from servebook.config import ComparisonRule, VerdictRules
from servebook.verdicts.evidence import undisturbed
from servebook.verdicts.outliers import mark_outliers, outlier_runs

RULES = VerdictRules(rules=[ComparisonRule(metric="aggregate_tok_s", concurrency=[1, 2, 4], category="prose",
                                           max_regression_pct=7)])
SPEEDS = {"baseline": 260.0, "ngram": 400.0, "one-slot": 160.0}


def run_frame(position, speed, *, foreign=0.02, probe=2.0, machine="m1"):
    rows = [{"cell_id": f"decode-prose-c{c}", "kind": "decode", "category": "prose", "concurrency": c,
             "target_prompt_tokens": None, "valid": True, "invalid_codes": "", "invalid_reasons": "",
             "aggregate_tok_s": speed * c ** 0.5, "foreign_cpu_cores": foreign, "cpu_probe_ms": probe,
             "cpu_steal_cores": 0.0} for c in (1, 2, 4)]
    frame = pd.DataFrame(rows)
    frame.attrs["block"] = (machine, str(position))
    return frame


def study(rng, runs=3, cv=0.04, odd=None):
    """Each candidate's runs at its speed with lognormal noise; `odd`: (name, position, factor, disturbance)."""
    out = {}
    for name, speed in SPEEDS.items():
        frames = []
        for i in range(runs):
            factor, disturbance = (odd[2], odd[3]) if odd and odd[:2] == (name, i) else (1.0, {})
            frames.append(run_frame(i, speed * factor * float(np.exp(rng.normal(0, cv))), **disturbance))
        out[name] = frames
    return out


def ids(frames):
    return {name: [f"{name}-{i}" for i in range(len(runs))] for name, runs in frames.items()}


def test_a_disturbed_run_far_from_its_siblings_is_left_out_with_its_figures():
    # the demo's disturbed baseline run: about 55% of its siblings' decode, 0.39-0.47 foreign cores against 0.02
    frames = study(np.random.default_rng(1), odd=("baseline", 1, 0.55, {"foreign": 0.43}))
    found = mark_outliers(frames, ids(frames), RULES)
    assert [(o.name, o.position) for o in found] == [("baseline", 1)]
    text = found[0].text()
    assert "baseline-1 sits" in text and "below its siblings" in text and "0.43 CPU cores" in text
    assert "left out" in text
    kept, left = undisturbed(frames["baseline"][1])
    assert kept.empty and len(left) == 3 and set(left["invalid_codes"]) == {"outlier_run"}
    assert all(frames["baseline"][i]["valid"].all() for i in (0, 2)), "its siblings stay"


def test_an_outlier_with_no_sign_of_disturbance_is_kept_and_named():
    frames = study(np.random.default_rng(2), odd=("ngram", 2, 0.6, {}))
    found = mark_outliers(frames, ids(frames), RULES)
    assert [(o.name, o.position, o.disturbed) for o in found] == [("ngram", 2, False)]
    assert "kept" in found[0].text() and frames["ngram"][2]["valid"].all()


def test_two_runs_tell_no_outlier_and_one_odd_cell_makes_no_outlier_run():
    frames = study(np.random.default_rng(3), runs=2, odd=("baseline", 1, 0.5, {"foreign": 0.45}))
    assert outlier_runs(frames, ids(frames), RULES) == []
    frames = study(np.random.default_rng(4))
    frames["one-slot"][0].loc[0, "aggregate_tok_s"] *= 0.4  # one cell of one run, not the run
    assert outlier_runs(frames, ids(frames), RULES) == []


def test_a_slower_cpu_probe_counts_as_a_sign_of_disturbance():
    frames = study(np.random.default_rng(5), odd=("one-slot", 0, 0.5, {"probe": 3.1}))
    (found,) = outlier_runs(frames, ids(frames), RULES)
    assert found.disturbed and "CPU probe took 3.10 ms" in found.text()


def test_runs_of_ordinary_noise_are_rarely_called_outliers():
    """Without any odd run, over 200 studies of 3 candidates x 3 runs x 3 cells at 4% noise, the rule names an
    outlier in few of them (a false call only widens nothing: an undisturbed one is kept)."""
    rng = np.random.default_rng(6)
    flagged = sum(bool(outlier_runs(f, ids(f), RULES)) for f in (study(rng) for _ in range(200)))
    assert flagged <= 20, flagged


def test_the_noise_floor_says_why_where_it_parts_from_the_verdict():
    """The demo's page said the baseline's between-run CV at one request was 38.7%, that 112 runs a side were needed,
    beside an accepted +103.6% from 3 runs: the floor is now shown with the spread the verdicts used and a line
    where the two part."""
    from servebook.present.views import noise_blocks
    from servebook.verdicts.noise import NoiseFloor, beside_verdicts

    floor = NoiseFloor("aggregate_tok_s", "decode-prose-c1", runs=2, cv_pct=38.7, limit_pct=7, runs_needed=112)
    calm = NoiseFloor("aggregate_tok_s", "decode-prose-c4", runs=3, cv_pct=3.0, limit_pct=7, runs_needed=3)
    se = 0.05 * (1 / 3 + 1 / 2) ** 0.5  # a pooled spread of 5% behind 3 runs against 2
    compared = [{"metric": "aggregate_tok_s", "cell_id": c, "log_se": se, "runs": 3, "baseline_runs": 2,
                 "decision": "pass"} for c in ("decode-prose-c1", "decode-prose-c4")]
    rows = beside_verdicts([floor, calm], compared)
    assert abs(rows[0].verdict_cv_pct - 5.0) < 1e-9 and rows[0].verdict_decided
    assert rows[0].disagreement().startswith("decided all the same: the verdicts' model puts the spread at 5.0%")
    assert rows[1].disagreement() is None, "where they agree nothing is added"
    table, *notes = noise_blocks(rows)
    assert table.rows[0].values[-1] == "5.0% (1)" and table.rows[1].values[-1] == "5.0%"
    assert [n.text for n in notes] == [f"(1) aggregate_tok_s, decode-prose-c1: {rows[0].disagreement()}"]
    wide = {**compared[0], "decision": "straddle", "log_se": 0.3 * (1 / 3 + 1 / 2) ** 0.5}
    undecided = beside_verdicts([NoiseFloor("aggregate_tok_s", "decode-prose-c1", 2, 38.7, 7, 112)], [wide])
    assert undecided[0].disagreement() is None, "an undecided verdict agrees with a floor that cannot resolve it"
    spread = beside_verdicts([NoiseFloor("aggregate_tok_s", "decode-prose-c1", 2, 38.7, 7, 112)],
                             [{**compared[0], "decision": "straddle"}])
    assert "the baseline's own runs spread more" in spread[0].disagreement()
