"""Every document and repository file the library's code cites is in the repository (issue 31, item 7): a
reader sent to `engines.md` or `scripts/record-engine-contracts.sh` finds it. A bare `NAME.md` is a page of
docs/ (or the top level; `../NAME.md`, as a page generated into docs/reference links one); a path that starts with a top-level folder is read from the repository root, with
`<placeholder>` parts and globs matching any name."""

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
PACKAGE = REPO / "lib" / "servebook"
TOP_LEVEL = ("benchmarks", "data", "docs", "examples", "lib", "notebooks", "scripts", "tests")

# Not preceded by a path character, so `runs/<id>/data/x` (a path inside a run or a site) is not a citation.
_DOC = re.compile(r"(?<![\w./{}<>-])([\w./-]+\.md)\b")
_PATH = re.compile(rf"(?<![\w./{{}}<>-])((?:{'|'.join(TOP_LEVEL)})/[\w.*<>/-]*[\w*>])")


def missing_citations(text: str, root: Path = REPO) -> list[str]:
    """The citations in `text` that name nothing in the repository at `root`."""
    missing = []
    for doc in _DOC.findall(text):
        # a page the library writes under docs/reference links its siblings in docs/ as ../NAME.md
        doc = doc.removeprefix("../")
        if not any((root / folder / doc).is_file() for folder in ("", "docs")):
            missing.append(doc)
    for path in _PATH.findall(text):
        pattern = re.sub(r"<[^>]*>", "*", path)
        if not any(root.glob(pattern)):
            missing.append(path)
    return missing


def test_every_citation_in_the_library_names_a_file_of_the_repository():
    cited = {}
    for module in sorted(PACKAGE.rglob("*.py")):
        for citation in missing_citations(module.read_text()):
            cited.setdefault(module.relative_to(REPO).as_posix(), []).append(citation)
    assert not cited, f"the code cites what the repository does not hold: {cited}"


def test_the_library_cites_the_docs_it_leans_on():
    """The check has something to check: the engine adapters and the cell summaries cite docs/."""
    texts = " ".join(p.read_text() for p in PACKAGE.rglob("*.py"))
    assert {"engines.md", "design.md", "docs/metrics.md"} <= set(_DOC.findall(texts))


def test_a_citation_of_a_missing_doc_or_file_is_found(tmp_path):
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "design.md").write_text("# design\n")
    (tmp_path / "data" / "engine-contracts").mkdir(parents=True)
    (tmp_path / "data" / "engine-contracts" / "vllm-0.33.0.json").write_text("{}")
    text = ("Counter semantics (engines.md); the journal contract (design.md); docs/design.md; "
            "data/engine-contracts/<engine>-<version>.json; scripts/record.sh; f'{run}/data/x.parquet'")
    assert missing_citations(text, tmp_path) == ["engines.md", "scripts/record.sh"]
