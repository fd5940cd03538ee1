"""Input models shown as the YAML a user writes, in Jupyter and IPython, instead of one long line of fields."""

from __future__ import annotations

import html
from typing import Any

import yaml


class ShownAsYaml:
    """Mixin for pydantic input models: `_repr_html_` and IPython's pretty printer show the fields that differ from
    the defaults, as YAML under a one-line heading (`heading()`); `repr()` stays pydantic's, for debugging."""

    def heading(self) -> str:
        return type(self).__name__

    def as_yaml(self) -> str:
        data = self.model_dump(mode="json", exclude_defaults=True, by_alias=True)  # type: ignore[attr-defined]
        return yaml.safe_dump(data, sort_keys=False, width=100).rstrip() + "\n" if data else "{}  # all defaults\n"

    def _repr_pretty_(self, printer: Any, cycle: bool) -> None:
        printer.text(f"{self.heading()}\n{self.as_yaml().rstrip()}")

    def _repr_html_(self) -> str:
        return f"<h4>{html.escape(self.heading())}</h4>\n<pre>{html.escape(self.as_yaml())}</pre>"
