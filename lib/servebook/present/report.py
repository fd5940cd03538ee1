"""`servebook report STUDY`: a study's answer first (the configuration to run and why), then every candidate
ranked with the cells that decided it; in a terminal, a notebook and Markdown from the same `Answer`."""

from __future__ import annotations

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
RANKING_COLUMNS = ["rank", "candidate", "verdict", "runs", "mean change", "decisive cells", "drafter and output",
                   "note"]


def ranking_row(s: Standing) -> list[str]:
    """A standing as the ranking table shows it, the same in every output: the drafter's acceptance and the output
    realism beside every verdict, so a gain is read with what it was earned on."""
    cells = s.cells_text() + (f"; {s.gains_text()}" if s.gains else "")
    return ["-" if s.rank is None else str(s.rank), s.name, s.outcome, str(len(s.entrant.run_ids)),
            "-" if s.mean_change_pct is None or s.entrant.is_baseline else f"{s.mean_change_pct:+.1f}%",
            cells, evidence_words(s.entrant.evidence), s.entrant.note or ""]


def ranking_table(answer: Answer) -> Table:
    table = Table(RANKING_COLUMNS, title="candidates ranked against the baseline (mean change: geometric mean over "
                                         "the judged cells, each in its rule's better direction)")
    for s in answer.standings:
        table.add(ranking_row(s), "accepted" if s is answer.recommended else VERDICT_STYLE.get(s.outcome, ""))
    return table


@dataclass
class StudyReport(Renderable):
    """A study's answer: the question, the recommendation and why, the ranking, the method."""

    answer: Answer

    def blocks(self) -> list[Block]:
        a = self.answer
        blocks: list[Block] = [Text(f"study {a.study}", "heading")]
        if a.question:
            blocks.append(Text(f"Question: {a.question.strip()}"))
        blocks.append(Text(a.headline(), "accepted" if a.recommended is not None else "invalid"))
        blocks.append(Text("\n".join(f"- {line}" for line in a.why()), pre=True))
        blocks.append(ranking_table(a))
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


def answer_markdown(a: Answer, heading: str = "####") -> str:
    """The answer in Markdown: the same sentences and ranking as the terminal and the site."""
    lines = []
    if a.question:
        lines += [f"> {_md(a.question.strip())}", ""]
    lines += [f"{heading} {a.headline()}", ""] + [f"- {_md(line)}" for line in a.why()] + [""]
    lines += ["| " + " | ".join(RANKING_COLUMNS) + " |", "|" + "---|" * len(RANKING_COLUMNS)]
    for s in a.standings:
        row = ranking_row(s)
        row[1] = f"**{row[1]}**" if s is a.recommended else row[1]
        lines.append("| " + " | ".join(_md(v) for v in row) + " |")
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
