"""Snakemake's HTML report: a landing page, categories numbered without gaps, and every Markdown report shown as an
HTML page (a browser shows Markdown in the report only as a download link)."""

from __future__ import annotations

import base64
import json
import re
from pathlib import Path

import pytest

from pixelpipe.report.html import markdown_html, write_markdown_page
from tests.workflow_utils import snakemake

ROOT = Path(__file__).resolve().parents[1]
CATEGORY = re.compile(r'category="(\d+)\. ([^"]+)"')
PAGES = {"summary.html", "memory.html", "time.html", "deploy.html", "evaluation.html"}


def test_markdown_tables_become_html_tables():
    html = markdown_html("# Time\n\n| stage | wall |\n|---|---:|\n| corpus/all | 1.06 s |\n\n- **bold** `code`\n")
    assert "<h1>Time</h1>" in html
    assert re.search(r"<table>.*<th>stage</th>.*<td>corpus/all</td>.*"
                     r'<td style="text-align: right;">1.06 s</td>.*</table>', html, re.S)
    assert "<strong>bold</strong>" in html and "<code>code</code>" in html


def test_raw_html_in_a_report_is_shown_as_text():
    """Reports quote real texts (UI strings with markup): they must show as written, and never run."""
    html = markdown_html("| misread | as |\n|---|---|\n| <b>Name</b> | <20 |\n\n<script>alert(1)</script>\n")
    assert "&lt;b&gt;Name&lt;/b&gt;" in html and "&lt;20" in html
    assert "<script>" not in html and "&lt;script&gt;" in html


def test_page_is_standalone_utf8_html(tmp_path):
    src = tmp_path / "summary.md"
    src.write_text("# Summary\n\nerror ±15 % ⚠\n", encoding="utf-8")
    write_markdown_page(src, tmp_path / "summary.html")
    page = (tmp_path / "summary.html").read_text(encoding="utf-8")
    assert page.startswith("<!DOCTYPE html>") and '<meta charset="utf-8">' in page
    assert "<title>summary.md</title>" in page and "±15 % ⚠" in page
    assert "<link" not in page and "src=" not in page  # nothing to fetch: the report embeds it as a data: URI
    assert sorted(p.name for p in tmp_path.iterdir()) == ["summary.html", "summary.md"]  # no temporary left


def declared_categories() -> dict[int, set[str]]:
    """Category number -> names, over every report() marker in the rules."""
    found: dict[int, set[str]] = {}
    for smk in ROOT.glob("rules/*.smk"):
        for number, name in CATEGORY.findall(smk.read_text()):
            found.setdefault(int(number), set()).add(name)
    return found


def test_report_categories_are_numbered_without_gaps():
    found = declared_categories()
    assert sorted(found) == list(range(1, len(found) + 1)), f"category numbers {sorted(found)}"
    assert all(len(names) == 1 for names in found.values()), f"one name per number: {found}"
    # the optimization matrix is a separate target: last, so the default target's report has no gap either
    assert found[max(found)] == {"Optimization matrix"}


def report_variable(html: str, name: str):
    """A JSON value the Snakemake HTML report embeds as `<script id="name">var name = ...;` (ids use dashes)."""
    m = re.search(rf'<script id="{name.replace("_", "-")}">\s*var {name} = ', html)
    return json.JSONDecoder().raw_decode(html, m.end())[0]


@pytest.mark.slow
def test_report_command_needs_no_cores_and_shows_every_report_as_html(tiny_workdir, tmp_path):
    """`snakemake --report results/report.html`, as the README writes it (no --cores), on the tiny run."""
    out = tmp_path / "report.html"
    snakemake(tiny_workdir, "--report", str(out), cores=None)
    html = out.read_text(encoding="utf-8")
    assert list(sorted(report_variable(html, "categories"))) == [
        "1. Summary", "2. Memory and disk", "3. Time", "4. Training", "5. Deployment", "6. Held-out real text"]
    landing = report_variable(html, "workflow_desc")
    assert "pixelpipe turns a labelled text corpus" in landing and "hardware profile" in landing
    results = report_variable(html, "results")
    assert not [k for k, r in results.items() if r["mime_type"] not in ("text/html", "image/png")]
    pages = {Path(k).name: r for k, r in results.items() if r["mime_type"] == "text/html"}
    assert set(pages) == PAGES
    for name, record in pages.items():
        page = base64.b64decode(record["data_uri"].split("base64,", 1)[1]).decode("utf-8")
        assert "<table>" in page and "<h1>" in page, name
    deploy = base64.b64decode(pages["deploy.html"]["data_uri"].split("base64,", 1)[1]).decode("utf-8")
    assert "ONNX int8" in deploy  # the deploy benchmark's own table
