"""Several replicas of one engine measured as one endpoint: the router in front of them and the faults planted in them.

Which router and which policy decide where every request goes, so both are part of the candidate's identity; the
router's port is not (it is picked free at launch, like the engines').
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, field_validator

from .strict import StrictModel

#: routers servebook starts and measures through: maintained Rust routers installed from PyPI
#: (`pip install sglang-router`, or vLLM's fork `vllm-router`); both take the same command line
RouterKind = Literal["sglang-router", "vllm-router"]
#: `manual` pins every request that carries a routing key to the replica its key was first sent to (sglang-router's
#: sticky sessions; requests without a key are placed at random)
RouterPolicy = Literal["round_robin", "cache_aware", "random", "power_of_two", "manual"]
#: the router flags servebook sets itself (launch.replicas.router_argv) and what to write instead; given again in
#: router.args they would be parsed last and move the router off the port servebook measures through
ROUTER_FLAGS_SET = {"--host": "the router listens on 127.0.0.1", "--port": "its port is picked free",
                    "--worker-urls": "they are the replicas'", "--policy": "set router.policy",
                    "--prometheus-host": "its exporter listens on 127.0.0.1",
                    "--prometheus-port": "its exporter's port is picked free"}


class Router(StrictModel):
    """A real router started in front of the replicas; every measured request goes through it."""

    # Both required, so the identity names them whatever the defaults become.
    kind: RouterKind
    policy: RouterPolicy = Field(..., description="how the router picks a replica for each request "
                                                            "(cache_aware keeps shared prefixes on one replica)")
    args: list[str] = Field(default_factory=list, description="router flags servebook does not model")
    session_header: str | None = Field(
        None, pattern=r"^[A-Za-z0-9][A-Za-z0-9-]*$",
        description="the header every turn of a conversation carries its session's key in (a sub-agent's turns "
                    "their parent's), for a router that keeps a key on one replica: sglang-router reads "
                    "x-smg-routing-key under policy manual; requests outside conversations carry none")
    ready_timeout_s: float = Field(60.0, gt=0)

    @field_validator("args")
    @classmethod
    def _not_servebooks_own(cls, args: list[str]) -> list[str]:
        for arg in args:
            flag = arg.split("=", 1)[0]
            if flag in ROUTER_FLAGS_SET:
                raise ValueError(f"{flag} is set by servebook ({ROUTER_FLAGS_SET[flag]}); remove it from router.args")
        return args


class ReplicaKill(StrictModel):
    """A fault plan: replica `replica` is killed (SIGKILL, its whole process group) `after_s` seconds after every
    replica answered, so that it dies mid-plan; the run records which replica died, when, and what was lost."""

    replica: int = Field(..., ge=0, description="index of the replica to kill (0 is the first)")
    after_s: float = Field(..., gt=0, description="seconds after the replicas became ready")
