"""A study is checked whole at load: nothing a sweep would only find after running every candidate."""

from pathlib import Path

import pytest

from servebook.config.errors import InputError
from servebook.config.loading import load_study

BASE = """
name: s
base: {engine: llamacpp, model: {path: "tiny:target"}}
plan: {decode: {concurrency: [1, 2], categories: [prose]}, prefill: {prompt_tokens: [512]}}
"""


def load(tmp_path, extra: str):
    path = tmp_path / "study.yaml"
    path.write_text(BASE + extra)
    return load_study(path)


def test_a_missing_baseline_is_refused_before_anything_runs(tmp_path):
    with pytest.raises(InputError, match="no candidate named 'baseline'.*include_base is false"):
        load(tmp_path, "include_base: false\nvariants: [{name: v, set: {knobs.chunk_size: 64}}]\n")
    assert load(tmp_path, "include_base: false\nvariants: [{name: v, set: {knobs.chunk_size: 64}}]\n"
                          "verdict: {baseline: v}\n").verdict.baseline == "v"


@pytest.mark.parametrize("rule, words", [
    ("{metric: aggregate_tok_s, concurrency: [4], max_regression_pct: 5}", "concurrency \\[4\\]"),
    ("{metric: ttft_s, category: code, max_regression_pct: 5}", "category 'code'"),
    ("{metric: prefill_tok_s, prompt_tokens: [2048], max_regression_pct: 5}", "prompt_tokens \\[2048\\]"),
])
def test_a_rule_that_selects_cells_the_plan_never_measures_is_refused(tmp_path, rule, words):
    with pytest.raises(InputError, match=f"verdict.rules\\[0\\]: .*{words}"):
        load(tmp_path, f"verdict: {{rules: [{rule}]}}\n")


def test_a_prefill_rule_without_prefill_cells_is_refused(tmp_path):
    with pytest.raises(InputError, match="no prefill section"):
        load(tmp_path, "verdict: {rules: [{metric: prefill_tok_s, max_regression_pct: 5}]}\n"
                       "plan: {prefill: null}\n")


@pytest.mark.parametrize("name", ["a/b", "../../etc", ".x"])
def test_variant_names_must_be_file_names(tmp_path, name):
    with pytest.raises(InputError, match="cannot be used as a file name"):
        load(tmp_path, f"variants: [{{name: '{name}', set: {{knobs.chunk_size: 64}}}}]\n")


def test_axis_values_with_slashes_become_safe_entry_names(tmp_path):
    study = load(tmp_path, "axes: {grid: {model.served_name: [plain, 'a/../b']}}\n")
    names = [e.name for e in study.expand()]
    assert all("/" not in n and ".." not in n for n in names), names


def test_a_plan_longer_than_a_candidate_s_context_per_request_is_refused_before_launch():
    from servebook.config import Plan
    from servebook.engines import get_engine
    from tests.helpers.candidates import make_candidate

    plan = Plan.model_validate({"prefill": {"prompt_tokens": [4096]},
                                "reuse": {"turns": 8, "first_prompt_tokens": 2048, "turn_tokens": 512}})
    four_slots = make_candidate(knobs={"context_length": 16384, "max_running_requests": 4})
    with pytest.raises(InputError, match="prefill.prompt_tokens needs 4097 tokens; reuse needs 5648 tokens, "
                                         "but .* holds 4096 tokens per request"):
        get_engine("llamacpp").check_plan_fits(four_slots, plan)
    get_engine("llamacpp").check_plan_fits(four_slots.with_overrides({"knobs.max_running_requests": 1}), plan)
    get_engine("llamacpp").check_plan_fits(make_candidate(), plan)  # unknown context: nothing to check


def test_a_unified_kv_pool_lets_one_request_fill_the_whole_context():
    """llama-server with -kvu shares one KV pool across its slots (n_ctx_seq = n_ctx in llama-context.cpp): the
    llama.cpp noise study (196,608 tokens, 32 slots, -kvu) was refused on a lent H100 for its 8K prompt, as if each
    slot held 6,144 tokens (2026-12-06)."""
    from servebook.config import Plan
    from servebook.engines import get_engine
    from tests.helpers.candidates import make_candidate

    llamacpp = get_engine("llamacpp")
    study = load_study(Path(__file__).parents[3] / "data/studies/h200-llamacpp-1b-noise-sliced.yaml")
    baseline = study.expand()[0].candidate
    assert llamacpp.context_per_request(baseline) == 196608
    llamacpp.check_plan_fits(baseline, study.plan)
    split = make_candidate(knobs={"context_length": 196608, "max_running_requests": 32})
    assert llamacpp.context_per_request(split) == 6144
    # the last flag wins, the command line over the environment, and --kv-unified-per-slot caps a slot
    assert llamacpp.context_per_request(split.with_overrides({"extra_args": ["-kvu", "-no-kvu"]})) == 6144
    assert llamacpp.context_per_request(split.with_overrides({"launch.env": {"LLAMA_ARG_KV_UNIFIED": "1"}})) == 196608
    assert llamacpp.context_per_request(split.with_overrides(
        {"launch.env": {"LLAMA_ARG_KV_UNIFIED": "1"}, "extra_args": ["--no-kv-unified"]})) == 6144
    assert llamacpp.context_per_request(split.with_overrides(
        {"extra_args": ["--kv-unified", "--kv-unified-per-slot", "16384"]})) == 16384
    plan = Plan.model_validate({"prefill": {"prompt_tokens": [32768]}})
    with pytest.raises(InputError, match="holds 16384 tokens per request"):
        llamacpp.check_plan_fits(split.with_overrides({"extra_args": ["-kvu", "--kv-unified-per-slot", "16384"]}), plan)


def test_a_study_for_a_second_machine_runs_the_same_configurations_as_the_study_it_serves():
    """h100-vllm-8b-pair.yaml holds three of the 8B study's engines on an H100: its runs count in the 8B study's
    verdicts only while its candidates, plan and rules are that study's, id for id."""
    studies = Path(__file__).parents[3] / "data/studies"
    full, pair = load_study(studies / "h200-vllm-8b-sliced.yaml"), load_study(studies / "h100-vllm-8b-pair.yaml")
    ids = {entry.name: entry.candidate.id for entry in full.expand()}
    assert {entry.name: entry.candidate.id for entry in pair.expand()} == {
        name: ids[name] for name in ("baseline", "chunk-2048", "kv-fp8")}
    assert pair.plan.id == full.plan.id and pair.verdict.hash == full.verdict.hash
