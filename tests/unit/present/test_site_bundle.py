"""One plotly bundle per site (issue 34, item 6): written once into the site's assets, every page with charts
loading it by a relative path (so the site opens from file:// and from any static host), none embedding it."""

import re
from pathlib import Path

from servebook.journal import Journal
from servebook.journal.synthetic import write_synthetic_run
from servebook.present import build_site

SCRIPT = re.compile(r"<script([^>]*)>(.*?)</script>", re.S)


def test_pages_load_the_one_plotly_bundle_and_none_embeds_it(tmp_path):
    import plotly

    journal = Journal(tmp_path / "journal")
    for i, label in enumerate(["baseline", "faster", "slower"]):
        write_synthetic_run(journal, index=i, label=label, requests=40)
    site = tmp_path / "site"
    build_site(journal, site)
    shipped = (Path(plotly.__file__).parent / "package_data" / "plotly.min.js").read_bytes()
    bundles = [p for p in site.rglob("*.js") if p.read_bytes() == shipped]
    assert [p.relative_to(site).as_posix() for p in bundles] == ["assets/plotly.min.js"]
    assert [p.name for p in site.rglob("*plotly*")] == ["plotly.min.js"]

    with_charts = 0
    for page in site.rglob("*.html"):
        html = page.read_text()
        scripts = SCRIPT.findall(html)
        sources = [re.search(r'src="([^"]+)"', attributes).group(1) for attributes, _ in scripts if "src=" in attributes]
        for src in sources:
            assert not re.match(r"(?:[a-z]+:)?//|/", src), f"{page}: {src} is not relative"
            assert (page.parent / src).resolve().is_file(), f"{page}: {src} resolves to nothing"
        inline = "".join(body for _, body in scripts)
        assert not [s for s in sources if s.endswith("plotly.min.js")], f"{page} blocks its first paint on plotly"
        # site.js loads the bundle once the text has painted, from where the page names it
        plotly_sources = re.findall(r'window\.SERVEBOOK_PLOTLY = "([^"]+)"', inline)
        assert all((page.parent / s).resolve() == bundles[0].resolve() for s in plotly_sources)
        assert "plotly.js v" not in inline and len(inline) < 200_000, f"{page} embeds plotly ({len(inline)} bytes)"
        assert "cdn.plot.ly" not in html and "cdn.jsdelivr" not in html
        if "SERVEBOOK_CHARTS" in inline:
            with_charts += 1
            assert len(plotly_sources) == 1, f"{page} draws charts without loading the bundle once"
        assert len(page.read_bytes()) < len(shipped) / 10, f"{page} is {len(page.read_bytes())} bytes"
    assert with_charts >= 4  # three run pages and the study page
