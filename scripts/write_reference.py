"""Write the reference generated from the code: the CLI reference (docs/reference/cli.md, from the typer app), the
metrics reference (docs/reference/metrics.md, from the metrics' definitions) and the JSON Schemas of a candidate, a
plan and a study (lib/servebook/data/schemas/, from the pydantic models).

    .venv/bin/python scripts/write_reference.py           # write every file that changed
    .venv/bin/python scripts/write_reference.py --check   # write nothing; exit 1 naming the stale files

Run it after changing a command, an option's help, or a field of the input models; tests/unit/test_schemas.py and
tests/unit/test_reference.py fail until the files are written again.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
# The servebook of this checkout, whatever the environment has installed (an editable install of another
# worktree would write that one's reference here).
sys.path.insert(0, str(REPO / "lib"))

from servebook.cli.reference import generated_files  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="write nothing; exit 1 if a file is stale")
    check = parser.parse_args(argv).check
    stale = []
    for relative, text in generated_files().items():
        path = REPO / relative
        if path.is_file() and path.read_text(encoding="utf-8") == text:
            continue
        stale.append(relative)
        if not check:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text, encoding="utf-8")
    for relative in stale:
        print(f"{'stale' if check else 'wrote'}: {relative}")
    if check and stale:
        print("run: python scripts/write_reference.py", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
