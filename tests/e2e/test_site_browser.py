"""The published site in real headless Chromium, from file://, on a journal of real runs."""

from pathlib import Path
from urllib.parse import unquote, urlparse

import pytest

from servebook.journal import Journal
from servebook.journal.synthetic import write_synthetic_run
from servebook.present import build_site
from servebook.run import run_candidate
from servebook.util.progress import Reporter
from tests.helpers.candidates import SMALL_PLAN, tiny_candidate
from tests.helpers.journals import compare_journal, read_compare_script

pytestmark = pytest.mark.browser

EVIL = '<script>window.__pwned = 1</script>'


@pytest.fixture(scope="module")
def site(llama_install, tmp_path_factory):
    root = tmp_path_factory.mktemp("site")
    journal = Journal(root / "journal")
    quiet = Reporter(quiet=True)
    for name, knobs in (("baseline", {}), ("two-slots", {"max_running_requests": 2})):
        candidate = tiny_candidate(name=name, knobs={"chunk_size": 256, "context_length": 8192, **knobs})
        run_candidate(candidate, SMALL_PLAN, journal, reporter=quiet,
                      extra_manifest={"study": "browser", "study_entry": name})
    run_candidate(tiny_candidate(name="bad-flag", extra_args=["--no-such-flag"]), SMALL_PLAN, journal,
                  reporter=quiet, extra_manifest={"study": "browser", "study_entry": "bad-flag"})
    write_synthetic_run(journal, index=7, study="browser", label="killed", status="incomplete", requests=20)
    write_synthetic_run(journal, index=8, study="browser", label=f"evil{EVIL}", invalid=f"reason {EVIL}",
                        verdict="rejected", reasons=[EVIL], log_line=EVIL, requests=20)
    build_site(journal, root / "site")
    return root / "site"


def visit(browser, url):
    page = browser.new_page()
    problems, requests = [], []
    page.on("console", lambda m: problems.append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda e: problems.append(str(e)))
    page.on("request", lambda r: requests.append(r.url))
    page.goto(url)
    page.wait_for_load_state("load")
    return page, problems, requests


def test_every_page_loads_offline_without_errors_and_every_link_resolves(site, browser):
    pages = sorted(site.rglob("*.html"))
    assert len(pages) >= 8
    for path in pages:
        page, problems, requests = visit(browser, path.as_uri())
        assert problems == [], f"{path}: {problems}"
        outside = [u for u in requests if not u.startswith("file://")]
        assert outside == [], f"{path} asked the network for {outside}"
        for href in page.eval_on_selector_all("a[href]", "els => els.map(e => e.href)"):
            target = urlparse(href)
            assert target.scheme == "file", f"{path}: external link {href}"
            assert Path(unquote(target.path)).exists(), f"{path}: broken link {href}"
        assert page.evaluate("window.__pwned") is None, f"{path}: injected script ran"
        page.close()


def test_charts_draw_on_study_and_run_pages(site, browser):
    page, problems, _ = visit(browser, (site / "studies" / "browser.html").as_uri())
    page.wait_for_function("() => document.documentElement.dataset.charts === 'drawn'")
    # the forest plot of verdicts, then seven charts of the cells (decode's four with ITL p99), the Pareto front of
    # the two slot counts among them
    assert page.locator(".chart").count() == 8
    assert page.locator(".chart .main-svg").count() >= 8
    assert "Pareto front" in page.locator(".chart").nth(6).inner_text()
    assert "no comparisons judged yet" in page.locator("#study-forest").inner_text()
    assert page.locator("tr.accepted").count() == 0  # nobody judged these runs
    assert problems == []
    page.close()


def test_escaped_script_shows_as_text(site, browser):
    run_page = next(p for p in (site / "runs").glob("*.html") if "evil" in p.read_text())
    page, _, _ = visit(browser, run_page.as_uri())
    assert EVIL in page.inner_text("body")
    assert page.evaluate("window.__pwned") is None
    page.close()


