"""HTML pages turned into the text a reader sees (the `website_content` tool)."""

from infrastructure.native_tools.html_text import html_to_text


def test_chrome_and_hidden_parts_are_left_out() -> None:
    page = html_to_text(
        "<html><head><title>Docs</title><script>track()</script><style>p{}</style></head><body>"
        "<nav>Menu</nav><svg><title>icon</title></svg><div hidden>draft <div>nested</div></div>"
        "<p>Visible</p><footer>Copyright</footer><noscript>Enable JS</noscript></body></html>"
    )

    assert page.title == "Docs"
    assert page.text == "Visible"


def test_structure_survives_as_headings_paragraphs_and_lists() -> None:
    page = html_to_text(
        "<h2>Install</h2><p>Run   the\n  installer,\tthen <em>restart</em>.</p>"
        "<ol><li>Download<li>Open<ul><li>macOS</li><li>Linux</li></ul></ol><p>Done &amp; dusted</p>"
    )

    assert page.title is None
    assert page.text == (
        "## Install\n\nRun the installer, then restart.\n\n- Download\n- Open\n  - macOS\n  - Linux\n\nDone & dusted"
    )


def test_preformatted_text_keeps_its_lines_and_tables_keep_their_cells() -> None:
    page = html_to_text(
        "<pre>def f():\n    return 1</pre><table><tr><th>Plan</th><th>Price</th></tr>"
        "<tr><td>Free</td><td>0</td></tr></table>"
    )

    assert page.text == "def f():\n    return 1\n\nPlan | Price\nFree | 0"


def test_an_empty_heading_leaves_no_marker_behind() -> None:
    assert html_to_text("<h1><img src=logo.png></h1><p>Text</p>").text == "Text"
