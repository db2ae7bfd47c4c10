"""The one exception type for bad user input anywhere in the suite.

Raised with a one-line message that says what is wrong and what to do; the `marl` command prints
it without a traceback and exits non-zero.
"""


class UserError(Exception):
    """Bad input from a user: unknown name, bad config value, incompatible or missing checkpoint."""


def _interrupt(signum, frame):
    raise KeyboardInterrupt


def run_guarded(prog: str, fn, *args) -> int:
    """Call ``fn(*args)`` as a command: its return value is the exit code; a UserError, an interruption
    (Ctrl-C or SIGTERM) or an out-of-memory inside a compiled program prints one line ``PROG: error: ...``
    on stderr and returns 2. Used by the ``marl`` command and the sweep worker (``marl.worker``)."""
    import os
    import signal
    import sys

    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    old = signal.signal(signal.SIGTERM, _interrupt)  # SIGTERM stops like Ctrl-C: one line, exit 2
    try:
        return fn(*args)
    except UserError as e:
        print(f"{prog}: error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:  # outside a training loop (which says how to resume)
        print(f"{prog}: error: interrupted", file=sys.stderr)
        return 2
    except Exception as e:  # the backstop for running out of memory inside a compiled program
        if "RESOURCE_EXHAUSTED" not in str(e):
            raise
        print(f"{prog}: error: out of memory ({str(e).splitlines()[0][:160]}); make the run, batch or "
              f"--episodes smaller", file=sys.stderr)
        return 2
    finally:
        signal.signal(signal.SIGTERM, old)
