"""Help that documents itself: every option's help ends with its default, across all subcommands."""

from __future__ import annotations

import argparse


class DefaultsFormatter(argparse.HelpFormatter):
    """Appends ``(default: X)`` to an option's help when it has a meaningful default (not None/False/[])
    and the help does not already state one (``"(default)"``, ``"(default: ...)"``)."""

    def _get_help_string(self, action):
        text = action.help or ""
        default = action.default
        if "(default" in text or default in (None, False, argparse.SUPPRESS) or default == [] or \
                isinstance(action, (argparse._HelpAction, argparse._SubParsersAction)):
            return text
        if isinstance(default, (list, tuple)):
            return f"{text} (default: {' '.join(map(str, default))})"
        return f"{text} (default: %(default)s)"


def parsers(parser: argparse.ArgumentParser):
    """The parser and every subcommand parser below it (depth first)."""
    yield parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in dict.fromkeys(action.choices.values()):
                yield from parsers(sub)


def document(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """Give every parser of the command the defaults-showing formatter (parsers made in any module)."""
    for p in parsers(parser):
        p.formatter_class = DefaultsFormatter
    return parser
