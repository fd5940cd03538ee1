"""Which runs a site history page follows: one configuration, never a bare name.

"baseline" is an entry of every study, so a page per name drew one study's baseline under another's link (an empty
chart where the newest runs were another study's, under another plan). A page follows a name under one plan, as
`servebook history` does: the runs of that name every study measured with those cells (a release gate's baseline
continues its qualification's), and its file name says the study that first measured it.
"""

from __future__ import annotations

import bisect

from .pages import page_slug
from .summary import RunSummary


def history_slug(study: str | None, label: str) -> str:
    """The page of `label` first measured by `study` (runs of no study keep the name alone)."""
    return f"{page_slug(study)}--{page_slug(label)}" if study else page_slug(label)


def history_pages(completed: list[RunSummary]) -> dict[tuple[str, str], tuple[str, list[RunSummary]]]:
    """(plan id, name) -> (the page's file name without .html, the completed, unarchived run summaries it follows,
    in the order given): the runs of that name under that plan, and those whose candidate id starts with the name
    (history() takes either)."""
    completed = [s for s in completed if not s.archived]  # no evidence of anything
    own: dict[tuple[str, str], list[int]] = {}
    for i, s in enumerate(completed):
        own.setdefault((s.plan_id or "", s.label), []).append(i)
    ids = sorted((s.candidate_id or "", i) for i, s in enumerate(completed))
    groups: dict[tuple[str, str], list[RunSummary]] = {}
    for (plan, label), mine in own.items():
        prefixed = ids[bisect.bisect_left(ids, (label, -1)):bisect.bisect_left(ids, (label + chr(0x10FFFF), -1))]
        same = {i for _, i in prefixed if (completed[i].plan_id or "") == plan}
        groups[(plan, label)] = [completed[i] for i in sorted(set(mine) | same)]
    slugs = {key: history_slug(min(runs, key=lambda s: s.run_id).study, key[1]) for key, runs in groups.items()}
    taken = [slug for slug in slugs.values()]
    # a study whose plan was edited measured one name under two plans: each page then names its plan too
    return {key: (slugs[key] + (f"--{key[0][:8]}" if taken.count(slugs[key]) > 1 else ""), runs)
            for key, runs in groups.items()}


def _evidence(group: list[RunSummary], plan_id: str | None) -> set[str]:
    """The runs a verdict of this candidate would judge now: sealed completed or failed, not archived, under the
    plan its verdict judged (judge's choice, so that the marker and the verdict agree)."""
    return {s.run_id for s in group if s.status in ("completed", "failed") and s.plan_id == plan_id
            and not s.archived}


def stale_verdicts(runs: list[RunSummary], baseline: str | None) -> dict[str, str]:
    """name -> why its recorded verdict is older than the journal the page is built from: the runs it judged (its
    own and the baseline's, the verdict's fingerprint) are not the runs a verdict would judge now. Such a page
    showed +7.3% over 3 runs where `judge` said -2.1% over 4; it must say which it shows."""
    groups: dict[str, list[RunSummary]] = {}
    for s in runs:
        groups.setdefault(s.label, []).append(s)
    out = {}
    for label, group in groups.items():
        judged = next((s for s in reversed(group) if s.verdicts), None)
        if judged is None:
            continue
        event = judged.verdicts[-1]
        mine, now = set(event.get("run_ids") or [judged.run_id]), _evidence(group, judged.plan_id)
        theirs = set(event.get("baseline_run_ids") or [])
        base_now = _evidence(groups.get(baseline or "", []), judged.plan_id) if theirs and baseline else theirs
        if mine != now or theirs != base_now:
            out[label] = (f"stale: this verdict judged {len(mine)} of its runs" + (f" and {len(theirs)} of the "
                          f"baseline's" if theirs else "") + f"; the journal holds {len(now)}"
                          + (f" and {len(base_now)}" if theirs else "") + " now (`servebook judge` gives the current "
                          "verdict, `--record` puts it here)")
    return out
