"""Readable reprs for every public object a notebook user looks at (issue 19, item 7): candidates, plans and studies
as the YAML a user writes, judge results as one table of verdicts, not a screen of nested objects."""

from IPython.lib.pretty import pretty

import servebook as sb
from servebook.journal.synthetic import write_synthetic_run


def test_candidates_plans_and_studies_show_as_yaml():
    candidate = sb.load_candidate("data/candidates/tiny-llamacpp.yaml")
    shown = pretty(candidate)
    assert shown.startswith(f"candidate {candidate.label} (id {candidate.id}, llamacpp)\n")
    assert "knobs:\n" in shown and len(shown.splitlines()) > 3  # not one long line
    assert "<pre>" in candidate._repr_html_()
    plan = sb.load_plan("data/plans/quick.yaml")
    assert pretty(plan).startswith(f"plan {plan.name} (id {plan.id})") and "decode:" in pretty(plan)
    study = sb.load_study("data/studies/tiny-demo.yaml")
    assert pretty(study).startswith("study tiny-demo: ") and "variants:" in pretty(study)


def test_judge_results_are_one_table_of_verdicts(tmp_path):
    study = sb.load_study("data/studies/tiny-demo.yaml")
    journal = sb.Journal(tmp_path)
    write_synthetic_run(journal, index=1, requests=0)
    judged = sb.judge(study, journal, append=False)
    text = str(judged)
    assert "verdicts" in text and "not run" in text and "Judged(" not in text
    assert "<table" in judged._repr_mimebundle_()["text/html"]
    assert [item.entry.name for item in judged] == [entry.name for entry in study.expand()]  # still a list
