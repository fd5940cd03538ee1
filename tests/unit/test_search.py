"""The configuration search: its space, the memory pruning, the surrogate's picks, and whole searches on a runner
that seals each launch from the simulator's timing model (the truth is known, nothing is launched)."""

import numpy as np
import pytest

from servebook.config import InputError, load_study
from servebook.config.candidate import Candidate
from servebook.config.search import MemoryBudget
from servebook.journal import Journal
from servebook.simulator.truth import timing_for
from servebook.sweeps import search
from servebook.sweeps.memory_fit import does_not_fit
from servebook.sweeps.runner import ModelledRunner
from servebook.sweeps.space import Space
from servebook.sweeps.surrogate import Prediction, expected_improvement, next_batch, space_filling
from servebook.util.paths import project_root
from servebook.util.progress import Reporter

STUDY = project_root() / "data/studies/search-sim.yaml"
LLAMA_8B = str(project_root() / "data/models/llama-3.1-8b")


def truth_of(study) -> dict[str, float]:
    return {c.name: timing_for(study.base.with_overrides(c.overrides)).decode_tok_s(study.search.objective.concurrency)
            for c in Space(study.search.space).configs()}


def test_the_space_names_every_combination_and_places_numbers_on_a_log_scale():
    space = Space({"knobs.max_running_requests": [2, 8, 32], "knobs.drafter": [{"kind": "none"},
                                                                              {"kind": "ngram", "max_draft_tokens": 4}]})
    configs = space.configs()
    assert len(configs) == 6
    assert configs[0].name == "max_running_requests=2,drafter=none"
    assert configs[-1].name == "max_running_requests=32,drafter=ngram-4"
    # 8 lies halfway between 2 and 32 on a log scale; the categorical knob is one-hot
    assert [c.features for c in configs if c.overrides["knobs.max_running_requests"] == 8][0] == pytest.approx((0.5, 1.0, 0.0))
    assert "6 configurations" in space.describe() and "log-numeric" in space.describe()


def sglang(**knobs):
    return Candidate.model_validate({"engine": "sglang", "model": {"path": "m"}, "launch": {"simulator": True},
                                     "knobs": {"context_length": 8192, **knobs}})


def test_memory_pruning_says_what_does_not_fit_and_why():
    budget = MemoryBudget(gpu_gib=48, gpus=2, model=LLAMA_8B)
    reason = does_not_fit(sglang(max_running_requests=32), budget)
    assert reason is not None and "32 running requests of 8192 tokens need 32.0 GiB" in reason and "room for 27" in reason
    assert does_not_fit(sglang(max_running_requests=32, kv_dtype="fp8_e4m3"), budget) is None, "8-bit KV fits twice"
    assert "needs 4 GPUs" in (does_not_fit(sglang(tensor_parallel_size=4), budget) or "")
    small = MemoryBudget(gpu_gib=16, gpus=1, model=LLAMA_8B)
    assert "leave no room for a KV cache" in (does_not_fit(sglang(max_running_requests=1), small) or "")
    with pytest.raises(ValueError, match="search.memory.model: unknown tiny model 'nope'"):
        does_not_fit(sglang().model_copy(update={"model": sglang().model.model_copy(update={"path": "tiny:nope"})}),
                     MemoryBudget(gpu_gib=48))


def test_space_filling_spreads_and_expected_improvement_prefers_promise_and_doubt():
    features = [(x / 10,) for x in range(11)]
    picks = space_filling(features, 3, seed=0)
    assert len(set(picks)) == 3
    assert {0, 10} & set(picks), "the farthest points of the line come early"
    gain = expected_improvement(Prediction(np.array([0.0, 0.1, 0.1]), np.array([0.01, 0.01, 0.2])), incumbent=0.0)
    assert gain[2] > gain[1] > gain[0], "equal means: the more uncertain one may improve more"
    observed = {0: 0.0, 5: 0.5, 10: 0.1}
    batch = next_batch(features, observed, [i for i in range(11)], 3, seed=0)
    assert len({i for i, *_ in batch}) == 3 and not {i for i, *_ in batch} & set(observed)
    assert batch[0][0] in (3, 4, 6, 7), "the first pick is near the best figure so far"


