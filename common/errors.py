"""The one exception type for bad user input anywhere in the suite.

Raised with a one-line message that says what is wrong and what to do; the `marl` command prints
it without a traceback and exits non-zero.
"""


class UserError(Exception):
    """Bad input from a user: unknown name, bad config value, incompatible or missing checkpoint."""
