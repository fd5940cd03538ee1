"""Gates: does the server still speak the protocol agents rely on? Each gate is scored k/n.

- `json_schema`: a response_format json_schema answer parses and matches the schema's required keys.
- `nullable_argument`: a forced tool call whose nullable argument must come back as JSON null,
  not as the string "null" (a known template/parser bug that breaks agents silently).
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass

from openai import AsyncOpenAI

GATES = ("json_schema", "nullable_argument")

_SCHEMA = {"type": "object", "additionalProperties": False, "required": ["city", "open"],
           "properties": {"city": {"enum": ["Oslo", "Lima", "Pune"]}, "open": {"type": "boolean"}}}
_TOOL = {"type": "function", "function": {
    "name": "book_table", "description": "Book a table; leave the note empty when there is none.",
    "parameters": {"type": "object", "required": ["city", "note"], "properties": {
        "city": {"type": "string"}, "note": {"type": ["string", "null"], "description": "null when no note"}}}}}


@dataclass
class GateResult:
    gate: str
    case: int
    passed: bool
    reason: str
    request: str
    response: str

    def row(self) -> dict:
        return asdict(self)


async def _json_schema(client: AsyncOpenAI, model: str, case: int) -> GateResult:
    messages = [{"role": "user", "content": f"Case {case}: name a city and whether it is open, as JSON."}]
    request = {"messages": messages, "response_format": {"type": "json_schema",
                                                         "json_schema": {"name": "answer", "schema": _SCHEMA}}}
    response = await client.chat.completions.create(model=model, max_tokens=200, temperature=0, **request)
    content = response.choices[0].message.content or ""
    try:
        value = json.loads(content)
    except json.JSONDecodeError as error:
        return GateResult("json_schema", case, False, f"not JSON: {error}", json.dumps(request), content)
    missing = [k for k in _SCHEMA["required"] if k not in value]
    ok = not missing and value.get("city") in _SCHEMA["properties"]["city"]["enum"] and isinstance(value.get("open"), bool)
    reason = "matches the schema" if ok else f"does not match the schema (missing {missing})" if missing else \
        "values outside the schema"
    return GateResult("json_schema", case, ok, reason, json.dumps(request), content)


async def _nullable_argument(client: AsyncOpenAI, model: str, case: int) -> GateResult:
    messages = [{"role": "user", "content": f"Case {case}: book a table in Oslo. There is no note."}]
    request = {"messages": messages, "tools": [_TOOL], "tool_choice": "required"}
    response = await client.chat.completions.create(model=model, max_tokens=200, temperature=0, **request)
    message = response.choices[0].message
    raw = message.model_dump_json()
    if not message.tool_calls:
        return GateResult("nullable_argument", case, False, "no tool call came back", json.dumps(request), raw)
    try:
        arguments = json.loads(message.tool_calls[0].function.arguments)
    except json.JSONDecodeError as error:
        return GateResult("nullable_argument", case, False, f"arguments are not JSON: {error}", json.dumps(request), raw)
    note = arguments.get("note", None)
    if note == "null":
        return GateResult("nullable_argument", case, False, 'the nullable argument came back as the string "null"',
                          json.dumps(request), raw)
    if "note" in arguments and note is not None:
        return GateResult("nullable_argument", case, False, f"the nullable argument came back as {note!r}",
                          json.dumps(request), raw)
    return GateResult("nullable_argument", case, True, "nullable argument is JSON null (or omitted)",
                      json.dumps(request), raw)


async def run_gate(client: AsyncOpenAI, model: str, gate: str, cases: int) -> list[GateResult]:
    check = {"json_schema": _json_schema, "nullable_argument": _nullable_argument}[gate]
    results = []
    for case in range(cases):
        try:
            results.append(await check(client, model, case))
        except Exception as error:  # noqa: BLE001 - a failed request is a failed case, with its reason
            results.append(GateResult(gate, case, False, f"request failed: {type(error).__name__}: {error}"[:300],
                                      "", ""))
    return results


def gate_summary(results: list[GateResult]) -> dict[str, dict]:
    out: dict[str, dict] = {}
    for r in results:
        entry = out.setdefault(r.gate, {"passed": 0, "cases": 0, "first_failure": None})
        entry["cases"] += 1
        entry["passed"] += int(r.passed)
        if not r.passed and entry["first_failure"] is None:
            entry["first_failure"] = r.reason
    return out
