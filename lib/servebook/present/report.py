"""`servebook report STUDY`: a study's answer first (the configuration to run and why), then every candidate
ranked with the cells that decided it; in a terminal, a notebook and Markdown from the same `Answer`."""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass
from pathlib import Path

from ..config.study import Study
from ..journal import Journal
from ..util.render import Block, Renderable, Table, Text, to_html
from ..verdicts.judge import VERDICT_STYLE, judge
from ..verdicts.output import evidence_words
from ..verdicts.ranking import Answer, Standing, study_answer
from .tables import VERDICT_MODEL

#: what the side-effect lines are, said once above them (docs/metrics.md states the rule)
SIDE_EFFECTS = ("side effects: changes beyond the noise in figures no rule judges (interval of the verdict's model "
                "excludes no change), worse first")
#: what the candidates' lines and rows are, said once above them
RANKED = ("candidates ranked against the baseline, one line each (mean change: geometric mean over the judged cells, "
          "each in its rule's better direction)")
RANKING_COLUMNS = ["rank", "candidate", "verdict", "runs", "mean change", "deciding cell", "best gain",
                   "worst side effect", "left out", "drafter and output", "note"]
#: columns shown only where some candidate has something in them
_OPTIONAL = {"best gain", "worst side effect", "left out", "drafter and output", "note"}


def ranking_row(s: Standing) -> list[str]:
    """A standing as the ranking table shows it, the same in every output and the same fields as its line
    (Standing.line): the verdict, the cell that decided it, the best gain, the worst side effect and the cells left
    out, with the drafter's acceptance and the output realism beside it, so a gain is read with what it was earned on."""
    left_out = s.left_out
    return ["-" if s.rank is None else str(s.rank), s.name, s.outcome, str(len(s.entrant.run_ids)),
            "-" if s.mean_change_pct is None or s.entrant.is_baseline else f"{s.mean_change_pct:+.1f}%",
            s.deciding_text(), s.best_gain_text(), s.worst_side_effect_text(),
            f"{left_out.count()}: {left_out.why()}" if left_out else "-", evidence_words(s.entrant.evidence),
            s.entrant.note or ""]


def shown_columns(rows: list[list[str]]) -> list[int]:
    """The ranking's columns worth a column: every one that is always there, the others where a row fills them."""
    return [i for i, name in enumerate(RANKING_COLUMNS)
            if name not in _OPTIONAL or any(row[i] not in ("", "-") for row in rows)]


def ranking_table(answer: Answer) -> Table:
    rows = [ranking_row(s) for s in answer.standings]
    shown = shown_columns(rows)
    table = Table([RANKING_COLUMNS[i] for i in shown], title=RANKED)
    for s, row in zip(answer.standings, rows, strict=True):
        table.add([row[i] for i in shown], "accepted" if s is answer.recommended else VERDICT_STYLE.get(s.outcome, ""))
    return table


@dataclass
class StudyReport(Renderable):
    """A study's answer: the question, the recommendation and why, the limits, a line per candidate, the method."""

    answer: Answer

    def blocks(self) -> list[Block]:
        a = self.answer
        blocks: list[Block] = [Text(f"study {a.study}", "heading")]
        if a.question:
            blocks.append(Text(f"Question: {a.question.strip()}"))
        blocks.append(Text(a.headline(), "accepted" if a.recommended is not None else "invalid"))
        blocks.append(Text("\n".join(f"- {line}" for line in a.why()), pre=True))
        if a.limits():
            blocks.append(Text(a.limits()))
        blocks.append(Text(RANKED + "\n" + "\n".join(s.line() for s in a.standings), pre=True))
        if a.side_effects():
            blocks.append(Text(SIDE_EFFECTS + "\n" + "\n".join(f"- {line}" for line in a.side_effects()), pre=True))
        blocks.append(Text(VERDICT_MODEL, "dim"))
        if a.method:
            blocks.append(Text(f"method: {a.method}", "dim"))
        return blocks

    def markdown(self) -> str:
        return answer_markdown(self.answer)

    def _repr_html_(self) -> str:
        return to_html(self.blocks())


def _md(text: str) -> str:
    return text.replace("|", "/").replace("\n", " ")


def answer_markdown(a: Answer, heading: str = "####", site_url: str | None = None,
                    bold: Collection[str] = ()) -> str:
    """The answer in Markdown: the same sentences and ranking as the terminal and the site; with the site's URL each
    candidate links to its newest run's page, and an outcome in `bold` (those the gate fails on) is bold."""
    lines = []
    if a.question:
        lines += [f"> {_md(a.question.strip())}", ""]
    lines += [f"{heading} {a.headline()}", ""] + [f"- {_md(line)}" for line in a.why()] + [""]
    lines += [_md(a.limits()), ""] if a.limits() else []
    rows = [ranking_row(s) for s in a.standings]
    shown = shown_columns(rows)
    lines += ["| " + " | ".join(RANKING_COLUMNS[i] for i in shown) + " |", "|" + "---|" * len(shown)]
    for s, row in zip(a.standings, rows, strict=True):
        row[1] = f"**{row[1]}**" if s is a.recommended else row[1]
        if site_url and s.entrant.run_ids:
            row[1] = f"[{row[1]}]({site_url.rstrip('/')}/runs/{s.entrant.run_ids[-1]}.html)"
        row[2] = f"**{row[2]}**" if s.entrant.outcome in bold else row[2]
        lines.append("| " + " | ".join(_md(row[i]) for i in shown) + " |")
    if a.side_effects():
        lines += ["", SIDE_EFFECTS, ""] + [f"- {_md(line)}" for line in a.side_effects()]
    lines += ["", f"<sub>{_md(VERDICT_MODEL)}</sub>"]
    if a.method:
        lines += ["", f"<sub>{_md('method: ' + a.method)}</sub>"]
    return "\n".join(lines) + "\n"


def study_report(study: Study | str | Path, journal: Journal | str = "journal") -> StudyReport:
    """The report of a study (a Study or its YAML) on a journal's recorded runs under its current rules; in a notebook
    `sb.study_report("data/studies/tiny-demo.yaml")` displays it. Judging here records nothing: a report reads."""
    from ..config import load_study

    chosen = study if isinstance(study, Study) else load_study(study)
    found = journal if isinstance(journal, Journal) else Journal(journal).require()
    return StudyReport(study_answer(chosen, judge(chosen, found, append=False)))
