"""JSON Schemas of the files a user writes (a candidate, a plan, a study), generated from the pydantic models, so an
editor completes and checks them as the loaders do.

`model_json_schema()` says most of it: every field, its type, bounds and description, and `additionalProperties:
false` wherever the model forbids extra fields, so a misspelled field is refused in the editor as `load_candidate`
refuses it. What the models decide at validation time is written out here:

- `engine` is one of the registered engines, and `knobs` is that engine's own knob model (config.knobs: each
  engine registers its own), chosen by `if`/`then` on `engine` (absent: the default engine's);
- a study's dotted overrides (`axes.grid`, `axes.zip`, `variants[].set`, `search.space`) name fields of a
  candidate of the base's engine, as loading checks them before anything is expanded (config.loading), and the
  search's `screen.plan` overrides name fields of a plan.

What a schema cannot say, the loaders still check: rules that tie fields together (a drafter that needs a model,
a rule that selects cells the plan never measures) and each engine's own checks; `servebook sweep FILE --dry-run`
reports them. One difference is deliberate: a knob of another engine set to null, which the loaders drop (recorded
candidates of an earlier servebook wrote them), is refused by the schema; a user's file has no reason to write one.

The shipped copies (lib/servebook/data/schemas/, package data) are written by `scripts/write_reference.py` and
compared with freshly generated ones by tests/unit/test_schemas.py.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any, get_args, get_origin

from pydantic import BaseModel
from pydantic.json_schema import models_json_schema

from ..util.resources import shipped
from .candidate import Candidate
from .knobs import KNOB_MODELS, Knobs
from .plan import Plan
from .study import Study

DIALECT = "https://json-schema.org/draft/2020-12/schema"
#: file kind -> (its root model, what the file is), in the order they are written
KINDS: dict[str, tuple[type[BaseModel], str]] = {
    "candidate": (Candidate, "one serving configuration (servebook run FILE; a study's base)"),
    "plan": (Plan, "what a run measures (servebook run --plan FILE)"),
    "study": (Study, "a base candidate, variants, a plan and verdict rules (servebook sweep FILE)"),
}
FOLDER = "schemas"
#: what regenerates the shipped schemas and the CLI reference, as the tests' failures say it
REGENERATE = "python scripts/write_reference.py"


def file_name(kind: str) -> str:
    return f"{kind}.schema.json"


def input_schemas(knob_models: Mapping[str, type[Knobs]] | None = None) -> dict[str, dict[str, Any]]:
    """kind -> its JSON Schema, for the engines of `knob_models` (default: the registry, filled by importing
    servebook.engines)."""
    knobs = dict(sorted((knob_models if knob_models is not None else KNOB_MODELS).items()))
    if not knobs:
        raise RuntimeError("no engine has registered its knobs: import servebook.engines first")
    return {kind: _schema(kind, model, about, knobs) for kind, (model, about) in KINDS.items()}


def schema_texts(knob_models: Mapping[str, type[Knobs]] | None = None) -> dict[str, str]:
    """file name -> the schema as written: two-space JSON, one final newline (diffs stay readable)."""
    return {file_name(kind): json.dumps(schema, indent=2, ensure_ascii=False) + "\n"
            for kind, schema in input_schemas(knob_models).items()}


def write_schemas(folder: Path, knob_models: Mapping[str, type[Knobs]] | None = None) -> list[Path]:
    folder.mkdir(parents=True, exist_ok=True)
    written = []
    for name, text in schema_texts(knob_models).items():
        (folder / name).write_text(text, encoding="utf-8")
        written.append(folder / name)
    return written


def shipped_schema(kind: str) -> dict[str, Any]:
    """The schema the package ships for `kind` (candidate, plan, study)."""
    return json.loads(shipped(FOLDER, file_name(kind)).read_text(encoding="utf-8"))


def _schema(kind: str, model: type[BaseModel], about: str, knobs: dict[str, type[Knobs]]) -> dict[str, Any]:
    # Every engine's knob model beside the root, so that their definitions share one $defs with it
    models: list[type[BaseModel]] = [model, *(knobs.values() if model is not Plan else [])]
    _, top = models_json_schema([(m, "validation") for m in models], ref_template="#/$defs/{model}")
    defs: dict[str, Any] = top["$defs"]
    names: dict[type[BaseModel], str] = {}
    wanted: list[type[BaseModel]] = [model, Candidate, Plan, *knobs.values()]
    for each in wanted:
        if (name := _def_name(defs, each)) is not None:
            names[each] = name
    if Candidate in names:
        _engine_knobs(defs[names[Candidate]], {engine: names[m] for engine, m in knobs.items()})
    if model is Study:
        _override_paths(defs, names, knobs)
    root = names[model]
    schema = {"$schema": DIALECT, "title": f"servebook {kind}",
              "description": f"A servebook {kind}: {about}. Generated from servebook's models by {REGENERATE}; "
                             "do not edit.",
              "$ref": f"#/$defs/{root}", "$defs": defs}
    _prune(schema)
    return schema


def _def_name(defs: dict[str, Any], model: type[BaseModel]) -> str | None:
    """The $defs key pydantic gave `model`: its class name, or its qualified name where two classes share one."""
    return next((key for key in defs if key == model.__name__ or key.endswith(f"__{model.__name__}")), None)


def _engine_knobs(candidate: dict[str, Any], knob_defs: dict[str, str]) -> None:
    """`engine`: one of the registered engines; `knobs`: the chosen engine's own model."""
    default = Candidate.model_fields["engine"].default
    engine = candidate["properties"]["engine"]
    engine.pop("type", None)
    engine["enum"] = list(knob_defs)
    knobs = candidate["properties"]["knobs"]
    candidate["properties"]["knobs"] = {"title": knobs.get("title", "Knobs"), "type": "object",
                                        "description": "the engine's own knobs, chosen by engine"}
    candidate["allOf"] = [{"if": _is_engine(name, default), "then": {"properties": {"knobs": {"$ref": f"#/$defs/{ref}"}}}}
                          for name, ref in knob_defs.items()]


