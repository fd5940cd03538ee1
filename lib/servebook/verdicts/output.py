"""A candidate's output as its verdict reads it: what a drafter's gain was earned on (its acceptance, and the output
realism of the cells it gained in: measure.figures.realism), and whether its greedy output equals the baseline's.

A gain measured on output that loops, or that lies mostly past the model's own end, is a fact of the benchmark more
than of the drafter: the verdict carries it as a caveat with a code, and the answer does not recommend a candidate
on that evidence alone."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import pandas as pd

from ..config.metrics import METRIC_WORDS
from ..measure.equivalence import compare_outputs
from ..measure.equivalence import describe as describe_equivalence
from ..measure.figures.realism import echo_share, realism_codes
from ..util.frames import frame_records
from .comparisons import Comparison

__all__ = ["UNREALISTIC_GAIN", "Caveat", "caveat_from", "caveat_where", "evidence_words", "output_equivalence",
           "output_evidence", "read_output", "realism_caveats"]

#: the caveat's code: a gain beyond the noise in a cell whose output loops or is mostly forced tail
UNREALISTIC_GAIN = "gain_on_unrealistic_output"
#: the figures output_evidence averages over a side's valid decode cells
EVIDENCE_COLUMNS = ("draft_tokens", "draft_acceptance", "tokens_per_step", "ngram_share", "loop_share", "forced_tail_share")


@dataclass
class Caveat:
    """A gain the verdict found, and why it may not hold on real output: `codes` from realism_codes."""

    code: str
    cell_id: str
    metric: str
    change_pct: float | None
    codes: list[str] = field(default_factory=list)
    loop_share: float | None = None
    forced_tail_share: float | None = None
    sample: str | None = None
    echo_share: float | None = None

    def text(self, where: str) -> str:
        said = []
        if "output_loops" in self.codes and self.loop_share is not None:
            said.append(f"{self.loop_share:.0%} of its output repeats the output itself")
        if "prompt_echo" in self.codes and self.echo_share is not None:
            said.append(f"{self.echo_share:.0%} of its output repeats the prompt, which the task did not ask for")
        if "forced_tail" in self.codes and self.forced_tail_share is not None:
            said.append(f"{self.forced_tail_share:.0%} of it was forced past the model's own end")
        change = "" if self.change_pct is None else f" {self.change_pct:+.1f}%"
        sample = f' (it reads "{self.sample}")' if self.sample else ""
        return (f"{self.code}: the gain {where}{change} was measured on output where " + " and ".join(said)
                + f"{sample}; a drafter guesses such output right by construction, so the gain says little about "
                  "text users are served")


def caveat_from(data: dict) -> Caveat:
    """A Caveat from a verdict event's dict (keys a later servebook adds are dropped)."""
    return Caveat(**{k: v for k, v in data.items() if k in Caveat.__dataclass_fields__})


def _decode_rows(frames: list[pd.DataFrame | None]) -> pd.DataFrame:
    """The valid cells of every run that carry a drafter's counts or output realism (decode cells: the kinds that
    keep their output's text)."""
    parts = [f for f in frames if f is not None and not f.empty]
    if not parts:
        return pd.DataFrame()
    rows = pd.concat(parts, ignore_index=True)
    keep = rows["valid"].astype(bool) if "valid" in rows else pd.Series(True, index=rows.index)
    carried = pd.Series(False, index=rows.index)
    for column in ("draft_tokens", "realism_requests"):
        if column in rows:
            carried |= rows[column].notna()
    return rows[keep & carried]


def _mean(rows: pd.DataFrame, column: str) -> float | None:
    if column not in rows:
        return None
    values = pd.to_numeric(rows[column], errors="coerce").dropna()
    return float(values.mean()) if len(values) else None


