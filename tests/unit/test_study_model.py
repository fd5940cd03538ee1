"""Verdicts from one model per cell over the whole study: pooled and moderated variance, blocks, one-sided
decisions (intersection-union acceptance, Holm rejection), error spent over the looks of a sequential design."""

import math

import numpy as np
import pandas as pd
import pytest

from servebook.config import ComparisonRule, VerdictRules
from servebook.estimates import ALPHA, fit_contrasts, holm, spent_alpha
from servebook.journal import Manifest
from servebook.journal.manifest import Environment
from servebook.verdicts import judge_runs

RULES = VerdictRules(rules=[ComparisonRule(metric="aggregate_tok_s", concurrency=[1, 4], max_regression_pct=7)])


def run(c1, c4, block=None):
    frame = pd.DataFrame([
        {"cell_id": f"decode-prose-c{c}", "kind": "decode", "category": "prose", "concurrency": c,
         "target_prompt_tokens": None, "aggregate_tok_s": v, "valid": True, "invalid_codes": "",
         "invalid_reasons": "", "reconciliation": "ok"} for c, v in ((1, c1), (4, c4))])
    if block is not None:
        frame.attrs["block"] = block
    return frame


def runs(rng, effect, n, cv=0.05):
    return [run(*(100 * (1 + effect) * math.exp(rng.normal(0, cv)) for _ in range(2)), block=("m", str(i)))
            for i in range(n)]


def verdict(mine, base, peers=None, alpha=ALPHA):
    return judge_runs([(Manifest(status="completed", run_id=f"r{i}"), c) for i, c in enumerate(mine)], base, RULES,
                      is_baseline=False, peers=peers, alpha=alpha)


def test_the_study_decides_what_one_pair_cannot():
    """A -30% loss in 3 runs per side: the pair alone has 4 degrees of freedom; five more candidates that measured
    the same cells give the same noise 12 more, and the one-sided bound clears the limit."""
    rng = np.random.default_rng(3)
    base, loss = runs(rng, 0, 3), runs(rng, -0.30, 3)
    peers = {f"p{i}": runs(rng, 0, 3) for i in range(4)}
    found = verdict(loss, base, peers)
    assert found.outcome == "rejected"
    assert "variance pooled over 6 candidates and 18 runs" in found.method
    assert found.comparisons[0].confidence_pct == pytest.approx(90)


def test_acceptance_needs_every_cell_non_inferior_without_a_multiplicity_penalty():
    base = [run(100, 100, ("m", "0")), run(101, 99, ("m", "1")), run(99, 101, ("m", "2"))]
    same = [run(100, 100.5, ("m", "0")), run(100.5, 100, ("m", "1")), run(99.5, 99.5, ("m", "2"))]
    found = verdict(same, base)
    assert found.outcome == "accepted"
    assert all(c.decision == "pass" and c.p_within < ALPHA for c in found.comparisons)
    assert found.method.startswith("each cell non-inferior at one-sided 5%")


def test_an_improvement_beyond_the_noise_is_called_better():
    base = [run(100, 100, ("m", str(i))) for i in range(3)]
    faster = [run(110 + i, 111 - i, ("m", str(i))) for i in range(3)]
    found = verdict(faster, base)
    assert found.outcome == "accepted" and all(c.better for c in found.comparisons)
    assert ", better (limit" in found.reasons[0]


def test_rounds_are_blocks_a_slow_round_slows_every_candidate_alike():
    """Round 2 ran 20% slower for everyone (drift, a busy neighbour): as blocks, it costs nothing."""
    slow = {0: 1.0, 1: 0.8, 2: 1.0}
    groups = {name: [(("m", str(r)), 100 * factor * slow[r] * (1 + 0.002 * k)) for r in range(3)]
              for k, (name, factor) in enumerate((("base", 1.0), ("cand", 0.9), ("peer", 1.0)))}
    contrast = fit_contrasts(groups, "base")["cand"]
    assert contrast.pct == pytest.approx(-9.8, abs=0.5)
    assert contrast.se < 0.01 and "blocks" in contrast.method
    unblocked = {name: [(("m", "0"), v) for _, v in values] for name, values in groups.items()}
    assert fit_contrasts(unblocked, "base")["cand"].se > 5 * contrast.se


def test_a_noisier_candidate_gets_a_wider_interval_than_the_pooled_noise_alone():
    rng = np.random.default_rng(7)
    groups = {f"p{i}": [(("m", str(r)), 100 * math.exp(rng.normal(0, 0.01))) for r in range(4)] for i in range(5)}
    groups["noisy"] = [(("m", str(r)), v) for r, v in enumerate((80.0, 120.0, 90.0, 110.0))]
    contrasts = fit_contrasts(groups, "p0")
    assert contrasts["noisy"].se > 2 * contrasts["p1"].se


