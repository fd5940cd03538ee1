"""Property: whatever a YAML file holds, loading it yields a model or one InputError, never a traceback.

Inputs are the shipped studies, candidates and plans with one to three mutations each (a value
replaced by one of another type or a hostile string, a key deleted, renamed or added, a value
wrapped in a list), and wholly generated trees. 1,200 examples in all, in a few seconds.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from servebook.config import Candidate, Plan
from servebook.config.errors import InputError
from servebook.config.loading import study_from_data, validate

DATA = Path(__file__).resolve().parents[3] / "data"
STUDIES = [yaml.safe_load(p.read_text()) for p in sorted((DATA / "studies").glob("*.yaml"))]
CANDIDATES = [yaml.safe_load(p.read_text()) for p in sorted((DATA / "candidates").glob("*.yaml"))]
CANDIDATES += [s["base"] for s in STUDIES]
PLANS = [s["plan"] for s in STUDIES]

HOSTILE = st.sampled_from(["", "../..", "a/b", "/etc/passwd", "..", "\x00", "ü" * 3, "-1", "1e309", "null",
                           "tiny:nope", "random:", "http://", "sk-" + "x" * 20, "knobs.chunk_size", "{", "[]"])
SCALARS = st.one_of(st.none(), st.booleans(), st.integers(-2**63, 2**63), st.floats(allow_nan=True),
                    st.text(max_size=12), HOSTILE)
TREES = st.recursive(SCALARS, lambda inner: st.one_of(st.lists(inner, max_size=4),
                                                       st.dictionaries(st.one_of(st.text(max_size=8), HOSTILE),
                                                                       inner, max_size=4)), max_leaves=12)


def paths_of(tree: Any, prefix: tuple = ()) -> list[tuple]:
    found = [prefix]
    if isinstance(tree, dict):
        for key, value in tree.items():
            found += paths_of(value, prefix + (key,))
    elif isinstance(tree, list):
        for i, value in enumerate(tree):
            found += paths_of(value, prefix + (i,))
    return found


@st.composite
def mutated(draw, seeds: list[dict]) -> Any:
    tree = copy.deepcopy(draw(st.sampled_from(seeds)))
    for _ in range(draw(st.integers(1, 3))):
        path = draw(st.sampled_from(paths_of(tree)))
        if not path:
            if draw(st.booleans()):
                tree = draw(TREES)
            continue
        parent = tree
        for step in path[:-1]:
            parent = parent[step]
        last = path[-1]
        action = draw(st.sampled_from(["replace", "delete", "rename", "add", "wrap"]))
        if action == "replace":
            parent[last] = draw(TREES)
        elif action == "delete":
            del parent[last]
        elif action == "rename" and isinstance(parent, dict):
            parent[str(last) + draw(st.sampled_from(["_", "s", "x"]))] = parent.pop(last)
        elif action == "add" and isinstance(parent[last], dict):
            parent[last][draw(st.one_of(st.text(max_size=8), HOSTILE))] = draw(TREES)
        elif action == "wrap":
            parent[last] = [parent[last]]
    return tree


def loads_or_refuses(load, data) -> None:
    try:
        load(data)
    except InputError:
        pass  # one message naming the field: what a user should see


FUZZ = settings(max_examples=400, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True)


@FUZZ
@given(st.one_of(mutated(STUDIES), TREES))
def test_studies_load_or_refuse_cleanly(data):
    loads_or_refuses(lambda d: study_from_data(d, "study.yaml"), data)


@FUZZ
@given(st.one_of(mutated(CANDIDATES), TREES))
def test_candidates_load_or_refuse_cleanly(data):
    loads_or_refuses(lambda d: validate(Candidate, d, "candidate.yaml"), data)


@FUZZ
@given(st.one_of(mutated(PLANS), TREES))
def test_plans_load_or_refuse_cleanly(data):
    loads_or_refuses(lambda d: validate(Plan, d, "plan.yaml"), data)
