"""Markdown for a pull request or `$GITHUB_STEP_SUMMARY`: the tally, the gate where one is set, and the study's
answer with one row per candidate (the cell that decided it with its interval, the best gain, the worst side effect,
the cells left out); candidates link to the site when its URL is known, an outcome the gate fails on is bold."""

from __future__ import annotations

import os
from pathlib import Path

from ...verdicts.labels import counts_text
from ..report import answer_markdown
from ..site.pages import page_slug
from .registry import VerdictOutput, register_output
from .report import VerdictReport


def write(report: VerdictReport, site_url: str | None = None) -> str:
    # the same tally as `servebook report` and the site: candidates only, the baseline named apart
    tally = f"{counts_text(report.counts)} (baseline: {report.baseline})"
    base = site_url.rstrip("/") if site_url else None
    title = f"[{report.study}]({base}/studies/{page_slug(report.study)}.html)" if base else report.study
    gate = report.gate
    # The answer first, in the very words of `servebook report` and the study page; its ranking is the verdicts.
    lines = [f"### servebook: study {title}: {tally}", ""] + ([gate.describe(), ""] if gate.fail_on else [])
    return "\n".join(lines + [answer_markdown(report.answer(), site_url=base, bold=gate.fail_on)]) + "\n"


def write_step_summary(text: str) -> Path | None:
    """Append the Markdown to `$GITHUB_STEP_SUMMARY` when a GitHub Actions step set it (several steps may write
    there); None where none did."""
    target = os.environ.get("GITHUB_STEP_SUMMARY")
    if not target:
        return None
    path = Path(target)
    with path.open("a", encoding="utf-8") as handle:
        handle.write(text)
    return path


register_output(VerdictOutput("markdown", write, 40))