def test_holm_rejects_step_down():
    assert holm([0.001, 0.02, 0.04], 0.05) == [True, True, True]
    assert holm([0.02, 0.02, 0.02], 0.05) == [False, False, False]
    assert holm([0.01, 0.03, 0.5], 0.05) == [True, False, False]


def test_looks_together_keep_alpha_and_the_last_look_keeps_most():
    """Simulated under the null: one more run per look, the statistics of the looks correlated as sqrt(n_j/n_k);
    the chance that any look crosses its boundary is the planned 5%."""
    from scipy import stats

    first, looks = 3, 4
    levels = [spent_alpha(k, looks, first_runs=first) for k in range(1, looks + 1)]
    assert levels == sorted(levels) and levels[-1] < ALPHA and levels[-1] > 0.03
    rng = np.random.default_rng(5)
    draws = rng.normal(size=(200_000, first + looks - 1))
    cumulative = np.cumsum(draws, axis=1)
    z = np.stack([cumulative[:, n - 1] / np.sqrt(n) for n in range(first, first + looks)], axis=1)
    crossed = (z > stats.norm.ppf(1 - np.array(levels))).any(axis=1).mean()
    assert crossed == pytest.approx(ALPHA, abs=0.003)


def test_a_sequential_look_decides_less_than_a_fixed_one():
    rng = np.random.default_rng(11)
    base, mine = runs(rng, 0, 4), runs(rng, -0.01, 4)
    fixed = verdict(mine, base, alpha=ALPHA).comparisons[0].change_low_pct
    first_look = verdict(mine, base, alpha=spent_alpha(1, 4)).comparisons[0].change_low_pct
    assert first_look < fixed  # a wider bound at the first look of four


def test_machines_are_blocks_and_a_key_tells_them_apart():
    a = Environment(host="vm", machine_id="m1", boot_id="b1", gpus=[{"index": 0, "uuid": "GPU-1"}])
    b = Environment(host="vm", machine_id="m2", boot_id="b2", gpus=[{"index": 0, "uuid": "GPU-9"}])
    assert a.machine_key != b.machine_key and a.machine_key == "m1:b1/GPU-1"
    assert Environment(host="vm").machine_key == "vm"  # journals written before machine ids


def test_the_detectable_change_shrinks_with_runs_and_grows_with_noise():
    from servebook.estimates import detectable_change

    assert detectable_change(5, 3) > detectable_change(5, 6) > detectable_change(5, 12)
    assert detectable_change(10, 6) > detectable_change(5, 6)
    assert detectable_change(5, 1) is None


def test_machines_are_an_additive_factor_a_slower_machine_does_not_look_like_a_slower_candidate():
    """Two GPU groups, one 20% slower; the candidate ran only on the slow one, its peers on both: the machine's
    effect is estimated through the peers, and the candidate's true -5% is found, not -24%."""
    speed = {"fast": 1.0, "slow": 0.8}
    groups = {}
    for k, name in enumerate(("base", "peer1", "peer2")):
        groups[name] = [((m, str(r)), 100 * speed[m] * (1 + 0.003 * ((k + r) % 3))) for m in speed for r in range(3)]
    groups["cand"] = [(("slow", str(r)), 100 * 0.95 * speed["slow"] * (1 + 0.003 * (r % 3))) for r in range(3)]
    contrast = fit_contrasts(groups, "base")["cand"]
    assert contrast.pct == pytest.approx(-5.0, abs=0.8)
    assert "2 machines" in contrast.method and "interleaving rounds" in contrast.method


def test_within_run_noise_is_told_apart_from_between_run_noise():
    """Two launches: each steady inside (requests within 1%), one 25% slower than the other. The noise floor says
    the spread is between launches, so more requests per launch would not help."""
    from servebook.verdicts import noise_rows

    def requests(rate):
        return pd.DataFrame([{"cell_id": "decode-prose-c1", "t_send": 0.0, "t_first": 0.1,
                              "t_last": 0.1 + 63 / (rate * (1 + 0.01 * (i % 3 - 1))), "completion_tokens": 64,
                              "prompt_tokens": 100, "error": None} for i in range(12)])

    rules = VerdictRules(rules=[ComparisonRule(metric="aggregate_tok_s", concurrency=[1], max_regression_pct=7)])
    [row] = noise_rows([run(400, 600), run(300, 450)], rules, [requests(400), requests(300)])
    assert row.cv_pct > 15 and row.within_run_pct < 1
    [bare] = noise_rows([run(400, 600), run(300, 450)], rules)
    assert bare.within_run_pct is None and bare.allocation is None
    timed = [frame.assign(wall_s=3.0) for frame in (run(400, 600), run(300, 450))]
    [spent] = noise_rows(timed, rules, [requests(400), requests(300)], run_seconds=[60.0, 62.0])
    assert spent.allocation is not None and spent.allocation.cell_scale == 0.5  # launches, not longer cells
    assert spent.allocation.launch_pct == pytest.approx(spent.cv_pct, rel=0.01)


