"""The candidate: one fully resolved serving configuration, and its identity.

A candidate is what a study expands into and what a run measures. Its id is a short hash of
the canonical JSON of everything that changes what the engine does; cosmetic fields (its
display name, the port it happens to get, timeouts) are left out so that renaming a candidate
or moving it to another port does not make it a different experiment.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any, Callable, Literal
from urllib.parse import urlsplit

from pydantic import Field, SerializeAsAny, ValidationInfo, field_validator, model_validator

from .knobs import DRAFTERS_WITH_MODEL, Drafter, DrafterKind, Knobs, knobs_for
from .replicas import ReplicaKill, Router
from .secrets import SECRET_FLAGS, looks_secret
from .shown import ShownAsYaml
from .strict import StrictModel

__all__ = ["DRAFTERS_WITH_MODEL", "Candidate", "Drafter", "DrafterKind", "Knobs", "Launch", "ModelRef", "Pins"]


class ModelRef(StrictModel):
    """What the engine serves: a local file (or `tiny:NAME` for a built-in tiny model) or a hub id."""

    path: str | None = None
    id: str | None = None
    revision: str | None = Field(None, description="hub revision (commit) pinned for reproducibility")
    served_name: str | None = Field(None, description="name the API answers to; defaults per engine")

    @model_validator(mode="after")
    def _one_source(self) -> "ModelRef":
        if (self.path is None) == (self.id is None):
            raise ValueError("give exactly one of model.path (a local file or tiny:NAME) or model.id")
        return self

    @property
    def label(self) -> str:
        return self.path or f"{self.id}@{self.revision or 'unpinned'}"


class Resources(StrictModel):
    """What the candidate needs from the host, for preflight. Never changes anything on the host."""

    gpu_memory_gib: float | None = Field(None, gt=0, description="free memory needed on every selected GPU")
    power_limit_w: float | None = Field(None, gt=0, description="the power limit the figures assume (warned on)")
    disk_gib: float | None = Field(None, gt=0, description="free disk needed where the model and caches live")


class Launch(StrictModel):
    """How the engine is brought up. Only `mode` and `simulator` belong to the candidate's identity."""

    mode: Literal["local", "compose", "attach"] = "local"
    host: str = "127.0.0.1"
    port: int | None = Field(None, ge=1, le=65535, description="None picks a free port")
    ready_timeout_s: float = Field(180.0, gt=0)
    env: dict[str, str] = Field(default_factory=dict)
    url: str | None = Field(None, description="attach: the base URL of a server already running")
    command: list[str] | None = Field(
        None, description="openai engine: launch template, with {host}, {port} and {model} placeholders")
    image: str | None = Field(None, description="compose: container image (pinned by pins.image_digest)")
    gpus: list[int] | None = Field(None, description="GPU indices to use; replicas take consecutive groups")
    cpus: list[int] | None = Field(
        None, min_length=1, description="local: CPUs every thread of the engine is held to once it serves (its start "
                                        "uses all); recorded in the run, not part of the identity")
    replicas: int = Field(1, ge=1, le=64, description="independent engine replicas (local: one port each; compose: "
                                                      "one service each); load and scrapes go to every one")
    router: Router | None = Field(None, description="a router servebook starts in front of the replicas and measures "
                                                    "through; without one servebook spreads the load itself")
    kill_replica: ReplicaKill | None = Field(None, description="local: a fault plan that kills one replica mid-plan")
    volumes: list[str] = Field(default_factory=list, description="compose: host:container volume mounts")
    compile_cache: str | None = Field(None, description="compose: host directory; each replica gets its own subfolder")
    resources: Resources = Resources()
    api_key_env: str | None = Field(
        None, pattern=r"^[A-Za-z_][A-Za-z0-9_]*$",
        description="the environment variable that holds the API key: passed to the engine's --api-key when "
                    "servebook launches it, sent with every request and /metrics scrape; only the name is recorded")
    simulator: bool = Field(False, description="run servebook's simulator in place of the engine (tests only)")
    sim_faults: list[str] = Field(default_factory=list, description="simulator faults to inject")

    @model_validator(mode="after")
    def _no_secrets(self) -> "Launch":
        secret = [k for k in self.env if looks_secret(k)]
        if secret:
            raise ValueError(
                f"launch.env: {', '.join(secret)} look like secrets; candidates are recorded in the journal, "
                "so export secrets in servebook's own environment instead (the engine inherits it)"
            )
        return self

    @model_validator(mode="after")
    def _mode_fields(self) -> "Launch":
        if self.mode == "attach" and not self.url:
            raise ValueError("launch.url: attach mode needs the URL of the running server")
        if self.mode != "attach" and self.url:
            raise ValueError("launch.url is only for mode: attach")
        if self.url:
            parts = urlsplit(self.url)
            if parts.scheme not in ("http", "https") or not parts.hostname:
                raise ValueError(f"launch.url {self.url!r}: not an http(s) URL; write it whole, "
                                 "e.g. http://127.0.0.1:8080")
            try:
                _ = parts.port  # urlsplit checks the port only when it is read
            except ValueError:
                raise ValueError(f"launch.url {self.url!r}: the port is not a number between 1 and 65535") from None
        if self.mode == "compose" and not self.image:
            raise ValueError("launch.image: compose mode needs a container image")
        if self.mode != "compose" and (self.image or self.volumes or self.compile_cache):
            raise ValueError("launch.image/volumes/compile_cache are only for mode: compose")
        _check_replicas(self)
        if self.sim_faults and not self.simulator:
            raise ValueError("launch.sim_faults needs launch.simulator: true")
        if self.cpus is not None and self.mode != "local":
            raise ValueError("launch.cpus: only for mode: local (servebook pins the engine it starts)")
        if self.host != "127.0.0.1" and self.mode == "local":
            raise ValueError("launch.host: local engines listen on 127.0.0.1 only")
        return self


