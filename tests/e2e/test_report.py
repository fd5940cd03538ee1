"""`servebook report` on a copy of the committed vLLM journal: the answer first, intervals at the verdict's levels,
and the same decision text as the CI Markdown of `judge`."""

import json
import shutil

from servebook.journal import samples

from .test_cli import REPO, servebook

STUDY = REPO / "data" / "studies" / "h200-vllm-1b.yaml"


def verdict_files(journal):
    return sorted(p.relative_to(journal) for p in journal.rglob("verdicts/*.json"))


def test_report_opens_with_the_answer_and_the_ci_markdown_carries_the_same_decision(tmp_path):
    journal = tmp_path / "journal"
    shutil.copytree(samples.sample_journal("sample-journal-vllm"), journal)
    before = verdict_files(journal)
    text = servebook("report", STUDY, "--journal", journal).stdout
    assert verdict_files(journal) == before  # a report judges without recording
    head = text.split("candidates ranked")[0]
    assert "study h200-vllm-1b" in head and "Question: Which max-num-seqs" in head
    assert "Recommended: baseline, as no candidate is accepted" in head
    # ngram at 16 requests: -39.1% is beyond -5% at that cell alone, not with the 6 cells tested together; the
    # interval shown beside its undecided cell is Holm's, and it reaches the limit. Holm's rule is said once, in the
    # method, not beside every cell
    markdown = servebook("report", STUDY, "--journal", journal, "--format", "markdown").stdout
    ngram = next(line for line in markdown.splitlines() if line.startswith("| 5 | ngram | rejected"))
    assert "beyond its limit" in ngram and "prompt-lookup drafting; vLLM turns async scheduling off with it" in ngram
    assert "Holm over" not in markdown and markdown.count("method: ") == 1 and "(Holm)" in markdown
    ci = servebook("judge", STUDY, "--journal", journal, "--format", "markdown").stdout
    assert markdown in ci
    data = json.loads(servebook("judge", STUDY, "--journal", journal, "--format", "json").stdout)
    ngram = next(c for c in data["candidates"] if c["name"] == "ngram")
    c16 = next(c for c in ngram["comparisons"] if c["cell_id"] == "decode-prose-c16")
    assert c16["decision"] == "straddle" and c16["change_high_pct"] < -5 < c16["decision_high_pct"]
    shown = f"-39.1% [{c16['decision_low_pct']:+.1f}, {c16['decision_high_pct']:+.1f}]"
    assert any(shown in reason for reason in ngram["reasons"])
    bad = servebook("report", STUDY, "--journal", journal, "--format", "html", check=False)
    assert bad.returncode == 2 and "choose text or markdown" in bad.stderr
