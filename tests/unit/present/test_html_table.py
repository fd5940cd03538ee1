"""The site's tables as the templates draw them: figures right-aligned, words left, styles as classes, every
value escaped (a journal's text never opens a tag)."""

from servebook.present.site.environment import environment
from servebook.present.site.html_table import html_table
from servebook.util.render import Table


def sample() -> Table:
    table = Table(["cell", "tok/s <raw>"])
    table.add(["decode-c1", "12.5 tok/s"])
    table.add(["<script>x</script>", "~+3.1%"], css="invalid", styles=["", "dim"])
    table.add(["prefill", 7], styles=["warn", ""])
    return table


def test_figures_align_right_words_left_and_styles_become_classes():
    html = html_table(sample())
    assert html.startswith('<table class="data">\n<thead><tr><th>cell</th><th>tok/s &lt;raw&gt;</th></tr></thead>')
    assert '<tr><td>decode-c1</td><td class="num">12.5 tok/s</td></tr>\n' in html
    assert ('<tr class="invalid"><td>&lt;script&gt;x&lt;/script&gt;</td><td class="num dim">~+3.1%</td></tr>\n'
            in html)
    assert '<tr><td class="warn">prefill</td><td class="num">7</td></tr>\n' in html
    assert html.endswith("</tbody>\n</table>") and "<script>" not in html


def test_the_templates_macro_draws_the_same_table():
    macro = environment().from_string('{% from "macros.html.j2" import table %}{{ table(t, "data wide") }}')
    assert macro.render(t=sample()) == html_table(sample(), "data wide")
