"""Knobs: the settings a qualification varies, one model per engine, chosen by the candidate's `engine`.

config holds only the knobs every engine shares in servebook's vocabulary (chunk, slots, context, KV dtype,
tensor parallelism, a drafter); each engine module subclasses them with its own fields, its own checks and
its own words, and registers the model here (`register_knobs`), as it registers its candidate check. A field no
engine has, or another engine's, is refused by the engine's model itself: `knobs.gpu_layers` on a vLLM candidate
is answered in vLLM's words, not by a hand-written refusal in an adapter. config stays below engines: the
registry is filled when `servebook.engines` is imported.
"""

from __future__ import annotations

from typing import Any, ClassVar, Literal, get_args

from pydantic import BaseModel, Field, GetJsonSchemaHandler, model_validator
from pydantic.json_schema import JsonSchemaValue

from ..util.suggest import close_names
from .strict import StrictModel

DrafterKind = Literal["none", "draft_model", "eagle", "eagle3", "mtp", "dflash", "ngram"]
DRAFTERS_WITH_MODEL = {"draft_model", "eagle", "eagle3", "dflash"}


class EngineOwned(StrictModel):
    """A settings model an engine may extend: fields it does not know are refused in its own words.

    A foreign field set to null is dropped: that is how a recorded candidate of an earlier servebook (one model for
    every engine's knobs) wrote the knobs it left unset, and null means "the engine's default" anyway.
    """


    #: the engine's name in messages ("llama.cpp"); the base speaks for no engine
    engine_title: ClassVar[str] = "this engine"
    #: where the model sits in a candidate, for messages ("knobs", "knobs.drafter")
    where: ClassVar[str] = "knobs"
    #: field -> the engine's own words for why it has no such field (others get a sentence built from the registry)
    refusals: ClassVar[dict[str, str]] = {}

    @model_validator(mode="before")
    @classmethod
    def _refuse_foreign(cls, data: Any) -> Any:
        if not isinstance(data, dict):
            return data
        kept = {}
        for key, value in data.items():
            if key in cls.model_fields:
                kept[key] = value
            elif value is None and _owners(cls, key):
                continue
            else:
                raise ValueError(cls.refusal(str(key)))
        return kept

    @classmethod
    def refusal(cls, key: str) -> str:
        """Why this engine refuses `key`: its own words, whose setting it is, or the close names of its own."""
        if key in cls.refusals:
            return cls.refusals[key]
        owners = _owners(cls, key)
        if owners:
            return (f"{cls.where}.{key} is a {' and '.join(owners)} setting; {cls.engine_title} has no such knob: "
                    "leave it unset")
        close = close_names(key, cls.model_fields)
        meant = f"did you mean {' or '.join(repr(c) for c in close)}? " if close else ""
        return (f"{cls.where}.{key}: unknown field ({meant}{cls.engine_title} takes {', '.join(cls.model_fields)}; "
                "extra fields are not ignored)")


def _owners(model: type[EngineOwned], key: str) -> list[str]:
    """The engines whose model at the same place has `key` (their titles, sorted)."""
    found = set()
    for knobs in KNOB_MODELS.values():
        at: Any = knobs if model.where == "knobs" else _nested(knobs, model.where.removeprefix("knobs."))
        if isinstance(at, type) and issubclass(at, EngineOwned) and key in at.model_fields:
            found.add(knobs.engine_title)
    return sorted(found - {model.engine_title})


def _nested(knobs: type["Knobs"], name: str) -> Any:
    """The settings model of a knob that is one (knobs.drafter, knobs.reasoning), unwrapped from `X | None`."""
    field = knobs.model_fields.get(name)
    annotation = field.annotation if field is not None else None
    return next((a for a in get_args(annotation) if isinstance(a, type) and issubclass(a, EngineOwned)), annotation)


class Drafter(EngineOwned):
    """Speculative decoding: which drafter, and how far it may look ahead (engines add their own settings)."""

    where: ClassVar[str] = "knobs.drafter"

    kind: DrafterKind = "none"
    model: str | None = Field(None, description="draft model path (or tiny:NAME)")
    max_draft_tokens: int | None = Field(None, ge=1, le=64, description="tokens drafted per step")

    @model_validator(mode="after")
    def _consistent(self) -> "Drafter":
        if self.kind in DRAFTERS_WITH_MODEL and not self.model:
            raise ValueError(f"drafter.kind={self.kind} needs drafter.model (a draft model path)")
        if self.kind not in DRAFTERS_WITH_MODEL and self.model:
            raise ValueError(f"drafter.model is only meaningful for kinds {sorted(DRAFTERS_WITH_MODEL)}, not {self.kind}")
        if self.kind == "none" and self.max_draft_tokens:
            raise ValueError("drafter.kind=none takes no other drafter settings")
        return self

    @property
    def acceptance_source(self) -> str | None:
        """Where the drafter's acceptance comes from: "engine" (earned on the output), "synthetic" (set by a
        benchmarking setting an engine adds, llama.cpp's synthetic_*), None without a drafter."""
        if self.kind == "none":
            return None
        synthetic = getattr(self, "synthetic_length", None) or getattr(self, "synthetic_rates", None)
        return "synthetic" if synthetic else "engine"