def test_a_search_prunes_screens_confirms_and_resumes(tmp_path):
    study = load_study(STUDY)
    truth = truth_of(study)
    journal = Journal(tmp_path / "journal")
    runner = ModelledRunner(seed=3, launch_cv=0.03)
    result = search(study, journal, runner=runner, reporter=Reporter(quiet=True))
    pruned = {p.name for p in result.pruned}
    assert len(pruned) == 12 and all("need" in p.reason for p in result.pruned)
    assert not pruned & set(runner.launches), "a pruned configuration is never launched"
    assert len(runner.launches) == result.launches <= study.search.budget
    assert len(result.confirmed) == 3 and all(len(c.values) == 3 for c in result.confirmed)
    best = max(v for name, v in truth.items() if name not in pruned)
    assert truth[result.winner] >= 0.97 * best
    assert result.runner_up is not None and result.margin is not None
    assert result.decision in ("better", "indistinguishable")
    assert result.conclusion().startswith(f"best: {result.winner}")
    recorded = journal.searches("search-sim")
    assert recorded[-1]["winner"] == result.winner and len(recorded[-1]["pruned"]) == 12
    text = str(result)
    assert "why never launched" in text and "space-filling start" in text and "expected improvement" in text
    assert "text/html" in result._repr_mimebundle_()
    # the journal is the state: a second search launches nothing more and reaches the same winner
    again = search(study, journal, runner=runner, reporter=Reporter(quiet=True))
    assert len(runner.launches) == result.launches
    assert again.winner == result.winner
    assert all(s.why == "measured by an earlier search" for s in again.screened)


def test_a_budget_override_and_a_budget_too_small(tmp_path):
    study = load_study(STUDY)
    runner = ModelledRunner(seed=1)
    result = search(study, Journal(tmp_path / "j"), runner=runner, reporter=Reporter(quiet=True), budget=16)
    assert len(runner.launches) == 16 and result.budget == 16
    with pytest.raises(InputError, match="--budget 9"):
        search(study, Journal(tmp_path / "k"), runner=runner, reporter=Reporter(quiet=True), budget=9)


@pytest.mark.parametrize("change, message", [
    ("knobs.chunky: [1, 2]", "search.space.knobs.chunky: unknown field 'knobs.chunky'"),
    ("objective: {metric: aggregate_tok_s, concurrency: 64}", "search.objective: concurrency [64] is not in"),
    ("budget: 5", "budget 5: confirming 3 x 3 takes 9 launches"),
])
def test_a_search_section_is_checked_before_anything_launches(tmp_path, change, message):
    text = STUDY.read_text()
    if change.startswith("knobs."):
        text = text.replace("    knobs.kv_dtype: [auto, fp8_e4m3]\n", f"    knobs.kv_dtype: [auto, fp8_e4m3]\n    {change}\n")
    else:
        key = change.split(":")[0]
        lines = [line for line in text.splitlines() if not line.startswith(f"  {key}:")]
        text = "\n".join(lines).replace("search:\n", f"search:\n  {change}\n")
    path = tmp_path / "study.yaml"
    path.write_text(text)
    with pytest.raises(InputError, match=message.replace("[", r"\[").replace("]", r"\]")):
        load_study(path)


def test_the_timing_model_plants_a_drafter_that_gains_at_one_request_and_loses_at_many():
    mtp = timing_for(sglang(max_running_requests=32, drafter={"kind": "mtp", "max_draft_tokens": 4, "num_steps": 3,
                                                               "topk": 1}))
    plain = timing_for(sglang(max_running_requests=32))
    assert mtp.decode_tok_s(1) > 1.4 * plain.decode_tok_s(1)
    assert mtp.decode_tok_s(32) < 0.95 * plain.decode_tok_s(32)
    fp8 = timing_for(sglang(max_running_requests=32, kv_dtype="fp8_e4m3"))
    assert fp8.decode_tok_s(32) > plain.decode_tok_s(32)