def _is_engine(name: str, default: str) -> dict[str, Any]:
    """A condition on a candidate's engine; the default engine's holds where none is written."""
    condition: dict[str, Any] = {"properties": {"engine": {"const": name}}}
    return condition if name == default else {**condition, "required": ["engine"]}


def _override_paths(defs: dict[str, Any], names: dict[type[BaseModel], str], knobs: dict[str, type[Knobs]]) -> None:
    """A study's dotted overrides name fields of a candidate of the base's engine; the screening plan's, a plan's."""
    default = Candidate.model_fields["engine"].default
    study = defs[names[Study]]
    rules = []
    for engine, model in knobs.items():
        key = f"OverridePath_{engine}"
        defs[key] = _names_schema(*dotted_fields(Candidate, {"knobs": model}),
                                  about=f"a dotted field of a {engine} candidate (knobs.chunk_size)")
        names_ref = {"propertyNames": {"$ref": f"#/$defs/{key}"}}
        rules.append({"if": {"properties": {"base": _is_engine(engine, default)}},
                      "then": {"properties": {
                          "axes": {"properties": {"grid": names_ref, "zip": names_ref}},
                          "variants": {"items": {"properties": {"set": names_ref}}},
                          "search": {"properties": {"space": names_ref}}}}})
    study["allOf"] = [*study.get("allOf", []), *rules]
    screening = next((key for key in defs if key == "Screening"), None)
    if screening is not None:
        defs["OverridePath_plan"] = _names_schema(*dotted_fields(Plan), about="a dotted field of a plan")
        defs[screening]["properties"]["plan"]["propertyNames"] = {"$ref": "#/$defs/OverridePath_plan"}


def dotted_fields(model: type[BaseModel], replace: Mapping[str, type[BaseModel]] | None = None,
                  prefix: str = "") -> tuple[list[str], list[str]]:
    """(every dotted field of `model`, the mapping fields among them, under which any key is a field too), walking
    into nested models as config.loading walks an override's path; `replace`: a field's model at the top, as the
    candidate's `knobs` is the engine's own."""
    paths: list[str] = []
    mappings: list[str] = []
    for name, field in model.model_fields.items():
        path = prefix + name
        paths.append(path)
        nested = (replace or {}).get(name) or _model_in(field.annotation)
        if nested is not None:
            more, open_ = dotted_fields(nested, None, path + ".")
            paths += more
            mappings += open_
        elif _is_mapping(field.annotation):
            mappings.append(path)
    return paths, mappings


def _model_in(annotation: Any) -> type[BaseModel] | None:
    """The model an override's path walks into at this field, as config.loading finds it."""
    return next((a for a in (get_args(annotation) or (annotation,)) if isinstance(a, type) and issubclass(a, BaseModel)),
                None)


def _is_mapping(annotation: Any) -> bool:
    """A mapping field (launch.env, request_extras): an override may set any key of it."""
    return any(get_origin(a) is dict or a is dict for a in (annotation, *get_args(annotation)))


def _names_schema(paths: list[str], mappings: list[str], about: str) -> dict[str, Any]:
    schema: dict[str, Any] = {"description": about, "anyOf": [{"enum": paths}]}
    if mappings:
        schema["anyOf"].append({"pattern": "^(" + "|".join(p.replace(".", "\\.") for p in mappings) + ")\\."})
    return schema


def _prune(schema: dict[str, Any]) -> None:
    """Drop the definitions nothing refers to any more (the shared base knobs the engines' models replaced)."""
    defs = schema["$defs"]
    used: set[str] = set()
    todo = [schema]
    while todo:
        for ref in _refs({k: v for k, v in todo.pop().items() if k != "$defs"}):
            name = ref.removeprefix("#/$defs/")
            if name not in used:
                used.add(name)
                todo.append(defs[name])
    schema["$defs"] = {name: defs[name] for name in sorted(used)}


def _refs(node: Any) -> Iterator[str]:
    if isinstance(node, dict):
        if isinstance(node.get("$ref"), str):
            yield node["$ref"]
        for value in node.values():
            yield from _refs(value)
    elif isinstance(node, list):
        for value in node:
            yield from _refs(value)
