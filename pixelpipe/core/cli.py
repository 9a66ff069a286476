"""What every `python -m pixelpipe.*` command shares: a mistake on its command line or in its config is one line on
stderr and exit status 2, never a usage block or a traceback (the user reads the line, not our call stack)."""

from __future__ import annotations

import argparse
import sys
from typing import NoReturn

EXIT_USAGE = 2  # argparse's own status for a bad command line; the commands use it for a bad config too


class UserError(ValueError):
    """A mistake in what the user gave (a config, a corpus file) whose message names the file and the key to change:
    reported in one line wherever it surfaces, a command or a workflow job, never with a traceback."""


class ArgumentParser(argparse.ArgumentParser):
    """argparse whose errors are one line, `error: <what> (see <prog> --help)`, where argparse prints the whole
    usage first: with a dozen options the line that says what is wrong scrolls out of sight."""

    def error(self, message: str) -> NoReturn:
        self.exit(EXIT_USAGE, f"error: {message} (see {self.prog} --help)\n")


def fail(message: str) -> int:
    """Print `message` as the command's one error line on stderr; the exit status to return."""
    sys.stdout.flush()
    print(message if message.startswith(("error:", "pixelpipe:")) else f"error: {message}", file=sys.stderr)
    return EXIT_USAGE
