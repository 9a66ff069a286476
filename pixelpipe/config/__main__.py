"""`python -m pixelpipe.config`: resolve a config, or print the README config table."""

from .resolve import main

main()
