"""Runs from several machines: machines are blocks of the model even where rounds are nested in them, and a cell
within its limit on one machine's runs and beyond it on another's is decided machine by machine (`host`), never by
an average that holds on neither (verdicts.machines)."""

import math

import pandas as pd
import pytest

from servebook.config import ComparisonRule, VerdictRules, load_study
from servebook.estimates import fit_contrasts
from servebook.journal import Journal, Manifest, samples
from servebook.util.paths import project_root
from servebook.verdicts import judge_runs
from servebook.verdicts.comparisons import compare_rule, settle
from servebook.verdicts.evidence import baseline_evidence, run_cells
from servebook.verdicts.ranking import comparison_from

ROOT = project_root()
RULES = VerdictRules(rules=[ComparisonRule(metric="aggregate_tok_s", concurrency=[1, 4], max_regression_pct=7)])


def run(c1, c4, block):
    frame = pd.DataFrame([
        {"cell_id": f"decode-prose-c{c}", "kind": "decode", "category": "prose", "concurrency": c,
         "target_prompt_tokens": None, "aggregate_tok_s": v, "valid": True, "invalid_codes": "",
         "invalid_reasons": "", "reconciliation": "ok"} for c, v in ((1, c1), (4, c4))])
    frame.attrs["block"] = block
    return frame


def wobble(i: int) -> float:
    return 1 + 0.004 * ((i * 7) % 5 - 2)


def on_machines(effect: dict[str, float], rounds: int = 3) -> list[pd.DataFrame]:
    """One run per round on each machine, each machine's rounds its own (as resident rounds are), the fast one
    twice the slow one's speed; `effect`: the configuration's change on each machine."""
    speed = {"fast": 200.0, "slow": 100.0}
    return [run(speed[m] * (1 + effect[m]) * wobble(r + len(m)), 3 * speed[m] * (1 + effect[m]) * wobble(r),
                (m, f"{m}-round-{r}")) for m in effect for r in range(rounds)]


def judged(mine, base, peers):
    return judge_runs([(Manifest(status="completed", run_id=f"r{i}"), c) for i, c in enumerate(mine)], base, RULES,
                      is_baseline=False, peers=peers)


def test_rounds_nested_in_machines_keep_the_machines_as_blocks():
    """Unbalanced: the candidate ran once on the fast machine and three times on the slow one, the baseline the other
    way round. Each round belongs to one machine, so the machine columns are sums of round columns; dropping every
    block for that (as before) compared the baseline's fast runs with the candidate's slow ones: about -35%."""
    speed = {"fast": 200.0, "slow": 100.0}
    groups = {
        "base": [(("fast", f"f{r}"), speed["fast"] * wobble(r)) for r in range(3)] + [(("slow", "s0"), 100.0)],
        "cand": [(("fast", "f0"), 0.95 * speed["fast"])] + [(("slow", f"s{r}"), 95.0 * wobble(r)) for r in range(3)],
        "peer": [(("fast", f"f{r}"), 1.01 * speed["fast"] * wobble(r + 1)) for r in range(3)]
                + [(("slow", f"s{r}"), 101.0 * wobble(r + 2)) for r in range(3)],
    }
    contrast = fit_contrasts(groups, "base")["cand"]
    assert contrast.pct == pytest.approx(-5.0, abs=1.0)
    assert "blocks:" in contrast.method


def test_a_change_that_holds_on_one_machine_and_not_the_other_is_decided_per_machine():
    base = on_machines({"fast": 0.0, "slow": 0.0})
    peers = {"peer": on_machines({"fast": 0.01, "slow": -0.01})}
    flips = judged(on_machines({"fast": -0.01, "slow": -0.25}), base, peers)
    assert flips.outcome == "inconclusive" and flips.host_dependent and not flips.undecided
    cell = flips.comparisons[0]
    assert cell.decision == "host" and not cell.ok and cell.repeats_to_decide is None
    assert {m.label: m.decision for m in cell.machines} == {"fast": "pass", "slow": "fail"}
    assert "depends on the machine" in flips.reasons[0] and "on slow" in flips.reasons[0]
    # the same change on both machines is decided from both: rejected, each machine's figure kept beside it
    slower = judged(on_machines({"fast": -0.25, "slow": -0.25}), base, peers)
    assert slower.outcome == "rejected" and not slower.host_dependent
    assert all(m.decision == "fail" for c in slower.comparisons for m in c.machines)
    assert all(len(c.machines) == 2 for c in slower.comparisons)