def test_the_noise_floor_pools_the_spread_within_machines_not_across_them():
    """Two machines, one 25% slower, each steady within 1%: the noise floor is the 1%, not the machines' difference
    (the 8B baseline on an H200 and an H100 read 12.8% pooled plainly against 0.4% within, 2026-12-06); on one
    machine it is the plain CV, as before."""
    from servebook.verdicts import noise_rows

    def on(machine: str, position: int, rate: float) -> pd.DataFrame:
        return run(rate, rate * 1.5, block=(machine, str(position)))

    rules = VerdictRules(rules=[ComparisonRule(metric="aggregate_tok_s", concurrency=[1], max_regression_pct=5)])
    fast, slow = [396.0, 400.0, 404.0], [297.0, 300.0, 303.0]
    runs = [on("h200", i, r) for i, r in enumerate(fast)] + [on("h100", i, r) for i, r in enumerate(slow)]
    [row] = noise_rows(runs, rules)
    # each machine's runs lie 1% either side of its own mean: 4 squares of 1e-4 over 6 runs less 2 machines
    assert row.cv_pct == pytest.approx(1.0, rel=1e-6)
    assert row.machines == 2 and row.runs == 6 and row.runs_needed == 2
    [one] = noise_rows([on("h200", i, r) for i, r in enumerate(fast + slow)], rules)
    assert one.cv_pct > 15 and one.machines == 1  # one machine: the 25% is the launches' own spread
    [unmarked] = noise_rows([run(r, r * 1.5) for r in fast + slow], rules)
    assert unmarked.cv_pct == pytest.approx(one.cv_pct)
    # a run per machine (a parallel sweep's lanes, one run a boot): nothing within one to measure, so the plain
    # spread across them, said to be an upper bound
    [lone] = noise_rows([on("h200", 0, 400.0), on("h100", 0, 300.0)], rules)
    assert lone.across_machines and lone.cv_pct == pytest.approx(100 * (50 * 2 ** 0.5) / 350)
    assert not row.across_machines and not one.across_machines


def test_the_noise_floor_reads_no_within_run_error_for_a_metric_its_requests_do_not_give():
    """A tail percentile of ITL has no per-request version: no within-run error, rather than the decode rate's read
    under its name (which advised cells eight times as long)."""
    from servebook.verdicts import noise_rows

    def requests(rate):
        return pd.DataFrame([{"cell_id": "decode-prose-c1", "t_send": 0.0, "t_first": 0.1,
                              "t_last": 0.1 + 63 / (rate * (1 + 0.05 * (i % 3 - 1))), "completion_tokens": 64,
                              "prompt_tokens": 100, "error": None} for i in range(12)])

    runs = [run(400, 600).assign(itl_p99_s=v) for v in (0.010, 0.012)]
    tail = VerdictRules(rules=[ComparisonRule(metric="itl_p99_s", concurrency=[1], max_regression_pct=20)])
    [row] = noise_rows(runs, tail, [requests(400), requests(300)], run_seconds=[60.0, 60.0])
    assert row.cv_pct is not None and row.within_run_pct is None and row.allocation is None
    decode = VerdictRules(rules=[ComparisonRule(metric="aggregate_tok_s", concurrency=[1], max_regression_pct=5)])
    assert noise_rows(runs, decode, [requests(400), requests(300)])[0].within_run_pct is not None


