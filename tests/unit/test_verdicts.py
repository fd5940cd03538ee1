import textwrap

import pandas as pd
import pytest

from servebook.config import ComparisonRule, InputError, VerdictRules, load_study
from servebook.journal import Manifest
from servebook.verdicts import compare_rule, judge_run

BASE = """
name: s
base:
  model: {path: "tiny:target"}
  knobs: {chunk_size: 512, max_running_requests: 4}
"""


def write(tmp_path, text):
    path = tmp_path / "study.yaml"
    path.write_text(textwrap.dedent(BASE) + textwrap.dedent(text))
    return path


def test_grid_zip_and_variants_expand_in_order_without_duplicates(tmp_path):
    study = load_study(write(tmp_path, """
        axes:
          grid: {knobs.chunk_size: [128, 512]}
          zip: {knobs.max_running_requests: [2, 4], knobs.context_length: [4096, 8192]}
        variants:
          - {name: ngram, set: {knobs.drafter: {kind: ngram}}}
        """))
    names = [e.name for e in study.expand()]
    assert names == ["baseline",
                     "chunk_size=128,max_running_requests=2,context_length=4096",
                     "chunk_size=128,max_running_requests=4,context_length=8192",
                     "chunk_size=512,max_running_requests=2,context_length=4096",
                     "chunk_size=512,max_running_requests=4,context_length=8192",
                     "ngram"]
    assert len({e.candidate.id for e in study.expand()}) == len(names)


def test_combination_equal_to_the_base_is_the_baseline(tmp_path):
    study = load_study(write(tmp_path, "axes: {grid: {knobs.chunk_size: [128, 512]}}\n"))
    assert [e.name for e in study.expand()] == ["baseline", "chunk_size=128"]


def test_misspelled_axis_names_the_axis(tmp_path):
    with pytest.raises(InputError) as exc:
        load_study(write(tmp_path, "axes: {grid: {knobs.chunk_sise: [128]}}\n"))
    assert "axes.grid.knobs.chunk_sise: unknown field 'knobs.chunk_sise'" in str(exc.value)
    assert "chunk_size" in str(exc.value)  # the known fields are listed


def test_misspelled_variant_key_names_it(tmp_path):
    with pytest.raises(InputError, match=r"variants\[0\].set.knobz.chunk_size: unknown field 'knobz'"):
        load_study(write(tmp_path, "variants: [{name: a, set: {knobz.chunk_size: 1}}]\n"))


def test_axis_value_of_the_wrong_type_names_field_and_candidate(tmp_path):
    with pytest.raises(InputError) as exc:
        load_study(write(tmp_path, "axes: {grid: {knobs.max_running_requests: [2, many]}}\n"))
    message = str(exc.value)
    assert "knobs.max_running_requests" in message and "many" in message


def test_zip_axes_must_have_equal_lengths(tmp_path):
    with pytest.raises(InputError, match="same number of values"):
        load_study(write(tmp_path, "axes: {zip: {knobs.chunk_size: [1, 2], knobs.max_running_requests: [1]}}\n"))


def test_unknown_rule_field_is_refused(tmp_path):
    with pytest.raises(InputError, match="max_drop"):
        load_study(write(tmp_path, "verdict: {rules: [{metric: aggregate_tok_s, max_drop: 2}]}\n"))


def cells(values: dict[int, float], prefill: float = 1000.0, valid=True) -> pd.DataFrame:
    rows = [{"cell_id": f"decode-prose-c{c}", "kind": "decode", "category": "prose", "concurrency": c,
             "target_prompt_tokens": None, "aggregate_tok_s": v, "per_request_tok_s": v / c, "ttft_s": 0.05 * c,
             "prefill_tok_s": None, "valid": valid, "invalid_reasons": "" if valid else "2 requests failed",
             "reconciliation": "ok"} for c, v in values.items()]
    rows.append({"cell_id": "prefill-2048", "kind": "prefill", "category": "prose", "concurrency": 1,
                 "target_prompt_tokens": 2048, "aggregate_tok_s": None, "per_request_tok_s": None, "ttft_s": 0.1,
                 "prefill_tok_s": prefill, "valid": True, "invalid_reasons": "", "reconciliation": "ok"})
    return pd.DataFrame(rows)


RULES = VerdictRules(rules=[ComparisonRule(metric="aggregate_tok_s", concurrency=[1, 4], max_regression_pct=2),
                            ComparisonRule(metric="prefill_tok_s", prompt_tokens=[2048], max_regression_pct=10)])
DONE = Manifest(status="completed")


def test_rejected_naming_each_failing_cell_with_the_numbers():
    base = cells({1: 100.0, 4: 200.0}, prefill=1000.0)
    mine = cells({1: 104.3, 4: 189.0}, prefill=670.0)
    verdict = judge_run(DONE, mine, base, RULES, is_baseline=False)
    assert verdict.outcome == "rejected"
    assert verdict.reasons == ["aggregate decode, prose at 4 requests: -5.5% (1 vs 1 runs: no interval) (limit -2%)",
                               "cold prefill, at 2048 tokens: -33.0% (1 vs 1 runs: no interval) (limit -10%)"]


def test_accepted_within_limits_names_the_worst_cell():
    verdict = judge_run(DONE, cells({1: 101.0, 4: 199.0}, prefill=950.0), cells({1: 100.0, 4: 200.0}), RULES,
                        is_baseline=False)
    assert verdict.outcome == "accepted"
    assert verdict.reasons[0] == ("aggregate decode: 2 cell(s) within limits, the worst aggregate decode, prose at "
                                  "4 requests: -0.5% (1 vs 1 runs: no interval) (limit -2%)")


def test_invalid_cells_reject_even_when_faster():
    verdict = judge_run(DONE, cells({1: 150.0, 4: 300.0}, valid=False), cells({1: 100.0, 4: 200.0}), RULES,
                        is_baseline=False)
    assert verdict.outcome == "rejected"
    assert verdict.reasons[0].startswith("decode-prose-c1 invalid: 2 requests failed")


def test_failed_run_and_missing_baseline():
    failed = judge_run(Manifest.model_validate({"status": "failed", "failure": {"cause": "bad_flag", "message": "invalid argument: --x"}}),
                       None, None, RULES, is_baseline=False)
    assert failed.outcome == "failed" and failed.reasons == ["bad_flag: invalid argument: --x"]
    orphan = judge_run(DONE, cells({1: 100.0}), None, RULES, is_baseline=False)
    assert orphan.outcome == "rejected" and "no valid baseline" in orphan.reasons[-1]
    assert judge_run(None, None, None, RULES, is_baseline=False).outcome == "failed"


def test_ttft_regression_is_a_rise():
    rule = ComparisonRule(metric="ttft_s", concurrency=[4], max_regression_pct=5)
    base, mine = cells({4: 200.0}), cells({4: 200.0})
    mine.loc[mine.cell_id == "decode-prose-c4", "ttft_s"] = 0.22  # 10% slower first token
    [comparison] = compare_rule(mine, base, rule)
    assert comparison.change_pct == pytest.approx(10.0) and not comparison.ok
    assert comparison.text() == "TTFT, prose at 4 requests: +10.0% (1 vs 1 runs: no interval) (limit +5%)"