def test_one_machine_gives_no_per_machine_figures():
    base = [run(100 * wobble(r), 300 * wobble(r + 1), ("m", str(r))) for r in range(3)]
    mine = [run(99 * wobble(r + 2), 298 * wobble(r), ("m", str(r))) for r in range(3)]
    found = judged(mine, base, {})
    assert found.outcome == "accepted" and all(not c.machines for c in found.comparisons)


def test_a_verdict_event_reads_back_with_its_machines():
    base = on_machines({"fast": 0.0, "slow": 0.0})
    flips = judged(on_machines({"fast": -0.01, "slow": -0.25}), base, {"peer": on_machines({"fast": 0, "slow": 0})})
    event = flips.to_event()
    again = comparison_from(event["comparisons"][0])
    assert again.decision == "host" and again.text() == flips.comparisons[0].text()


def _three_h200s() -> dict[str, list[pd.DataFrame]]:
    """The 1B vLLM pilot's four configurations as three lent H200s measured them: A (resident, 2026-12-02), B (sliced,
    2026-12-03 06:49) and C (the whole sliced study, 09:54), each journal's runs blocked by machine and round."""
    frames: dict[str, list[pd.DataFrame]] = {}
    for name in ("sample-journal-vllm-resident", "sample-journal-vllm-sliced", "sample-journal-vllm-h200b"):
        records = [r for r in Journal(samples.sample_journal(name)).runs()
                   if r.status == "completed" and "noise" not in (r.manifest.study or "")]
        for record, cells in zip(records, run_cells(records), strict=True):
            frames.setdefault(record.manifest.candidate["name"], []).extend(baseline_evidence([cells]))
    return frames


def test_three_h200s_decide_the_pilot_together_and_say_where_the_hosts_differ():
    """On the hosts' own journals chunk-2048 was rejected on A and C and accepted on B; no-prefix-cache the other way
    round (docs/findings/2026-12-03-two-kinds-of-lent-host.md). Together: both cells are `host`, with each machine's
    figure; kv-fp8, inconclusive on A and on C alone, is within every limit with all three machines' runs."""
    frames = _three_h200s()
    rules = load_study(ROOT / "data/studies/h200-vllm-1b-sliced.yaml").verdict.rules

    def cells(name):
        peers = {k: v for k, v in frames.items() if k not in (name, "baseline")}
        found = [c for rule in rules for c in compare_rule(frames[name], frames["baseline"], rule, peers=peers)]
        settle(found, 0.05)
        return {c.cell_id: c for c in found}

    chunk = cells("chunk-2048")["prefill-8192"]
    assert chunk.decision == "host"
    assert sorted(m.decision for m in chunk.machines) == ["fail", "fail", "pass"]
    fast = next(m for m in chunk.machines if m.decision == "pass")
    assert fast.label == "8a439014-991c" and -8 < fast.change_pct < -5
    assert all(-36 < m.change_pct < -30 for m in chunk.machines if m is not fast)
    # the CPU probe each cell records tells the kinds apart, and the reason says it beside each machine's figure
    assert fast.cpu_probe_ms < 1.0 < min(m.cpu_probe_ms for m in chunk.machines if m is not fast)
    assert "CPU probe 0.78 ms: within the limit" in chunk.text()
    cache = [c for c in cells("no-prefix-cache").values() if c.metric == "next_turn_ttft_s"][0]
    assert cache.decision == "host"
    assert {m.label: m.decision for m in cache.machines}["8a439014-991c"] == "fail"
    fp8 = cells("kv-fp8")
    assert all(c.decision == "pass" for c in fp8.values()), {k: c.text() for k, c in fp8.items()}
    # the pooled change lies among the machines' own: the machines stayed blocks
    assert len(fp8["decode-prose-c16"].machines) == 3
    for c in fp8.values():
        own = [m.change_pct for m in c.machines] or [c.change_pct]
        assert min(own) - 1.5 <= c.change_pct <= max(own) + 1.5
    assert not math.isnan(chunk.value)
