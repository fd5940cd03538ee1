"""The study page's first screen names the recommended configuration and why, at 1400 and 390 px, in real
Chromium, on a copy of the committed vLLM journal judged under its study."""

import shutil

import pytest

from servebook.config import load_study
from servebook.journal import Journal
from servebook.present import build_site
from servebook.verdicts import judge

from .test_cli import REPO

pytestmark = pytest.mark.browser

FIRST_SCREEN = 800  # px: what a reader sees before scrolling


@pytest.fixture(scope="module")
def study_page(tmp_path_factory):
    root = tmp_path_factory.mktemp("answer-site")
    journal = Journal(root / "journal")
    shutil.copytree(REPO / "data" / "sample-journal-vllm", journal.root)
    judge(load_study(REPO / "data" / "studies" / "h200-vllm-1b.yaml"), journal)  # events with the question and notes
    build_site(journal, root / "site")
    return root / "site" / "studies" / "h200-vllm-1b.html"


@pytest.mark.parametrize("width", [1400, 390])
def test_the_first_screen_names_the_recommended_candidate_and_its_reason(study_page, browser, width):
    page = browser.new_page(viewport={"width": width, "height": FIRST_SCREEN})
    page.goto(study_page.as_uri())
    page.wait_for_load_state("load")
    headline, why = page.locator("section.answer .recommended"), page.locator("section.answer ul.why li").first
    assert headline.inner_text() == "Recommended: baseline, as no candidate is accepted"
    assert why.inner_text().startswith("no candidate is accepted (4 inconclusive, 2 rejected)")
    for element in (headline, why):
        box = element.bounding_box()
        assert box is not None and box["y"] + box["height"] <= FIRST_SCREEN and box["x"] >= 0
        assert box["x"] + min(box["width"], 200) <= width
    assert "Which max-num-seqs" in page.locator("section.answer .question").inner_text()
    page.close()
