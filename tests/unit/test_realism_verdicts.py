"""A drafter's gain earned on output that loops (or lies mostly past the model's own end) is a caveat of its
verdict with a code, shown with the drafter's acceptance and the output realism, and the answer does not
recommend a candidate on that evidence alone."""

import pandas as pd

from servebook.verdicts.comparisons import Comparison
from servebook.verdicts.output import (
    UNREALISTIC_GAIN,
    caveat_from,
    evidence_words,
    output_evidence,
    realism_caveats,
)
from servebook.verdicts.ranking import Entrant, answer


def comparison(cell_id: str, change: float, better: bool) -> Comparison:
    return Comparison("aggregate_tok_s", cell_id, cell_id.split("-")[1], 1, None, 100 + change, 100.0, 3, 3, change,
                      change - 5, change + 5, 7.0, "pass", True, better=better)


def cells(loop: float | None, tail: float | None = 0.0, acceptance: float | None = 0.9) -> pd.DataFrame:
    return pd.DataFrame([{"cell_id": f"decode-{c}-c1", "kind": "decode", "category": c, "valid": True,
                          "draft_tokens": 100.0, "draft_acceptance": acceptance, "tokens_per_step": 1.8,
                          "draft_source": "engine", "ngram_share": loop if c == "prose" else 0.3,
                          "loop_share": loop if c == "prose" else 0.1,
                          "forced_tail_share": tail, "realism_requests": 2, "output_sample": "HIT HIT HIT"}
                         for c in ("prose", "code")])


def test_a_gain_on_a_looping_cell_is_a_caveat_naming_the_cell_and_what_the_output_was():
    gains = [comparison("decode-prose-c1", 103.6, True), comparison("decode-code-c1", 2.0, False)]
    caveats = realism_caveats(gains, [cells(0.94), cells(0.92)])
    assert [(c.code, c.cell_id, c.codes) for c in caveats] == [(UNREALISTIC_GAIN, "decode-prose-c1",
                                                                 ["output_loops"])]
    text = caveats[0].text("in aggregate decode, prose at 1 request")
    assert "+103.6%" in text and "93% of its output repeats the output itself" in text and "HIT HIT" in text
    assert caveat_from({**caveats[0].__dict__, "added_later": 1}) == caveats[0]


def test_a_gain_on_realistic_output_or_without_realism_recorded_carries_no_caveat():
    gain = [comparison("decode-prose-c1", 30.0, True)]
    assert realism_caveats(gain, [cells(0.2)]) == []
    old = cells(None).drop(columns=["ngram_share", "loop_share", "forced_tail_share", "realism_requests"])
    assert realism_caveats(gain, [old]) == []  # recorded before realism existed: nothing claimed


def test_a_forced_tail_alone_is_a_caveat_too():
    caveats = realism_caveats([comparison("decode-code-c1", 40.0, True)], [cells(0.1, tail=0.75)])
    assert caveats[0].codes == ["forced_tail"]
    assert "75% of it was forced past the model's own end" in caveats[0].text("in code")


def test_the_evidence_reads_acceptance_and_realism_and_says_a_synthetic_rate_is_one():
    evidence = output_evidence([cells(0.9), cells(0.7)])
    assert evidence is not None and evidence["draft_acceptance"] == 0.9
    words = evidence_words(evidence)
    assert words.startswith("accepted 90% (1.80 tokens/step)") and "loop 45%" in words  # (0.9 + 0.1 + 0.7 + 0.1) / 4
    assert "synthetic" in evidence_words({**evidence, "draft_source": "synthetic"})
    assert evidence_words({"draft_tokens": 0.0, "draft_source": "engine"}) == "drafted nothing"
    assert evidence_words(None) == "-"


def entrant(name: str, outcome: str, comparisons: list, caveats=(), baseline: bool = False) -> Entrant:
    return Entrant(name, outcome, comparisons, [], ["r"], baseline, caveats=list(caveats))


def test_the_answer_passes_over_a_drafter_whose_every_gain_is_on_looping_output():
    gains = [comparison("decode-prose-c1", 103.6, True), comparison("decode-code-c1", 132.3, True)]
    caveats = realism_caveats(gains, [cells(0.95)])
    caveats += realism_caveats([gains[1]], [cells(0.95).assign(loop_share=0.95)])
    found = answer("demo", None, "baseline", [
        entrant("baseline", "accepted", [], baseline=True),
        entrant("ngram", "accepted", gains, caveats),
        entrant("chunk-64", "accepted", [comparison("decode-prose-c1", 1.0, False)])])
    assert found.recommended is not None and found.recommended.name == "chunk-64"
    why = " ".join(found.why())
    assert "ngram is accepted but not recommended" in why and UNREALISTIC_GAIN in why


def test_with_no_other_candidate_the_baseline_stays_and_the_answer_says_why():
    gains = [comparison("decode-prose-c1", 103.6, True)]
    found = answer("demo", None, "baseline", [
        entrant("baseline", "accepted", [], baseline=True),
        entrant("ngram", "accepted", gains, realism_caveats(gains, [cells(0.95)]))])
    assert found.recommended is not None and found.recommended.entrant.is_baseline
    assert found.why()[0].startswith("no candidate is recommended")
    assert any("ngram is accepted but not recommended" in line for line in found.why())


def test_a_drafter_with_a_gain_on_realistic_output_is_recommended_whatever_else_loops():
    gains = [comparison("decode-prose-c1", 103.6, True), comparison("decode-code-c1", 20.0, True)]
    found = answer("demo", None, "baseline", [
        entrant("baseline", "accepted", [], baseline=True),
        entrant("ngram", "accepted", gains, realism_caveats(gains, [cells(0.95)]))])
    assert found.recommended is not None and found.recommended.name == "ngram"


def test_a_gain_where_the_output_repeats_the_prompt_is_a_caveat_unless_the_task_is_to_copy():
    """Gemma 3 270M handed a prose instruction as raw text gives the instruction back (n-gram 95%, loop 2%): prompt
    lookup drafts it all. In a copy category that is the task."""
    echoed = pd.DataFrame([{"cell_id": f"decode-{c}-c1", "kind": "decode", "category": c, "valid": True,
                            "ngram_share": 0.95, "loop_share": 0.02, "forced_tail_share": 0.0,
                            "realism_requests": 2, "output_sample": "The lighthouse keeper kept two logbooks."}
                           for c in ("prose", "copy")])
    gains = [comparison("decode-prose-c1", 91.4, True), comparison("decode-copy-c1", 12.0, True)]
    caveats = realism_caveats(gains, [echoed])
    assert [(c.cell_id, c.codes) for c in caveats] == [("decode-prose-c1", ["prompt_echo"])]
    assert "93% of its output repeats the prompt" in caveats[0].text("in aggregate decode, prose at 1 request")
