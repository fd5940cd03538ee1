"""A run whose streams reasoned shows its reasoning and answer figures beside the decode figures, with their
definitions; a run without them (every run recorded before them, and every non-reasoning model's) shows what it did."""

import math

import pandas as pd

from servebook.present.kinds import PRESENT
from servebook.present.tables import estimate_tables, kind_tables, section_definitions


def decode_cell(concurrency: int, reasoned: bool, **extra) -> dict:
    cell = {"cell_id": f"decode-prose-c{concurrency}", "kind": "decode", "category": "prose",
            "concurrency": concurrency, "aggregate_tok_s": 100.0 * concurrency, "per_request_tok_s": 100.0,
            "ttft_s": 0.05, "valid": True, "reconciliation": "ok", "invalid_reasons": ""}
    if reasoned:
        cell.update(answer_ttft_s=0.30, reasoning_tokens=96, answer_tokens=96, reasoning_tok_s=110.0,
                    answer_tok_s=105.0, reasoning_split="split")
    return {**cell, **extra}


def decode_table(cells):
    return next(t for t in kind_tables(cells) if t.title == "Decode, prose prompts")


def test_the_columns_show_only_for_a_run_whose_streams_reasoned():
    plain = decode_table([decode_cell(1, False), decode_cell(4, False)])
    assert plain.columns == ["Concurrency", "Aggregate tok/s", "Per request tok/s", "TTFT", "ITL p99", "Check"]
    # a journal written before the columns, and a chat cell's answer wait where nothing reasoned, change nothing
    older = decode_table([decode_cell(1, False, answer_ttft_s=0.05, reasoning_split=math.nan)])
    assert older.columns == plain.columns
    thought = decode_table([decode_cell(1, True), decode_cell(4, False, answer_ttft_s=0.05)])
    assert thought.columns == ["Concurrency", "Aggregate tok/s", "Per request tok/s", "TTFT", "ITL p99",
                               "Answer TTFT", "Reasoning tokens", "Answer tokens", "Reasoning tok/s", "Answer tok/s",
                               "Check"]
    assert thought.rows[0].values[5:10] == ["300 ms", 96, 96, "110.0", "105.0"]
    assert thought.rows[1].values[5:10] == ["50 ms", "-", "-", "-", "-"]


def test_the_definitions_and_estimates_follow_the_same_rule():
    section = PRESENT["decode"].section
    assert section_definitions(section, [decode_cell(1, False)], "decode") == section.definitions
    shown = section_definitions(section, [decode_cell(1, True)], "decode")
    assert len(shown) == len(section.definitions) + 2 and "reconciled on the total only" in shown[-1]
    runs = pd.DataFrame([{**decode_cell(1, True), "candidate": "thinks"}, {**decode_cell(1, True), "candidate": "thinks",
                                                                          "answer_ttft_s": 0.32}])
    [table] = [t for t in estimate_tables(runs) if t.title.startswith("Decode")]
    assert "Answer TTFT ms" in table.columns and table.rows[0].values[table.columns.index("Answer TTFT ms")] \
        .startswith("310 range [")  # two runs: their range
    plain = pd.DataFrame([{**decode_cell(1, False), "candidate": "plain"}] * 2)
    [table] = [t for t in estimate_tables(plain) if t.title.startswith("Decode")]
    assert "Answer TTFT ms" not in table.columns