def _check_replicas(launch: Launch) -> None:
    """Replicas are launched ones: an attached server is one endpoint; a fault needs a replica of its own to kill."""
    if launch.mode == "attach" and (launch.replicas != 1 or launch.router or launch.kill_replica):
        raise ValueError("launch.replicas/router/kill_replica: not for mode: attach (attach the router's URL instead)")
    if launch.kill_replica is not None:
        if launch.mode != "local":
            raise ValueError("launch.kill_replica: only for mode: local (servebook kills a process it started)")
        if launch.kill_replica.replica >= launch.replicas:
            raise ValueError(f"launch.kill_replica.replica: {launch.kill_replica.replica} is not one of the "
                             f"{launch.replicas} replica(s) (0 is the first)")
    if launch.cpus is not None and launch.replicas != 1:
        raise ValueError("launch.cpus: pins one engine; with launch.replicas, leave it unset")
    if launch.port is not None and launch.port + launch.replicas - 1 > 65535:
        # replicas take consecutive ports from launch.port (launch.replicas): the last must still be a port
        raise ValueError(f"launch.port: {launch.port} with {launch.replicas} replicas would give replica "
                         f"{launch.replicas - 1} port {launch.port + launch.replicas - 1}, above 65535; "
                         f"set a port of at most {65536 - launch.replicas}, or none (free ports are picked)")