def test_a_reuse_cells_next_turn_error_comes_from_its_conversations_not_from_turns_counted_as_independent():
    """A launch's conversations differ as wholes (vLLM 8B on an H100: one conversation's next turns at 24-28 ms, the
    next one's at 38-40 ms, 2026-12-06). The next turn's within-run error is its conversations' means' spread; the
    reuse cell records it beside the all-turns TTFT error, and the noise floor reads it for the rule that judges it,
    from the cell where recorded, else from the requests."""
    from servebook.measure.figures.stats import conversations_se_pct, se_pct
    from servebook.verdicts import noise_rows

    turns = [(0, 0.025), (0, 0.026), (0, 0.027), (1, 0.039), (1, 0.040), (1, 0.038), (2, 0.031), (2, 0.032), (2, 0.030)]
    means = [0.026, 0.039, 0.031]
    assert conversations_se_pct(turns) == pytest.approx(se_pct(means))
    assert conversations_se_pct(turns) > 1.5 * se_pct([t for _, t in turns])  # independent turns: too small
    assert conversations_se_pct([(0, 0.03), (0, 0.04)]) is None  # one conversation: no spread to measure

    rules = VerdictRules(rules=[ComparisonRule(metric="next_turn_ttft_s", max_regression_pct=25)])

    def reuse(next_turn: float, recorded: float | None) -> pd.DataFrame:
        row = {"cell_id": "reuse", "kind": "reuse", "category": "prose", "concurrency": 1, "target_prompt_tokens": 4096,
               "next_turn_ttft_s": next_turn, "within_se_pct": 16.6, "valid": True, "invalid_codes": "",
               "invalid_reasons": "", "reconciliation": "ok"}
        return pd.DataFrame([row if recorded is None else {**row, "next_turn_within_se_pct": recorded}])

    [row] = noise_rows([reuse(0.030, 6.0), reuse(0.036, 8.0)], rules)
    assert row.within_run_pct == pytest.approx(50 ** 0.5)  # 6% and 8%; the all-turns 16.6% is another figure's
    requests = pd.DataFrame([{"cell_id": "reuse", "turn": turn, "conversation": conversation, "t_send": 0.0,
                              "t_first": ttft, "t_last": ttft + 0.1, "completion_tokens": 16, "prompt_tokens": 4096,
                              "error": None}
                             for conversation, ttft in turns for turn in (2,)] +
                            [{"cell_id": "reuse", "turn": 1, "conversation": c, "t_send": 0.0, "t_first": 0.11,
                              "t_last": 0.2, "completion_tokens": 16, "prompt_tokens": 4096, "error": None}
                             for c in range(3)])
    [older] = noise_rows([reuse(0.030, None), reuse(0.036, None)], rules, [requests, requests])
    assert older.within_run_pct == pytest.approx(conversations_se_pct(turns))


def test_cells_that_recorded_their_own_error_give_the_site_its_within_run_column():
    """The site reads cell summaries, not request tables: cells record their headline figure's error themselves."""
    from servebook.verdicts import noise_rows

    rules = VerdictRules(rules=[ComparisonRule(metric="aggregate_tok_s", concurrency=[1], max_regression_pct=7)])
    recorded = [frame.assign(within_se_pct=[e, 9.0], wall_s=2.0)
                for frame, e in ((run(400, 600), 3.0), (run(300, 450), 4.0))]
    [row] = noise_rows(recorded, rules, run_seconds=[30.0, 30.0])
    assert row.within_run_pct == pytest.approx((12.5) ** 0.5)  # root mean square of 3% and 4%, c4's 9% not mixed in
    assert row.allocation is not None


@pytest.mark.parametrize("cv, within, scale", [
    (10.0, 1.0, 0.5),   # launch to launch: shorter cells and more launches spend the time best
    (5.0, 4.9, 8.0),    # almost all of it inside a run: longer cells, up to 8 times
    (5.0, 5.0, 8.0),    # nothing left between launches
    (4.0, 2.0, 2.5),    # sqrt(60 x 4 / (3 x 12)) = 2.6, in half steps
])
def test_allocation_follows_kalibera_and_jones(cv, within, scale):
    from servebook.estimates import allocate, runs_needed_for

    allocation = allocate(cv, within, 7, launch_s=60, cell_s=3)
    assert allocation.cell_scale == scale
    assert allocation.launch_pct == pytest.approx(100 * max((cv / 100) ** 2 - (within / 100) ** 2, 0) ** 0.5)
    if scale > 1:  # the longer cells buy fewer runs than today's spread needs
        assert allocation.runs_needed is not None and allocation.runs_needed <= runs_needed_for(7, cv)
    assert "then" in allocation.describe()


def test_runs_on_a_machine_no_other_candidate_used_are_never_compared_unpaired():
    """The candidate ran only on GPU group B, everyone else on A: nothing tells B's speed from the candidate's,
    so its runs leave the model and the verdict says why instead of comparing machines."""
    base = [run(100, 100, ("A", str(i))) for i in range(3)]
    peers = {"p": [run(101, 99, ("A", str(i))) for i in range(3)]}
    elsewhere = [run(70, 70, ("B", str(i))) for i in range(3)]
    found = verdict(elsewhere, base, peers)
    assert found.outcome == "inconclusive"
    assert any("judged within machines" in r for r in found.reasons)
    groups = {"base": [(("A", "0"), 100.0), (("A", "1"), 101.0)], "cand": [(("B", "0"), 70.0), (("B", "1"), 71.0)],
              "p": [(("A", "0"), 99.0), (("A", "1"), 100.0)]}
    assert "cand" not in fit_contrasts(groups, "base")
