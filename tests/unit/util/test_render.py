"""One rendering path: every displayable object gives terminal, Jupyter and plain-text renderings of the
same blocks, and escapes what it shows."""

import io

from rich.console import Console

from servebook.util.render import Renderable, Table, Text, to_html, to_text


class Example(Renderable):
    def blocks(self):
        table = Table(["cell", "tok/s"], title="Decode, prose prompts")
        table.add(["decode-prose-c1", "41.2"])
        table.add(["decode-prose-c4", "<script>alert(1)</script>"], "invalid")
        return [Text("run 20261130T0000Z-abc  tiny  completed", "heading"), table]


def test_mimebundle_has_plain_text_and_escaped_html_of_the_same_blocks():
    bundle = Example()._repr_mimebundle_()
    assert set(bundle) == {"text/plain", "text/html"}
    for text in ("decode-prose-c1", "41.2", "Decode, prose prompts"):
        assert text in bundle["text/plain"] and text in bundle["text/html"]
    assert "<script>" not in bundle["text/html"] and "&lt;script&gt;" in bundle["text/html"]
    assert "<table" in bundle["text/html"]


def test_terminal_rendering_is_the_rich_form_of_the_same_blocks():
    buffer = io.StringIO()
    Console(file=buffer, width=120, color_system=None).print(Example())
    assert "decode-prose-c4" in buffer.getvalue() and "41.2" in buffer.getvalue()
    assert str(Example()) == to_text(Example().blocks())


def test_pre_text_keeps_its_lines_in_html():
    assert to_html([Text("a\nb", pre=True)]) == "<pre>a\nb</pre>"


def test_inside_a_jupyter_kernel_the_text_rendering_is_returned_not_displayed(monkeypatch):
    """rich displays what it prints when it believes it runs in a kernel; the text/plain fallback must not."""
    import builtins

    from servebook.util.render import Table, Text, to_text

    class ZMQInteractiveShell:  # what rich looks for
        pass

    shown = []
    monkeypatch.setattr(builtins, "get_ipython", lambda: ZMQInteractiveShell(), raising=False)
    monkeypatch.setattr("IPython.display.display", lambda *a, **k: shown.append(a), raising=False)
    table = Table(["cell", "tok/s"])
    table.add(["decode@1", "31.2"])
    text = to_text([Text("run r1"), table])
    assert "decode@1" in text and "run r1" in text and not shown
