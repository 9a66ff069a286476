"""`python -m pixelpipe.config`: resolve a config, or print the README config table (`--markdown`) or rewrite it in
the README (`--update-readme README.md`), from schema.yaml and profiles.yaml."""

import sys

from .resolve import main

sys.exit(main())
