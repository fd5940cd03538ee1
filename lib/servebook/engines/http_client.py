"""servebook's one HTTP client for an engine's own endpoints, and the one place engine errors are translated.

Everything servebook asks an engine outside the measured requests goes through `EngineClient`: readiness,
the self-report and server info, the tokenizer probe. Its transport is injectable, as httpx's is, so tests
answer for an engine with `httpx.MockTransport` instead of starting one. `engine_error` maps what a transport
or an engine's API raised mid-run into servebook's own error types (the type and cause decide, the message
explains); callers catch `TRANSPORT_ERRORS` and hand the exception over instead of each deciding on its own.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import httpx
import openai

from ..util.errors import EngineFailed, InputError

#: what a request to an engine raises when the connection, the engine or its answer fails
TRANSPORT_ERRORS: tuple[type[BaseException], ...] = (OSError, httpx.HTTPError, openai.OpenAIError)


class EngineClient:
    """The engine at `base_url`, asked with `headers` (its API key) through `transport` (None: the network)."""

    def __init__(self, base_url: str, headers: Mapping[str, str] | None = None, *, timeout_s: float = 5.0,
                 transport: httpx.BaseTransport | None = None):
        self.base_url = base_url.rstrip("/")
        self.headers = dict(headers or {})
        self.timeout_s = timeout_s
        self.transport = transport

    def _client(self, timeout_s: float | None) -> httpx.Client:
        return httpx.Client(timeout=timeout_s or self.timeout_s, headers=self.headers, transport=self.transport)

    def get(self, path: str, timeout_s: float | None = None) -> httpx.Response | None:
        """The engine's answer to GET `path`; None when nothing answered (refused, reset, timed out)."""
        with self._client(timeout_s) as http:
            try:
                return http.get(f"{self.base_url}{path}")
            except httpx.HTTPError:
                return None

    def answers(self, path: str, timeout_s: float | None = None) -> bool:
        """Whether GET `path` answers 200 (readiness)."""
        response = self.get(path, timeout_s)
        return response is not None and response.status_code == 200

    def bodies(self, paths: tuple[str, ...]) -> dict[str, Any]:
        """What each path answered with 200: JSON, or the text of a Prometheus /metrics. Others are left out."""
        out: dict[str, Any] = {}
        with self._client(None) as http:
            for path in paths:
                try:
                    response = http.get(f"{self.base_url}{path}")
                    if response.status_code == 200:
                        out[path] = response.text if path == "/metrics" else response.json()
                except (httpx.HTTPError, ValueError):  # ValueError: a body that is not JSON
                    continue
        return out

    def async_client(self, timeout_s: float = 10.0) -> httpx.AsyncClient:
        """An async client on the same transport and headers (the tokenizer probe speaks the engine's async API)."""
        transport = self.transport if isinstance(self.transport, httpx.AsyncBaseTransport) else None
        return httpx.AsyncClient(timeout=timeout_s, headers=self.headers, transport=transport)


def engine_error(error: BaseException, *, failure: EngineFailed | None = None) -> BaseException:
    """What to raise for what a request to the engine raised: servebook's error where the cause is known.

    `failure` is the engine's own, when its process ended (its log explains a lost connection better than the
    connection does). A refused key is the user's to fix (InputError); an error status the engine's API answered
    is a `crash` of its serving. A connection lost while the engine still runs is not blamed on the engine: the
    error itself is returned, to be raised as it came.
    """
    if failure is not None:
        return failure
    status = _status(error)
    if status in (401, 403):
        return InputError(f"the engine refused servebook's API key ({status}); export the key and name its variable "
                          "in launch.api_key_env")
    if status is not None:
        return EngineFailed("crash", f"the engine answered {status} in the middle of the run: {_said(error)}")
    return error


def _status(error: BaseException) -> int | None:
    if isinstance(error, httpx.HTTPStatusError):
        return error.response.status_code
    if isinstance(error, openai.APIStatusError):
        return error.status_code
    return None


def _said(error: BaseException) -> str:
    return f"{type(error).__name__}: {error}"[:300]
