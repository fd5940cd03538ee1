"""Charts that fit (issue 34, item 6), in real headless Chromium at 1400 and 390 px: every legend inside its
chart's frame and below the plot, every candidate's trace drawn and named, no plot area collapsed; on the site
built from the committed sample journal (plus a study of long names), and for the notebooks' figures, which the
same code draws."""

import shutil
from pathlib import Path

import pytest

from servebook.journal import Journal, samples
from servebook.journal.synthetic import write_synthetic_run
from servebook.present import build_site

pytestmark = pytest.mark.browser

SAMPLE = samples.sample_journal("sample-journal")
WIDTHS = (1400, 390)
LONG = [f"candidate-{i}-with-a-rather-long-descriptive-name" for i in range(8)]

#: Each chart's frame, plot area, legend and legend entries, as laid out; names as plotly draws them.
#: every chart of the page drawn: site.js draws them after the text has painted, those in view first
ALL_DRAWN = "() => !window.SERVEBOOK_CHARTS || document.documentElement.dataset.charts === 'drawn'"
MEASURE = """() => Array.from(document.querySelectorAll('.js-plotly-plot')).map(gd => {
  const box = r => ({left: r.left, top: r.top, right: r.right, bottom: r.bottom});
  const frame = gd.querySelector('.main-svg').getBoundingClientRect();
  const size = gd._fullLayout._size;
  const bg = gd.querySelector('.legend .bg');
  const titles = Array.from(gd.querySelectorAll('.g-xtitle, .g-x2title, .g-x3title')).map(t => box(t.getBoundingClientRect()));
  const ticks = Array.from(gd.querySelectorAll('.xaxislayer-above text')).map(t => box(t.getBoundingClientRect()));
  const y = gd._fullLayout.yaxis || {};
  return {
    id: gd.id, title: (gd._fullLayout.title || {}).text || '', frame: box(frame),
    plot: {left: frame.left + size.l, top: frame.top + size.t, right: frame.left + size.l + size.w,
           bottom: frame.top + size.t + size.h, w: size.w, h: size.h},
    legend: bg ? box(bg.getBoundingClientRect()) : null, xtitles: titles, xticks: ticks,
    entries: Array.from(gd.querySelectorAll('.legend .traces')).map(t => ({
      text: t.querySelector('.legendtext').textContent, box: box(t.getBoundingClientRect())})),
    names: gd._fullData.filter(t => t.visible !== false).map(t => String(t.name || '').replace(/<br>/g, '')),
    ticks: (y.ticktext || []).map(t => String(t).replace(/<br>/g, '')),
  };
})"""


#: What a candidate needs measured to be owed a line in a chart, by the chart's title.
NEEDS = [("Aggregate decode", "decode"), ("Per-request decode", "decode"), ("Median TTFT", "decode"), ("ITL p99", "itl"),
         ("Pareto", "decode"), ("Cold prefill", "prefill"), ("Chunk gaps", "chunks"), ("Latency p90", "load"),
         ("Goodput", "load"), ("Capacity", "capacity"), ("Queue wait", "wave"), ("Prompt reuse", "reuse")]


def owed(chart: dict, measured: dict[str, set[str]]) -> set[str]:
    """The candidates that measured what the chart draws."""
    title = chart["title"].replace("<br>", " ")
    kinds = [kind for prefix, kind in NEEDS if title.startswith(prefix)]
    assert kinds, f"a chart this test does not know: {title}"
    return {name for name, has in measured.items() if kinds[0] in has}


def inside(inner, outer, slack=1.0):
    return (inner["left"] >= outer["left"] - slack and inner["top"] >= outer["top"] - slack
            and inner["right"] <= outer["right"] + slack and inner["bottom"] <= outer["bottom"] + slack)


def squeezed(text: str) -> str:
    return "".join(text.split())


def check_chart(chart: dict, where: str, candidates: set[str], forest: bool = False) -> None:
    label = f"{where}, chart {chart['id']} ({chart['title'][:40]})"
    assert chart["plot"]["h"] >= 140 and chart["plot"]["w"] >= 140, f"{label}: plot area collapsed to {chart['plot']}"
    if chart["legend"] is not None:
        assert inside(chart["legend"], chart["frame"]), f"{label}: legend {chart['legend']} outside {chart['frame']}"
        assert chart["legend"]["top"] >= chart["plot"]["bottom"] - 1, f"{label}: legend over the plot"
        below = chart["xtitles"] + chart["xticks"]
        assert all(t["bottom"] <= chart["legend"]["top"] + 1 for t in below), f"{label}: legend over an x axis"
        for entry in chart["entries"]:
            assert inside(entry["box"], chart["legend"]), f"{label}: legend entry {entry['text']} clipped"
    assert all(t["top"] >= chart["plot"]["bottom"] - 1 for t in chart["xtitles"]), f"{label}: x title in the plot"
    wanted = {squeezed(c) for c in candidates}  # names as drawn: wrapped into lines, so compared without spaces
    if forest:  # its rows are candidates, its traces cells and limits
        assert {squeezed(t) for t in chart["ticks"]} <= wanted, f"{label}: rows {chart['ticks']}"
        return
    missing = wanted - {squeezed(n) for n in chart["names"] + chart["ticks"]}
    assert not missing, f"{label}: no trace of {sorted(missing)}"
    if chart["legend"] is not None:
        named = {squeezed(e["text"]) for e in chart["entries"]}
        assert wanted <= named, f"{label}: legend lacks {sorted(wanted - named)}"


