"""What people say about a run after it was sealed: tags, notes, and archiving a bad run.

Kept beside the sealed run, never in it: each change is one event file under `runs/<run_id>/annotations/`,
appended and never rewritten (as verdict events are), so the manifest and the tables stay exactly as sealed, two
people annotating at once lose nothing, and the run's state is the events folded in order. An archived run stays in
the journal, listed and marked; verdicts, histories and comparisons leave it out and say why.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from ..util.errors import InputError
from ..util.files import atomic_write_bytes
from .events import event_names

ANNOTATIONS = "annotations"

Action = Literal["tag", "untag", "note", "archive", "unarchive"]


class AnnotationEvent(BaseModel):
    """One change to a run's annotations."""

    model_config = ConfigDict(extra="forbid")

    action: Action
    at: str
    #: the tag (tag, untag), the note's text (note), or why the run is archived or restored (archive, unarchive)
    text: str = Field(min_length=1)


@dataclass(frozen=True)
class Note:
    at: str
    text: str


@dataclass
class Annotations:
    """A run's annotations as of its newest event."""

    tags: list[str] = field(default_factory=list)
    notes: list[Note] = field(default_factory=list)
    #: why the run was archived (None: it is not)
    archived: str | None = None
    archived_at: str | None = None

    @property
    def empty(self) -> bool:
        return not (self.tags or self.notes or self.archived)

    def lines(self) -> list[str]:
        """For a reader: the archive first (it changes what the run counts for), then tags, then notes."""
        out = [f"archived {self.archived_at}: {self.archived} (left out of verdicts, histories and comparisons)"] \
            if self.archived else []
        if self.tags:
            out.append("tags: " + ", ".join(self.tags))
        out += [f"note {n.at}: {n.text}" for n in self.notes]
        return out


def fold(events: list[AnnotationEvent]) -> Annotations:
    state = Annotations()
    for event in events:
        if event.action == "tag" and event.text not in state.tags:
            state.tags.append(event.text)
        elif event.action == "untag" and event.text in state.tags:
            state.tags.remove(event.text)
        elif event.action == "note":
            state.notes.append(Note(event.at, event.text))
        elif event.action == "archive":
            state.archived, state.archived_at = event.text, event.at
        elif event.action == "unarchive":
            state.archived = state.archived_at = None
    return state


def read_annotations(run_dir: Path) -> Annotations:
    """The run's annotations; an event file that cannot be read is skipped (it was never whole: writes are
    atomic), so a stray file cannot hide a run."""
    folder = os.path.join(run_dir, ANNOTATIONS)
    events = []
    for name in event_names(folder):
        try:
            with open(os.path.join(folder, name), "rb") as file:
                events.append(AnnotationEvent.model_validate_json(file.read()))
        except (OSError, ValidationError):
            continue
    return fold(events)


#: letters, digits and a few marks: tags are matched exactly in filters, so no spaces or commas
def check_tag(tag: str) -> str:
    if not tag or not all(ch.isalnum() or ch in "_.-:+@=/" for ch in tag):
        raise InputError(f"tag {tag!r}: use letters, digits and _ . - : + @ = / (no spaces or commas), e.g. "
                         "warm-cache or pr-123")
    return tag


def append_annotation(run_dir: Path, action: Action, text: str) -> Path:
    """One event, in its own file (the time it was made, and a counter where two land in one microsecond)."""
    if not text.strip():
        raise InputError(f"{action}: give the text (an empty {'note' if action == 'note' else 'reason'} says nothing)")
    now = datetime.now(timezone.utc)
    event = AnnotationEvent(action=action, at=now.strftime("%Y-%m-%dT%H:%M:%SZ"), text=text.strip())
    folder = run_dir / ANNOTATIONS
    folder.mkdir(exist_ok=True)
    stamp = now.strftime("%Y%m%dT%H%M%S.%fZ")
    n = 0
    while (path := folder / f"{stamp}-{n:03d}.json").exists():  # names sort in the order the events were made
        n += 1
    atomic_write_bytes(path, json.dumps(event.model_dump(), indent=1).encode())
    return path
