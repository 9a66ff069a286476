"""HTML pages of the Markdown reports, for Snakemake's HTML report (`snakemake --report results/report.html`).

The report shows images, HTML and PDF inside its page; any other file (Markdown included) only gets a link that
downloads it, so a browser shows nothing. The report rule therefore writes an HTML twin of every Markdown report,
rendered by Python-Markdown with its tables extension (the reports are GitHub-style Markdown tables).
"""

from __future__ import annotations

import html
import os
from pathlib import Path

import markdown

from ..core.io import atomic_path

# Inline (the report embeds each page as a data: URI in an iframe, so nothing may be fetched), readable tables.
STYLE = """
body { font-family: system-ui, -apple-system, "Segoe UI", sans-serif; font-size: 14px; line-height: 1.45;
       color: #1f2933; margin: 1.5em 2em; max-width: 80em; }
h1 { font-size: 1.6em; border-bottom: 1px solid #d9dee3; padding-bottom: .2em; }
h2 { font-size: 1.25em; margin-top: 1.6em; }
table { border-collapse: collapse; margin: .6em 0 1.2em; font-variant-numeric: tabular-nums; }
th, td { border: 1px solid #d9dee3; padding: .25em .6em; vertical-align: top; }
th { background: #f1f4f7; }
tr:nth-child(even) td { background: #fafbfc; }
code { font-family: ui-monospace, "DejaVu Sans Mono", monospace; background: #f1f4f7; padding: 0 .2em; }
"""


def markdown_html(text: str) -> str:
    """`text` (Markdown) as an HTML fragment. Raw HTML in the text is shown as text, not interpreted: the reports
    quote real texts (misread UI strings such as `<b>Name</b>`), which must neither vanish nor run."""
    md = markdown.Markdown(extensions=["tables"], output_format="html")
    md.preprocessors.deregister("html_block")
    md.inlinePatterns.deregister("html")
    return md.convert(text)


def markdown_page(text: str, title: str) -> str:
    """A standalone HTML page showing the Markdown `text`, titled `title`."""
    return (f'<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n<title>{html.escape(title)}</title>\n'
            f"<style>{STYLE}</style>\n</head>\n<body>\n{markdown_html(text)}\n</body>\n</html>\n")


def write_markdown_page(src: str | os.PathLike, dst: str | os.PathLike) -> None:
    """Write the HTML page of the Markdown report `src` to `dst` (atomically, like every output; UTF-8 whatever the
    locale, as the page declares)."""
    src = Path(src)
    with atomic_path(dst) as tmp:
        tmp.write_text(markdown_page(src.read_text(encoding="utf-8"), src.name), encoding="utf-8")
