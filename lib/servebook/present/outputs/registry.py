"""The verdict outputs by name: each format's module registers one writer of a VerdictReport, which the CLI's
`--format` (judge, sweep) and the site's study downloads read alike, so a new format is one module."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from .report import VerdictReport

#: a writer: the report -> the file's text, ending in a newline; `site_url` where the format links to the site
Writer = Callable[..., str]


@dataclass(frozen=True)
class VerdictOutput:
    """One format: its `--format` name, its writer, where the help and the study page list it (`order`) and, where
    the site offers it, the file's suffix beside the study page (`studies/SLUG-SUFFIX`) and what the page calls it;
    `noise`: it writes the baseline's noise floor, which the CLI then measures for it (VerdictReport.noise)."""

    name: str
    write: Writer
    order: int = 100
    download: str | None = None
    title: str = ""
    noise: bool = False

    def text(self, report: VerdictReport, site_url: str | None = None) -> str:
        return self.write(report, site_url=site_url)


_OUTPUTS: dict[str, VerdictOutput] = {}


def register_output(output: VerdictOutput) -> VerdictOutput:
    """Add a format under its name; a second one of the same name is refused (unregister the first)."""
    known = _OUTPUTS.get(output.name)
    if known is not None and known is not output:
        raise ValueError(f"verdict output {output.name!r} is registered already")
    _OUTPUTS[output.name] = output
    return output


def unregister_output(name: str) -> None:
    _OUTPUTS.pop(name, None)


def output_named(name: str) -> VerdictOutput:
    try:
        return _OUTPUTS[name]
    except KeyError:
        raise KeyError(f"no verdict output {name!r}; the formats are {', '.join(_OUTPUTS)}") from None


def output_names() -> tuple[str, ...]:
    """Every registered format's name, in order."""
    return tuple(o.name for o in _ordered())


def downloads() -> list[VerdictOutput]:
    """The formats the study page offers as files, in order."""
    return [o for o in _ordered() if o.download]


def _ordered() -> list[VerdictOutput]:
    return sorted(_OUTPUTS.values(), key=lambda o: (o.order, o.name))
