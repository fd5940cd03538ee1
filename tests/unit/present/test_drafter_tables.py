"""A drafter's own evidence beside the decode figures: the tokens it proposed and the share kept, from the engine's
counts. On the 8B study's H200 (2026-12-04) vLLM's n-gram drafter proposed no token in any decode cell and cost 33-46%
of decode: a reader sees "0" there, not a blank that could mean "not counted"."""

from servebook.engines import ServerCounts
from servebook.measure.cells import drafter_figures
from servebook.present.kinds import PRESENT
from servebook.present.tables import kind_tables, section_definitions


def counts(drafted: float | None, accepted: float | None = None) -> ServerCounts:
    return ServerCounts(prompt_tokens=512.0, cached_tokens=0.0, generation_tokens=1024.0, draft_tokens=drafted,
                        accepted_tokens=accepted)


def test_a_drafter_that_proposed_nothing_is_zero_drafted_tokens_with_no_acceptance():
    idle = drafter_figures({"completion_tokens": 64}, counts(0.0, 0.0), source="engine")
    assert idle == {"draft_tokens": 0.0, "draft_accepted_tokens": 0.0, "draft_acceptance": None,
                    "tokens_per_step": 1.0, "draft_source": "engine"}
    busy = drafter_figures({"completion_tokens": 64}, counts(8.0, 3.0), source="engine")
    assert busy["draft_acceptance"] == 0.375 and busy["draft_accepted_tokens"] == 3.0
    # 64 tokens in 61 forward passes of the target: 3 of them came free
    assert busy["tokens_per_step"] == 64 / 61


def test_a_synthetic_acceptance_says_so():
    figures = drafter_figures({"completion_tokens": 64}, counts(40.0, 30.0), source="synthetic")
    assert figures["draft_source"] == "synthetic"


def test_no_counters_or_per_request_counts_leave_the_figures_alone():
    assert drafter_figures({}, counts(None), source="engine") == {"draft_source": "engine"}  # counters not exported
    assert drafter_figures({}, None, source="engine") == {"draft_source": "engine"}
    # llama.cpp counts per request; its figures stand
    assert drafter_figures({"draft_tokens": 40, "draft_acceptance": 0.5}, counts(0.0, 0.0),
                           source="engine") == {"draft_source": "engine"}


def test_a_candidate_without_a_drafter_has_no_drafter_figures_whatever_the_engine_counts():
    # llama.cpp reports draft_n 0 in every request's timings with no drafter configured
    assert drafter_figures({"draft_tokens": 0, "draft_acceptance": None}, None, source=None) == {
        "draft_tokens": None, "draft_accepted_tokens": None, "draft_acceptance": None, "tokens_per_step": None,
        "draft_source": None}


def decode_cell(concurrency: int, **extra) -> dict:
    return {"cell_id": f"decode-prose-c{concurrency}", "kind": "decode", "category": "prose",
            "concurrency": concurrency, "aggregate_tok_s": 100.0 * concurrency, "per_request_tok_s": 100.0,
            "ttft_s": 0.05, "valid": True, "reconciliation": "ok", "invalid_reasons": "", **extra}


def test_the_decode_table_shows_drafted_tokens_and_acceptance_only_for_a_run_with_a_drafter():
    def table(cells):
        return next(t for t in kind_tables(cells) if t.title == "Decode, prose prompts")

    assert "Drafted tokens" not in table([decode_cell(1), decode_cell(4)]).columns
    idle = table([decode_cell(1, draft_tokens=0.0, draft_acceptance=None), decode_cell(4, draft_tokens=8.0,
                                                                                       draft_acceptance=0.375)])
    at = idle.columns.index("Drafted tokens")
    assert idle.columns[at + 2] == "Accepted"
    assert idle.rows[0].values[at] == 0 and idle.rows[0].values[at + 2] == "-"
    assert idle.rows[1].values[at] == 8 and idle.rows[1].values[at + 2] == "38 %"
    section = PRESENT["decode"].section
    shown = section_definitions(section, [decode_cell(1, draft_tokens=0.0)], "decode")
    assert any("proposed nothing" in line for line in shown)
    assert section_definitions(section, [decode_cell(1)], "decode") == section.definitions
