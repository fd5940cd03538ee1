"""Output realism from token sequences: the share an n-gram lookup predicts, the share that repeats the output
itself, and the forced tail. The recorded outputs (tests/fixtures/realism/) are the tiny random model's and Gemma 3
270M's, as llama-server streamed and tokenized them."""

import json
from pathlib import Path

import pytest

from servebook.measure.figures.realism import (
    Realism,
    lookup_hits,
    realism_codes,
    realism_of,
    sample_text,
    tail_share,
)

RECORDED = Path(__file__).parents[2] / "fixtures" / "realism"


def test_one_token_repeated_is_predicted_from_its_third_occurrence_on():
    # the lookup needs two tokens of context to match, and one occurrence of them followed by a token
    assert lookup_hits([], [7] * 10) == 7


def test_text_that_never_repeats_predicts_nothing():
    assert lookup_hits([], list(range(50))) == 0
    assert lookup_hits(list(range(100, 150)), list(range(50))) == 0


def test_a_copy_is_predicted_from_the_prompt_and_not_from_the_output_alone():
    source = list(range(40))
    assert lookup_hits(source, source) == 38  # all but the first two tokens, whose context is not yet copied
    assert lookup_hits([], source) == 0


def test_the_longest_match_wins_and_the_latest_occurrence_names_the_token():
    # "1 2 -> 3" then "1 2 -> 4": the later occurrence predicts 4; the 3-token context "0 1 2" predicts 3 still
    assert lookup_hits([1, 2, 3, 1, 2, 4], [1, 2]) == 0
    assert lookup_hits([1, 2, 3, 9, 1, 2, 4], [1, 2, 4]) == 1
    assert lookup_hits([0, 1, 2, 3, 5, 1, 2, 4], [0, 1, 2, 3]) == 2


def test_the_forced_tail_is_the_share_written_past_the_models_own_end():
    assert tail_share(64, 16) == 0.75
    assert tail_share(64, None) == 0.0  # it ran to the limit: nothing forced
    assert tail_share(64, 80) == 0.0


def test_a_cells_figures_weigh_outputs_by_their_length_and_the_tail_by_the_probed_requests():
    loop = Realism([1, 2, 3], [5] * 30, 30, natural_tokens=6, probed=True)
    prose = Realism([1, 2, 3], list(range(100, 110)), 10)
    figures = realism_of([loop, prose], sample_text("HIT HIT HIT"))
    assert figures["loop_share"] == pytest.approx(27 / 40)
    assert figures["forced_tail_share"] == pytest.approx(0.8)
    assert figures["realism_requests"] == 2 and figures["output_sample"] == "HIT HIT HIT"
    assert realism_codes(figures) == ["output_loops", "forced_tail"]


def test_no_output_is_not_measured_never_zero():
    figures = realism_of([])
    assert figures["ngram_share"] is None and figures["loop_share"] is None
    assert realism_codes(figures) == []
    assert realism_codes({"loop_share": float("nan"), "forced_tail_share": None}) == []


def test_a_sample_is_one_line_and_short():
    text = sample_text("a\n\nb   c" + " word" * 100)
    assert "\n" not in text and len(text) <= 160 and text.startswith("a b c")


def recorded(name: str) -> dict:
    return json.loads((RECORDED / f"{name}.json").read_text())


def cell_of(record: dict) -> dict:
    return realism_of([Realism(o["prompt_tokens"], o["output_tokens"], o["forced_tokens"], o["natural_tokens"], True)
                       for o in record["outputs"]], sample_text(record["outputs"][0]["text"]))


def test_the_tiny_random_models_output_is_flagged_as_a_loop():
    figures = cell_of(recorded("tiny-target-prose"))
    assert figures["loop_share"] > 0.8
    assert "output_loops" in realism_codes(figures)


def test_the_real_models_copy_output_is_predicted_from_its_prompt_and_not_flagged():
    figures = cell_of(recorded("gemma3-270m-copy"))
    assert figures["ngram_share"] > 0.5  # the lookup copies from the prompt: what prompt lookup is for
    assert figures["loop_share"] < 0.5
    assert realism_codes({**figures, "category": "copy"}) == []
    # the same output where the task was prose would be the prompt given back, not an answer
    assert realism_codes({**figures, "category": "prose"}) == ["prompt_echo"]