def test_index_sorts_and_filters_and_compare_shows_deltas(site, browser):
    page, problems, _ = visit(browser, (site / "index.html").as_uri())
    rows = page.locator("#runs tbody tr")
    assert rows.count() == 5
    page.fill("#filter", "bad-flag")
    assert page.locator("#runs tbody tr:visible").count() == 1
    page.fill("#filter", "")
    page.select_option("#status-filter", "incomplete")
    assert page.locator("#runs tbody tr:visible").count() == 1
    page.select_option("#status-filter", "")
    page.click("th:has-text('decode tok/s')")
    page.click("th:has-text('decode tok/s')")
    first = page.locator("#runs tbody tr").first.inner_text()
    assert "completed" in first
    page.close()

    real = [r.run_id for r in Journal(site.parent / "journal").runs()
            if r.status == "completed" and not r.manifest.synthetic]
    assert len(real) == 2
    page, problems, _ = visit(browser, (site / "compare.html").as_uri() + f"#runs={real[0]},{real[1]}")
    page.wait_for_selector("#delta tbody tr")
    assert "%" in page.inner_text("#delta")
    assert problems == []
    page.close()


#: each row of compare.html's table: its cells' text, class and tooltip
READ_DELTAS = """() => Array.from(document.querySelectorAll('#delta tbody tr')).map(tr => [tr.dataset.cell,
    tr.dataset.metric, ...Array.from(tr.cells).slice(1).map(td => ({text: td.textContent, cls: td.className,
    title: td.title}))])"""


def test_compare_picks_three_runs_and_greys_the_changes_within_the_noise_floor(browser, tmp_path):
    """Issue 55, item 8: three runs picked from the list, the first the reference: a change within the noise floor
    of the reference's configuration is grey with its floor in the tooltip, one beyond it is not; the count of
    shared cells is that of the cells listed, and a cell a picked run lacks is counted with that run."""
    runs = compare_journal(tmp_path / "journal")
    site = tmp_path / "site"
    build_site(Journal(tmp_path / "journal"), site)
    picks = [runs["base"][0], runs["near"][0], runs["far"][0]]
    page, problems, _ = visit(browser, (site / "compare.html").as_uri())
    for run in picks:
        page.check(f"#pick-list input[value='{run.run_id}']")
    page.wait_for_function("() => document.querySelectorAll('#delta thead th').length === 4 && "
                           "document.querySelector('#delta tbody tr')")
    rows = page.evaluate(READ_DELTAS)
    data = {r.run_id: read_compare_script(site / "runs" / r.run_id / "compare.js")[1] for r in picks}
    floor = read_compare_script(site / "floors" / f"{data[picks[0].run_id]['floor']}.js")[1]["cells"]

    def decode(run, cell: str) -> list:  # [value, text] of a run's aggregate decode figure at a cell
        return next(c for c in data[run.run_id]["cells"] if c["cell"] == cell)["figures"]["aggregate_tok_s"]

    seen = set()
    for cell, metric, reference, *others in rows:
        if metric != "aggregate_tok_s":
            continue
        bound = floor[cell]["aggregate_tok_s"]
        base = decode(picks[0], cell)
        assert reference["text"] == base[1] and reference["title"] == bound["text"]
        for run, shown in zip(picks[1:], others, strict=True):
            value = decode(run, cell)
            within = bound["low"] <= value[0] / base[0] <= bound["high"]
            assert ("within-floor" in shown["cls"]) == within, (cell, shown, bound)
            assert shown["title"] == bound["text"] and "noise floor" in shown["title"]
            assert shown["text"].startswith(value[1] + " ") and shown["text"].endswith("%")
            seen.add((run.candidate_label, within))
    # near (the same speed) is within the floor somewhere and beyond it elsewhere; far (half as fast again) never
    assert seen == {("near", True), ("near", False), ("far", False)}
    listed = {row[0] for row in rows}
    assert page.inner_text("#delta-note").startswith(f"{len(listed)} cells measured by all 3 runs listed")
    assert "3 completed runs of base" in page.inner_text("#floor-note")
    assert page.evaluate("location.hash") == "#runs=" + ",".join(r.run_id for r in picks)

    page.select_option("#reference", picks[2].run_id)  # far as the reference: its configuration has one run
    page.wait_for_function(f"() => document.querySelector('#delta thead th:nth-child(2)').textContent"
                           f".indexOf({picks[2].run_id!r}) !== -1")
    assert page.locator("#delta td.within-floor").count() == 0
    assert "No noise floor" in page.inner_text("#floor-note")
    refused = runs["refused"][0].run_id  # a failed run: no cell at all
    page.check(f"#pick-list input[value='{refused}']")
    page.wait_for_function("() => document.querySelectorAll('#unshared li').length > 0")
    assert page.locator("#delta tbody tr").count() == 0
    assert page.inner_text("#unshared").startswith(f"{len(listed)} cells are not in every picked run")
    assert all(item.endswith(f"not in {refused}") for item in page.locator("#unshared li").all_inner_texts())
    assert problems == []
    page.close()


