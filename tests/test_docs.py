"""The README's config table is generated from the schema and the hardware profiles; keep them in sync."""

import re
from pathlib import Path

from pixelpipe.config.resolve import schema_markdown

README = Path(__file__).resolve().parents[1] / "README.md"


def test_readme_config_table_matches_schema_and_profiles():
    text = README.read_text()
    m = re.search(r"<!-- config-table:start -->\n(.*?)\n<!-- config-table:end -->", text, re.S)
    assert m, "README lacks the config-table markers"
    assert m.group(1).strip() == schema_markdown().strip(), (
        "README config table is stale: regenerate with `python -m pixelpipe.config --update-readme README.md`")


def test_readme_quick_start_lines():
    text = README.read_text()
    assert "pip install -r requirements.txt && snakemake --cores 4 train" in text
    assert "pip install -r requirements.txt && pytest" in text