def realism_caveats(comparisons: list[Comparison], frames: list[pd.DataFrame | None]) -> list[Caveat]:
    """A caveat for every gain beyond the noise in a decode cell whose output, over the candidate's runs, loops or
    is mostly forced tail. None where realism was not measured (runs recorded before it): nothing is claimed."""
    rows = _decode_rows(frames)
    if rows.empty or "loop_share" not in rows:
        return []
    caveats = []
    for c in comparisons:
        if not c.better:
            continue
        cell = rows[rows["cell_id"] == c.cell_id]
        figures = {k: _mean(cell, k) for k in ("ngram_share", "loop_share", "forced_tail_share")}
        category = cell["category"].dropna().iloc[0] if "category" in cell and cell["category"].notna().any() else None
        codes = realism_codes({**figures, "category": category})
        if codes:
            samples = cell["output_sample"].dropna() if "output_sample" in cell else pd.Series(dtype=str)
            caveats.append(Caveat(UNREALISTIC_GAIN, c.cell_id, c.metric, c.change_pct, codes,
                                  figures["loop_share"], figures["forced_tail_share"],
                                  str(samples.iloc[0])[:60] if len(samples) else None, echo_share(figures)))
    return caveats


def output_evidence(frames: list[pd.DataFrame | None]) -> dict[str, Any] | None:
    """A side's drafter evidence and output realism, each the mean over its valid cells of every run that carry them, with
    where its acceptance came from; None where its runs recorded none of them."""
    rows = _decode_rows(frames)
    if rows.empty:
        return None
    found: dict[str, Any] = {column: _mean(rows, column) for column in EVIDENCE_COLUMNS}
    if all(v is None for v in found.values()):
        return None
    sources = rows["draft_source"].dropna().unique().tolist() if "draft_source" in rows else []
    found["draft_source"] = str(sources[0]) if sources else None
    return found


def evidence_words(evidence: dict[str, Any] | None) -> str:
    """'accepted 97% (1.95 tokens/step); output: n-gram 95%, loop 93%, forced tail 80%' ('-' where nothing is
    known); a synthetic acceptance is said to be one."""
    if not evidence:
        return "-"
    parts = []
    acceptance = evidence.get("draft_acceptance")
    if _known(acceptance):
        step = evidence.get("tokens_per_step")
        per_step = f" ({step:.2f} tokens/step)" if _known(step) else ""
        synthetic = ", synthetic" if evidence.get("draft_source") == "synthetic" else ""
        parts.append(f"accepted {acceptance:.0%}{per_step}{synthetic}")
    elif evidence.get("draft_tokens") == 0:
        parts.append("drafted nothing")
    elif evidence.get("draft_source"):
        parts.append("acceptance not reported")
    shares = [(name, evidence.get(key)) for name, key in (("n-gram", "ngram_share"), ("loop", "loop_share"),
                                                            ("forced tail", "forced_tail_share"))]
    said = [f"{name} {value:.0%}" for name, value in shares if _known(value)]
    if said:
        parts.append("output: " + ", ".join(said))
    return "; ".join(parts) or "-"


def _known(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and not math.isnan(value)


def caveat_where(caveat: Caveat, comparisons: list[Comparison]) -> str:
    """The cell of a caveat in the words its comparison uses ('in aggregate decode, prose at 1 request')."""
    found = next((c for c in comparisons if c.cell_id == caveat.cell_id and c.metric == caveat.metric), None)
    return f"in {METRIC_WORDS[found.metric]}, {found.where}" if found else f"in {caveat.cell_id}"


def output_equivalence(baseline_records: list, records: list) -> str | None:
    """Greedy outputs of the candidate's newest run against the baseline's (plan.equivalence), as a note: a drafter
    or a batching change must not change what the model says."""
    def outputs(found: list) -> list[dict] | None:
        table = next((t for t in (r.table("outputs") for r in reversed(found) if r.status == "completed")
                      if t is not None), None)
        return None if table is None else frame_records(table)

    reference, other = outputs(baseline_records), outputs(records)
    if reference is None or other is None:
        return None
    return describe_equivalence(compare_outputs(reference, other), "the baseline")


def read_output(comparisons: list[Comparison], frames: list[pd.DataFrame | None], *, drafter: bool,
                against: list | None, records: list) -> tuple[dict[str, Any] | None, list[Caveat], list[str]]:
    """What a verdict says of a candidate's output: its drafter evidence and realism; with a drafter, the caveats on
    its gains; against the baseline's runs (None for the baseline itself), whether its greedy output equals theirs.
    Returns (evidence, caveats, the sentences for its reasons)."""
    caveats = realism_caveats(comparisons, frames) if drafter and against is not None else []
    said = [c.text(caveat_where(c, comparisons)) for c in caveats]
    equivalence = output_equivalence(against, records) if against is not None else None
    return output_evidence(frames), caveats, said + ([equivalence] if equivalence else [])