ReasoningMode = Literal["on", "off"]
#: the levels the engines' request fields and flags take (vLLM's reasoning_effort, llama.cpp's --reasoning-effort);
#: "none" is left out on purpose: no reasoning is `mode: off`, one setting with one meaning on every engine
ReasoningEffort = Literal["minimal", "low", "medium", "high", "xhigh", "max"]


class Reasoning(EngineOwned):
    """A reasoning (thinking) model: whether it thinks before answering, how hard, and how the engine tells its
    reasoning from its answer (engines add their own settings: the parser or format, a budget). Unset fields leave
    the engine and the model's chat template at their defaults. Only chat requests carry reasoning: the engines
    apply their parsers and templates to chat, never to a completion of a token prompt."""

    where: ClassVar[str] = "knobs.reasoning"

    mode: ReasoningMode | None = Field(None, description="on: the model thinks before it answers; off: it answers at "
                                                         "once (the chat template's enable_thinking)")
    effort: ReasoningEffort | None = Field(None, description="how hard the model thinks (reasoning_effort)")

    @model_validator(mode="before")
    @classmethod
    def _shorthand(cls, data: Any) -> Any:
        # `reasoning: on` in YAML is the boolean true (YAML 1.1), and so is `mode: on`; `reasoning: high` is an effort
        if isinstance(data, str) and data in get_args(ReasoningEffort):
            data = {"mode": "on", "effort": data}
        elif isinstance(data, (bool, str)):
            data = {"mode": data}
        if isinstance(data, dict) and isinstance(data.get("mode"), bool):
            data = {**data, "mode": "on" if data["mode"] else "off"}
        return data

    @classmethod
    def __get_pydantic_json_schema__(cls, core_schema: Any, handler: GetJsonSchemaHandler) -> JsonSchemaValue:
        """The JSON Schema (config.schemas) accepts what `_shorthand` reads: `reasoning: on`, `reasoning: high`, and
        the booleans YAML 1.1 makes of on and off (PyYAML reads `mode: on` as true)."""
        schema = handler(core_schema)
        mode = schema["properties"]["mode"]
        mode["anyOf"] = [*mode["anyOf"], {"type": "boolean"}]
        shorthand = {"enum": [*get_args(ReasoningMode), *get_args(ReasoningEffort)]}
        return {"anyOf": [schema, {"type": "boolean"}, shorthand]}

    @model_validator(mode="after")
    def _coherent(self) -> "Reasoning":
        if self.mode == "off" and self.effort is not None:
            raise ValueError(f"{self.where}.effort: with mode off the model does not reason; leave effort unset")
        return self


class Knobs(EngineOwned):
    """The settings every engine shares. None means: the engine's own default. Engines subclass this."""

    #: the KV cache dtypes the engine accepts, where it checks them itself (the JSON Schema offers them)
    kv_types: ClassVar[tuple[str, ...]] = ()

    chunk_size: int | None = Field(None, ge=16, description="prefill chunk (tokens per prompt batch)")
    max_running_requests: int | None = Field(None, ge=1, description="concurrent sequences (slots)")
    drafter: Drafter = Drafter()
    kv_dtype: str | None = Field(None, description="KV cache element type, engine-specific names")
    context_length: int | None = Field(None, ge=256)
    tensor_parallel_size: int = Field(1, ge=1, le=64)
    #: None (the default) leaves reasoning to the engine and the model, and keeps every earlier candidate's id
    reasoning: Reasoning | None = None

    @classmethod
    def __get_pydantic_json_schema__(cls, core_schema: Any, handler: GetJsonSchemaHandler) -> JsonSchemaValue:
        """The JSON Schema (config.schemas) offers the engine's own KV dtypes, which its model checks."""
        schema = handler(core_schema)
        if cls.kv_types:
            schema["properties"]["kv_dtype"]["anyOf"][0] = {"enum": list(cls.kv_types), "type": "string"}
        return schema


#: engine kind -> its knob model; each engine module registers its own (config stays below the engines)
KNOB_MODELS: dict[str, type[Knobs]] = {}


def register_knobs(kind: str, model: type[Knobs]) -> type[Knobs]:
    KNOB_MODELS[kind] = model
    return model


def knobs_model(engine: str | None) -> type[Knobs]:
    """The knob model of `engine`; the shared base for an engine not (yet) registered, which the candidate refuses
    by name on its own."""
    return KNOB_MODELS.get(engine or "", Knobs)


def knobs_for(engine: str | None, value: Any) -> Any:
    """`value` (a mapping, or knobs of any engine) validated as `engine`'s knobs: the candidate's discriminator."""
    model = knobs_model(engine)
    if isinstance(value, model):
        return value
    if isinstance(value, BaseModel):
        value = value.model_dump(exclude_unset=True)
    return model.model_validate(value if value is not None else {})