@pytest.fixture(scope="module")
def sample_site(tmp_path_factory):
    root = tmp_path_factory.mktemp("charts")
    shutil.copytree(SAMPLE, root / "journal")
    journal = Journal(root / "journal")
    for i, label in enumerate(LONG):  # eight long names: legends of several wrapped rows
        write_synthetic_run(journal, index=500 + i, study="long-names", label=label, requests=20, speed=1 + i / 10)
    build_site(journal, root / "site")
    studies: dict[str, dict[str, set[str]]] = {}  # study -> candidate -> what its runs measured
    for run in journal.runs():
        if run.status == "completed" and run.manifest is not None and run.manifest.study:
            has = studies.setdefault(run.manifest.study, {}).setdefault(run.candidate_label, set())
            cells = run.table("cells")
            has.update(cells["kind"])
            if "itl_p99_s" in cells and cells["itl_p99_s"].notna().any():  # runs before measure/figures/itl.py have none
                has.add("itl")
            if run.table_path("chunks").is_file():
                has.add("chunks")
    return root / "site", studies


def test_study_charts_fit_at_desktop_and_phone_widths_with_every_candidate(sample_site, browser):
    site, studies = sample_site
    assert len(studies) >= 3 and len(studies["long-names"]) == 8
    for width in WIDTHS:
        page = browser.new_page(viewport={"width": width, "height": 900})
        for study, measured in sorted(studies.items()):
            page.goto((site / "studies" / f"{study}.html").as_uri())
            page.wait_for_function(ALL_DRAWN)
            charts = page.evaluate(MEASURE)
            assert len(charts) >= 3 and charts[0]["id"] == "study-forest"
            check_chart(charts[0], f"study {study} at {width} px", set(measured), forest=True)
            for chart in charts[1:]:
                check_chart(chart, f"study {study} at {width} px", owed(chart, measured))
        page.close()


def test_run_history_and_search_charts_fit(sample_site, browser):
    site, _ = sample_site
    pages = sorted(site.glob("runs/*.html"))[:2] + sorted(site.glob("candidates/*.html"))[:3] \
        + sorted(site.glob("searches/*.html"))
    assert len(pages) >= 5
    for width in WIDTHS:
        page = browser.new_page(viewport={"width": width, "height": 900})
        for path in pages:
            page.goto(path.as_uri())
            page.wait_for_function(ALL_DRAWN)
            for chart in page.evaluate(MEASURE):
                check_chart(chart, f"{path.relative_to(site)} at {width} px", set())
        page.close()


def test_the_notebooks_figures_fit_and_the_verdict_chart_keeps_its_size(sample_site, browser, tmp_path):
    """The compare notebook's figures (the verdict chart first) drawn as JupyterLab draws them: the figure's own
    height, the output area's width (the verdict chart shrank to 60 px there, its legend beside it)."""
    from servebook.notebook import compare

    site, studies = sample_site
    study = Path(__file__).parents[2] / "data" / "studies" / "h200-1b-llamacpp.yaml"
    comparison = compare(study_path=str(study), journal=str(site.parent / "journal"))
    assert comparison.comparisons
    figures = [f.to_json() for f in comparison.figures()]
    divs = "".join(f'<div id="f{i}" class="out"></div>' for i in range(len(figures)))
    draw = "".join(f"(function (f) {{ Plotly.newPlot('f{i}', f.data, f.layout); }})({f});" for i, f in enumerate(figures))
    page_html = tmp_path / "figures.html"
    page_html.write_text(f"<!doctype html><html><head><style>body{{margin:0}} .out{{margin:8px 60px 8px 8px}}</style>"
                         f'<script src="{(site / "assets" / "plotly.min.js").as_uri()}"></script></head>'
                         f"<body>{divs}<script>{draw}</script></body></html>")
    for width in WIDTHS:
        page = browser.new_page(viewport={"width": width, "height": 900})
        page.goto(page_html.as_uri())
        page.wait_for_selector(".main-svg")
        charts = page.evaluate(MEASURE)
        assert len(charts) == len(figures) >= 5
        measured = studies["h200-1b-llamacpp"]
        check_chart(charts[0], f"notebook verdict chart at {width} px", set(measured), forest=True)
        for chart in charts[1:]:
            check_chart(chart, f"notebook figure at {width} px", owed(chart, measured))
        page.close()
