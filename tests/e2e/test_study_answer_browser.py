"""The study page's first screen names the recommended configuration and why, at 1400 and 390 px, in real
Chromium, on a copy of the committed vLLM journal judged under its study."""

import shutil

import pytest

from servebook.config import load_study
from servebook.journal import Journal, samples
from servebook.present import build_site
from servebook.verdicts import judge

from .test_cli import REPO

pytestmark = pytest.mark.browser

FIRST_SCREEN = 800  # px: what a reader sees before scrolling


@pytest.fixture(scope="module")
def study_page(tmp_path_factory):
    root = tmp_path_factory.mktemp("answer-site")
    journal = Journal(root / "journal")
    shutil.copytree(samples.sample_journal("sample-journal-vllm"), journal.root)
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


#: the largest vertical stretch of a table row with no text a 390 px screen shows (one blank line is 24 px)
BLANK_PX = 60
ROW_GAPS = """() => Array.from(document.querySelectorAll('main table tbody tr')).map(row => {
  const box = row.getBoundingClientRect();
  const tops = [];
  const walker = document.createTreeWalker(row, NodeFilter.SHOW_TEXT);
  for (let node = walker.nextNode(); node; node = walker.nextNode()) {
    if (!node.textContent.trim()) continue;
    const range = document.createRange();
    range.selectNodeContents(node);
    for (const r of range.getClientRects()) {
      if (r.width > 0 && r.right > 0 && r.left < window.innerWidth) tops.push([r.top, r.bottom]);
    }
  }
  for (const cell of row.cells) {  // a card's labels are drawn by CSS (::before), not text nodes
    const label = getComputedStyle(cell, '::before').content;
    const r = cell.getBoundingClientRect();
    if (label && label !== 'none' && label !== 'normal' && r.left < window.innerWidth) tops.push([r.top, r.top + 20]);
  }
  tops.sort((a, b) => a[0] - b[0]);
  let reached = box.top, gap = 0;
  for (const [top, bottom] of tops) { gap = Math.max(gap, top - reached); reached = Math.max(reached, bottom); }
  return {gap: Math.max(gap, box.bottom - reached), text: row.innerText.slice(0, 60)};
})"""


def test_at_a_phones_width_no_table_row_is_a_blank_strip(study_page, browser):
    """At 390 px the ranked and verdict tables reflow into cards: every stretch of every row shows text (their
    rows were thousands of pixels of blank beside a reasons column scrolled out of view)."""
    page = browser.new_page(viewport={"width": 390, "height": FIRST_SCREEN})
    page.goto(study_page.as_uri())
    page.wait_for_load_state("load")
    rows = page.evaluate(ROW_GAPS)
    assert len(rows) >= 8
    blank = [r for r in rows if r["gap"] > BLANK_PX]
    assert blank == [], f"rows blank over {BLANK_PX} px: {blank[:3]}"
    assert page.evaluate("document.documentElement.scrollWidth") <= 390 + 1, "the page itself scrolls sideways"
    page.close()


def test_text_paints_before_plotly_is_even_fetched(study_page, browser):
    """The answer and the tables are on screen while the chart bundle has not arrived: plotly is fetched after
    the first paint, never in <head>. (How soon: benchmarks/site_paint.py, as a share of 0.5 s.)"""
    page = browser.new_page(viewport={"width": 1400, "height": FIRST_SCREEN})
    held = []
    page.route("**/plotly.min.js", lambda route: held.append(route))  # never answered while we look
    page.goto(study_page.as_uri(), wait_until="domcontentloaded")
    page.wait_for_function("() => performance.getEntriesByName('first-contentful-paint').length > 0")
    assert page.locator("section.answer .recommended").is_visible()
    assert page.locator("main table").first.is_visible()
    page.wait_for_function("() => document.querySelector('script[src$=\"plotly.min.js\"]') !== null")
    assert page.evaluate("typeof window.Plotly") == "undefined"
    for route in held:
        route.continue_()
    page.wait_for_function("() => document.documentElement.dataset.charts === 'drawn'")
    assert page.locator(".chart .main-svg").count() >= 2
    page.close()
