"""Run reports: the tables practitioners publish, rendered for a terminal (rich) and Jupyter (HTML).

Both renderings come from the same pandas frames, so a number is formatted once.
"""

from __future__ import annotations

import html
from dataclasses import dataclass

import pandas as pd
from rich.console import Group
from rich.table import Table
from rich.text import Text

from .journal import RunRecord

DECODE_NOTE = ("Aggregate = sum of completion tokens / (first send to last finish). Per request = median of "
               "(completion_tokens - 1) / (t_last - t_first). TTFT = median send to first content chunk.")
PREFILL_NOTE = ("Cold prefill: prompt_tokens / TTFT with max_tokens=1 and a unique prefix per request; "
                "includes scheduling and first-token overhead.")


def _fmt(value, spec: str, suffix: str = "") -> str:
    if value is None or (isinstance(value, float) and pd.isna(value)):
        return "-"
    return f"{value:{spec}}{suffix}"


def _status(row) -> str:
    if row["valid"]:
        return "ok" if row["reconciliation"] == "ok" else f"ok ({row['reconciliation']})"
    return "INVALID: " + row["invalid_reasons"]


def decode_tables(cells: pd.DataFrame) -> dict[str, pd.DataFrame]:
    out = {}
    decode = cells[cells["kind"] == "decode"]
    for category, group in decode.groupby("category", sort=False):
        out[category] = pd.DataFrame({
            "Requests": group["concurrency"].astype(int).values,
            "Aggregate tok/s": [_fmt(v, ".1f") for v in group["aggregate_tok_s"]],
            "Per request tok/s": [_fmt(v, ".1f") for v in group["per_request_tok_s"]],
            "TTFT": [_fmt(v * 1000 if v is not None else None, ".0f", " ms") for v in group["ttft_s"]],
            "Check": [_status(r) for _, r in group.iterrows()],
        })
    return out


def prefill_table(cells: pd.DataFrame) -> pd.DataFrame:
    prefill = cells[cells["kind"] == "prefill"]
    return pd.DataFrame({
        "Prompt tokens": prefill["target_prompt_tokens"].astype("Int64").values,
        "Prefill tok/s": [_fmt(v, ".0f") for v in prefill["prefill_tok_s"]],
        "First token": [_fmt(v * 1000 if v is not None else None, ".0f", " ms") for v in prefill["ttft_s"]],
        "Check": [_status(r) for _, r in prefill.iterrows()],
    })


def _rich_table(frame: pd.DataFrame, title: str) -> Table:
    table = Table(title=title, title_justify="left")
    for column in frame.columns:
        table.add_column(str(column), justify="left" if column == "Check" else "right")
    for row in frame.itertuples(index=False):
        cells = []
        for value in row:
            text = Text(str(value))
            if str(value).startswith("INVALID"):
                text.stylize("bold red")
            cells.append(text)
        table.add_row(*cells)
    return table


@dataclass
class RunReport:
    run: RunRecord

    def _header(self) -> str:
        return f"run {self.run.run_id}  {self.run.candidate_label}  status: {self.run.status}"

    def _failure_text(self) -> str | None:
        m = self.run.manifest
        if self.run.status == "incomplete":
            return "incomplete: the run has no manifest (interrupted, killed, or still running)."
        if m and m.get("failure"):
            f = m["failure"]
            return f"failed during {f.get('stage')}: {f['cause']}: {f['message']}"
        return None

    def frames(self) -> dict[str, pd.DataFrame]:
        if self.run.status != "completed":
            return {}
        cells = self.run.table("cells")
        if cells is None or cells.empty:
            return {}
        cells = cells.astype(object).where(cells.notna(), None)
        frames = {f"Decode, {cat} prompts": t for cat, t in decode_tables(cells).items()}
        prefill = prefill_table(cells)
        if not prefill.empty:
            frames["Cold prefill"] = prefill
        return frames

    def __rich__(self):
        parts: list = [Text(self._header(), style="bold")]
        failure = self._failure_text()
        if failure:
            parts.append(Text(failure, style="bold red"))
            tail = (self.run.manifest or {}).get("failure", {}) or {}
            if tail.get("log_tail"):
                parts.append(Text("engine log tail:\n" + "\n".join(tail["log_tail"].splitlines()[-10:]), style="dim"))
        for title, frame in self.frames().items():
            parts.append(_rich_table(frame, title))
        if self.frames():
            parts.append(Text(DECODE_NOTE + "\n" + PREFILL_NOTE, style="dim"))
        return Group(*parts)

    def _repr_html_(self) -> str:
        out = [f"<h4>{html.escape(self._header())}</h4>"]
        failure = self._failure_text()
        if failure:
            out.append(f"<p style='color:#b00'><b>{html.escape(failure)}</b></p>")
            tail = ((self.run.manifest or {}).get("failure") or {}).get("log_tail")
            if tail:
                out.append(f"<pre>{html.escape(tail)}</pre>")
        for title, frame in self.frames().items():
            out.append(f"<h5>{html.escape(title)}</h5>")
            out.append(frame.to_html(index=False, escape=True))
        if self.frames():
            out.append(f"<p><small>{html.escape(DECODE_NOTE)}<br>{html.escape(PREFILL_NOTE)}</small></p>")
        return "\n".join(out)
