"""`python -m pixelpipe.config`: resolve a config, or print the README config table."""

import sys

from .resolve import main

sys.exit(main())