def test_a_big_index_is_paged_and_filters_and_sorts_across_pages(browser, tmp_path):
    journal = Journal(tmp_path / "journal")
    for i in range(230):
        write_synthetic_run(journal, index=i, study=f"study-{i % 3}", requests=0,
                            status="failed" if i % 50 == 7 else "completed", label=f"candidate-{i % 7}")
    build_site(journal, tmp_path / "site")
    page, problems, _ = visit(browser, (tmp_path / "site" / "index.html").as_uri())
    assert page.locator("#runs tbody tr").count() == 100  # one page, not 230 rows
    assert "1-100 of 230 runs" in page.inner_text("#pager")
    page.click("#pager button:has-text('older')")
    page.click("#pager button:has-text('older')")
    assert page.locator("#runs tbody tr").count() == 30 and "201-230 of 230" in page.inner_text("#pager")
    page.select_option("#status-filter", "failed")  # across every page, not just the one shown
    assert page.locator("#runs tbody tr").count() == 5 and page.inner_text("#pager") == ""
    page.select_option("#status-filter", "")
    page.fill("#filter", "candidate-3")
    assert page.locator("#runs tbody tr").count() == 33
    page.click("th:has-text('run')")
    page.click("th:has-text('run')")  # descending: the newest first
    newest = max(r.run_id for r in journal.runs() if r.candidate_label == "candidate-3")
    assert page.locator("#runs tbody tr").first.inner_text().startswith(newest)
    link = page.locator("#runs tbody tr a").first.get_attribute("href")
    assert (tmp_path / "site" / link).is_file()
    assert problems == []


def test_every_page_fits_a_phone_without_scrolling_sideways(site, browser):
    """At 390 px the page never scrolls sideways: wide tables scroll inside their own box, charts resize
    (issue 19). SERVEBOOK_SCREENSHOTS=DIR keeps the index, a study and a run page at 1400 and 390 px."""
    import os

    folder = os.environ.get("SERVEBOOK_SCREENSHOTS")
    pages = sorted(site.rglob("*.html"))
    for width in (390, 1400):
        for path in pages:
            page = browser.new_page(viewport={"width": width, "height": 900})
            page.goto(path.as_uri())
            page.wait_for_load_state("load")
            page.wait_for_timeout(200)
            overflow = page.evaluate("document.documentElement.scrollWidth - document.documentElement.clientWidth")
            assert overflow <= 1, f"{path.relative_to(site)} at {width} px scrolls sideways by {overflow} px"
            if folder and path.name in ("index.html", "browser.html") or folder and path.parent.name == "runs" \
                    and "baseline" in path.read_text() and path == min(site.glob("runs/*.html")):
                name = f"site-{path.parent.name}-{path.stem}-{width}.png".replace("site-site-", "site-")
                page.screenshot(path=str(Path(folder) / name), full_page=True)
            page.close()
