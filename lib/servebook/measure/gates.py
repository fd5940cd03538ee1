"""Gates: does the server still speak the protocol agents rely on? Each gate is scored k/n.

- `json_schema`: a response_format json_schema answer parses and matches the schema's required keys.
- `nullable_argument`: a forced tool call whose nullable argument must come back as JSON null,
  not as the string "null" (a known template/parser bug that breaks agents silently).
- `agent_protocol`: five fixed cases an agent relies on: ordinary text, required parallel tool calls,
  automatic tool selection, a history with reasoning and a tool result, and the nullable argument.
- `needle`: a fact planted at a chosen depth of a long prompt, asked back (plan.needle_tokens).

Models that can call tools are needed for the tool cases: against random-weight models they fail, so
they are verified against the simulator, which answers as a capable model does (or, under a fault,
as a broken template does).
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from typing import Any

from openai import AsyncOpenAI

GATES = ("json_schema", "nullable_argument", "agent_protocol", "needle")
AGENT_CASES = ("ordinary_text", "parallel_tool_calls", "tool_selection", "reasoning_and_tool_result",
               "nullable_argument")

_SCHEMA: dict[str, Any] = {"type": "object", "additionalProperties": False, "required": ["city", "open"],
           "properties": {"city": {"enum": ["Oslo", "Lima", "Pune"]}, "open": {"type": "boolean"}}}
_TOOL: dict[str, Any] = {"type": "function", "function": {
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
    request: dict[str, Any] = {"messages": messages, "response_format": {"type": "json_schema",
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
    request: dict[str, Any] = {"messages": messages, "tools": [_TOOL], "tool_choice": "required"}
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


_WEATHER: dict[str, Any] = {"type": "function", "function": {
    "name": "get_weather", "description": "Current weather in a city.",
    "parameters": {"type": "object", "required": ["city"], "properties": {"city": {"type": "string"}}}}}


def _calls(message) -> list[tuple[str, dict | None]]:
    """(name, parsed arguments or None when they are not JSON) of every tool call in a message."""
    out = []
    for call in message.tool_calls or []:
        try:
            arguments = json.loads(call.function.arguments)
        except (json.JSONDecodeError, TypeError):
            arguments = None
        out.append((call.function.name, arguments if isinstance(arguments, dict) else None))
    return out


async def _agent_case(client: AsyncOpenAI, model: str, case: int) -> GateResult:
    name = AGENT_CASES[case]
    gate = "agent_protocol"
    if name == "nullable_argument":
        result = await _nullable_argument(client, model, case)
        return GateResult(gate, case, result.passed, f"{name}: {result.reason}", result.request, result.response)
    request: dict[str, Any]
    if name == "ordinary_text":
        request = {"messages": [{"role": "user", "content": "Say hello to the team in one short sentence."}]}
    elif name == "parallel_tool_calls":
        request = {"messages": [{"role": "user", "content": "What is the weather in Oslo and in Lima? Call the "
                                                            "tool once per city, both at once."}],
                   "tools": [_WEATHER], "tool_choice": "required", "parallel_tool_calls": True}
    elif name == "tool_selection":
        request = {"messages": [{"role": "user", "content": "Is it raining in Pune right now?"}],
                   "tools": [_TOOL, _WEATHER], "tool_choice": "auto"}
    else:  # a history an agent resends: its own reasoning, its tool call, the tool's answer
        request = {"messages": [
            {"role": "user", "content": "What is the weather in Oslo?"},
            {"role": "assistant", "content": None, "reasoning_content": "The user wants Oslo's weather; call the tool.",
             "tool_calls": [{"id": "call_1", "type": "function",
                             "function": {"name": "get_weather", "arguments": json.dumps({"city": "Oslo"})}}]},
            {"role": "tool", "tool_call_id": "call_1", "content": json.dumps({"city": "Oslo", "sky": "snow"})}],
            "tools": [_WEATHER]}
    response = await client.chat.completions.create(model=model, max_tokens=200, temperature=0, **request)
    message = response.choices[0].message
    raw, sent = message.model_dump_json(), json.dumps(request)
    calls = _calls(message)
    if name == "ordinary_text" or name == "reasoning_and_tool_result":
        ok = bool((message.content or "").strip()) and not calls
        reason = "a text answer" if ok else ("a tool call instead of text" if calls else "an empty answer")
    elif name == "parallel_tool_calls":
        cities = {(a or {}).get("city") for n, a in calls if n == "get_weather"}
        ok = len(calls) >= 2 and all(a is not None for _, a in calls) and {"Oslo", "Lima"} <= cities
        reason = "both calls, at once" if ok else f"{len(calls)} tool call(s) for two cities ({sorted(map(str, cities))})"
    else:
        ok = len(calls) >= 1 and calls[0][0] == "get_weather" and calls[0][1] is not None
        reason = "chose get_weather" if ok else (f"chose {calls[0][0]}" if calls else "no tool call")
    return GateResult(gate, case, ok, f"{name}: {reason}", sent, raw)


def needle_prompt(filler: str, length_chars: int, depth: float, code: int, case: int) -> str:
    """`length_chars` of filler with the fact planted at `depth` (0 = start, 1 = end), then the question."""
    body = (filler * (length_chars // max(1, len(filler)) + 1))[:length_chars]
    cut = int(len(body) * depth)
    fact = f" The access code for vault {case} is {code}. "
    return body[:cut] + fact + body[cut:] + f"\n\nWhat is the access code for vault {case}? Answer with the number."


async def run_needles(client: AsyncOpenAI, model: str, lengths: list[int], cases: int, filler: str,
                      measure_tokens) -> list[GateResult]:
    """One gate per length (`needle@8192`), `cases` depths each; the prompt is sized by the engine's tokenizer."""
    results = []
    for length in lengths:
        chars = length * 4  # a first guess, corrected once by the tokenizer
        for case in range(cases):
            depth = (case + 0.5) / cases
            code = 1000 + (7919 * (case + 1) + length) % 9000
            prompt = needle_prompt(filler, chars, depth, code, case)
            measured = await measure_tokens(prompt)
            if measured:
                chars = max(256, int(chars * length / measured))
                prompt = needle_prompt(filler, chars, depth, code, case)
            request: dict[str, Any] = {"messages": [{"role": "user", "content": prompt}]}
            gate = f"needle@{length}"
            try:
                response = await client.chat.completions.create(model=model, max_tokens=16, temperature=0, **request)
                answer = response.choices[0].message.content or ""
                found = str(code) in answer
                reason = f"depth {depth:.0%}: " + ("recalled" if found else f"answered {answer[:40]!r}, not {code}")
                results.append(GateResult(gate, case, found, reason, f"{len(prompt)} characters", answer))
            except Exception as error:  # noqa: BLE001
                results.append(GateResult(gate, case, False, f"request failed: {type(error).__name__}: {error}"[:300],
                                          "", ""))
    return results


async def run_gate(client: AsyncOpenAI, model: str, gate: str, cases: int) -> list[GateResult]:
    check = {"json_schema": _json_schema, "nullable_argument": _nullable_argument, "agent_protocol": _agent_case}[gate]
    if gate == "agent_protocol":
        cases = len(AGENT_CASES)  # fixed cases, each a different thing an agent relies on
    results = []
    for case in range(cases):
        try:
            results.append(await check(client, model, case))
        except Exception as error:  # noqa: BLE001 - a failed request is a failed case, with its reason
            label = f"{AGENT_CASES[case]}: " if gate == "agent_protocol" else ""
            results.append(GateResult(gate, case, False,
                                      f"{label}request failed: {type(error).__name__}: {error}"[:300], "", ""))
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
