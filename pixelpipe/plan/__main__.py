"""`python -m pixelpipe.plan`: the plan of a config as a table (or JSON) and the disk check."""

import sys

from .cli import main

sys.exit(main())