class Pins(StrictModel):
    engine_version: str | None = None
    image_digest: str | None = None

    @field_validator("engine_version", mode="before", json_schema_input_type=str | int | float | None)
    @classmethod
    def _version_as_written(cls, value: Any) -> Any:
        # YAML (and --set) read 1.10 as the number 1.1: a version is text, taken as the user wrote it where possible
        return str(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else value


#: launch fields that change what the engine does (port, host, timeouts and resources stay out)
IDENTITY_LAUNCH_FIELDS = ("env", "image", "gpus", "replicas", "volumes", "compile_cache", "router", "kill_replica")

#: engine kind -> the engine's own check of a candidate (raises ValueError naming the field).
#: Each adapter in servebook.engines registers itself here, so the engines own their facts while
#: config stays below them; `import servebook` registers every built-in engine.
ENGINE_CHECKS: dict[str, Callable[["Candidate"], None]] = {}


class Candidate(ShownAsYaml, StrictModel):
    name: str | None = Field(None, description="display label; not part of the identity")
    engine: str = Field("llamacpp", description="an engine kind registered by servebook.engines")
    model: ModelRef
    # The engine's own knob model, chosen by `engine` (declared before it, so validated first): serialised as that
    # model, not as the shared base, so a llama.cpp candidate's gpu_layers is dumped, hashed and recorded.
    knobs: SerializeAsAny[Knobs] = Field(default_factory=Knobs, validate_default=True)
    extra_args: list[str] = Field(default_factory=list, description="engine flags servebook does not model")
    request_extras: dict[str, Any] = Field(
        default_factory=dict,
        description="fields added to every request body (e.g. {ignore_eos: true} for a server servebook does not know)")
    launch: Launch = Launch()
    pins: Pins = Pins()

    @field_validator("knobs", mode="before")
    @classmethod
    def _engine_knobs(cls, value: Any, info: ValidationInfo) -> Any:
        return knobs_for(info.data.get("engine"), value)

    @model_validator(mode="after")
    def _no_literal_secrets(self) -> "Candidate":
        for where, args in (("extra_args", self.extra_args), ("launch.command", self.launch.command or [])):
            for arg in args:
                if arg.split("=", 1)[0] in SECRET_FLAGS:
                    raise ValueError(f"{where}: {arg.split('=', 1)[0]} takes a secret, and candidates are recorded in "
                                     "the journal; export the key and name the variable in launch.api_key_env")
        secret = [k for k in self.request_extras if looks_secret(k)]
        if secret:
            raise ValueError(f"request_extras: {', '.join(secret)} look like secrets; use launch.api_key_env")
        return self

    @model_validator(mode="after")
    def _engine_accepts(self) -> "Candidate":
        check = ENGINE_CHECKS.get(self.engine)
        if check is None:
            known = ", ".join(sorted(ENGINE_CHECKS)) or "none registered (import servebook.engines)"
            raise ValueError(f"engine {self.engine!r} is not known; known engines: {known}")
        check(self)
        return self

    def identity(self) -> dict:
        # Unset optional fields are left out, so adding one to the model later keeps every id stable.
        data = self.model_dump(mode="json", exclude={"name", "launch"}, exclude_none=True)
        if not data.get("request_extras"):
            data.pop("request_extras", None)
        data["launch_mode"] = self.launch.mode
        # What the engine process sees beyond its flags changes what it does (environment, image, GPUs,
        # replicas, mounts, compile cache); only values that differ from the defaults enter, so
        # candidates recorded before these were part of the identity keep their ids.
        placement = self.launch.model_dump(mode="json", include=set(IDENTITY_LAUNCH_FIELDS), exclude_defaults=True)
        if "router" in placement:
            placement["router"].pop("ready_timeout_s", None)  # how long servebook waits, not what the router does
        if placement:
            data["launch"] = placement
        if self.launch.api_key_env:
            data["auth"] = True  # whether a key is used, never which
        if self.launch.simulator:
            # A simulated run must never pass for a measurement of the real engine.
            data["simulator"] = {"faults": sorted(self.launch.sim_faults)}
        return data

    def canonical_json(self) -> str:
        return json.dumps(self.identity(), sort_keys=True, separators=(",", ":"))

    @property
    def id(self) -> str:
        return hashlib.sha256(self.canonical_json().encode()).hexdigest()[:12]

    @property
    def label(self) -> str:
        return self.name or f"{self.engine}-{self.id[:8]}"

    def heading(self) -> str:
        return f"candidate {self.label} (id {self.id}, {self.engine})"

    def with_overrides(self, overrides: dict) -> "Candidate":
        """A copy with dotted-path overrides applied, validated like a fresh file."""
        return Candidate.model_validate(set_dotted(self.model_dump(mode="json", exclude_unset=False), overrides))


def set_dotted(data: dict, overrides: dict[str, Any]) -> dict:
    """A deep copy of `data` with each dotted path (knobs.chunk_size) set to its value, parents made as needed."""
    import copy

    data = copy.deepcopy(data)
    for dotted, value in overrides.items():
        target = data
        *parents, leaf = dotted.split(".")
        for key in parents:
            if not isinstance(target.get(key), dict):
                target[key] = {} if target.get(key) is None else target[key]
            target = target[key]
        target[leaf] = value
    return data
