"""The one exception type for bad user input anywhere in the suite, and how a command ends.

Raised with a one-line message that says what is wrong and what to do; the `marl` command prints
it without a traceback and exits non-zero (``run_guarded``).
"""

from __future__ import annotations

EXIT_USER = 2  # bad input, an interruption, a full disk: one line saying what to do
EXIT_INTERNAL = 70  # an unexpected error (EX_SOFTWARE): one line and a log file with the traceback
EXIT_PIPE = 141  # standard output closed by its reader (`marl eval RUN | head -1`): 128 + SIGPIPE, as a shell reports git's


TRUE_WORDS = frozenset({"1", "true", "yes", "on", "t", "y"})
FALSE_WORDS = frozenset({"0", "false", "no", "off", "f", "n", ""})


def parse_bool(value) -> bool | None:
    """The one reading of a yes/no word (config values, ``--set k=v``, environment variables): a bool as
    itself; ``1 true yes on t y`` (any case, spaces around) True; ``0 false no off f n`` and the empty
    string False; anything else None (the caller says what is wrong)."""
    if isinstance(value, bool):
        return value
    s = str(value).strip().lower()
    return True if s in TRUE_WORDS else False if s in FALSE_WORDS else None


def closest(word, choices, n: int = 1, cutoff: float = 0.6) -> list[str]:
    """Up to ``n`` of ``choices`` closest to ``word`` (difflib ratio >= ``cutoff``), best first."""
    import difflib

    return difflib.get_close_matches(str(word), [str(c) for c in choices], n=n, cutoff=cutoff)


def did_you_mean(word, choices, listing: str | None = None, *, n: int = 1, cutoff: float = 0.6,
                 quote: bool = True, otherwise: str = "") -> str:
    """The one did-you-mean: ``"; did you mean 'X'?"`` for the closest of ``choices`` (up to ``n``, difflib
    ratio >= ``cutoff``; names quoted with repr unless ``quote`` is False); with no close match
    ``" (LISTING: a, b, ...)"`` when ``listing`` names the choices, else ``otherwise``."""
    choices = [str(c) for c in choices]
    close = closest(word, choices, n, cutoff)
    if close:
        return f"; did you mean {', '.join(repr(c) if quote else c for c in close)}?"
    if listing and choices:
        return f" ({listing}: {', '.join(choices)})"
    return otherwise


class UserError(Exception):
    """Bad input from a user: unknown name, bad config value, incompatible or missing checkpoint."""


class Interrupted(UserError):
    """The command was stopped (Ctrl-C, SIGTERM); the message says how to go on."""


class _Terminated(KeyboardInterrupt):
    """The stop a SIGTERM raises in a command: handled as Ctrl-C is (one line, exit 2)."""


def _interrupt(signum, frame):
    raise _Terminated


def _redeliver_dropped_stop(previous):
    """An unraisable hook: Python drops an exception raised where it cannot propagate (a garbage-collection
    callback, ``__del__``: "Exception ignored in ..."), so a SIGTERM landing there would leave the command
    running. This hook reports other dropped errors as ``previous`` does (a dropped stop, SIGTERM's or
    Ctrl-C's, is not printed: no traceback for a stop); when the dropped exception was SIGTERM's stop, it sends
    SIGTERM again from a thread a moment later (sent from the hook itself, the handler would raise inside the
    hook, where it is dropped too), so that it lands where it propagates (the training loop has its own check,
    ``_StopOnTerm``)."""
    import os
    import signal
    import threading

    def hook(unraisable):
        if not isinstance(unraisable.exc_value, KeyboardInterrupt):
            previous(unraisable)
        # a stop (SIGTERM, Ctrl-C) dropped where it landed is no error of the program: no traceback
        if isinstance(unraisable.exc_value, _Terminated):
            again = threading.Timer(0.05, os.kill, (os.getpid(), signal.SIGTERM))
            again.daemon = True
            again.start()

    return hook


def _disk_full(e: BaseException) -> bool:
    import errno

    text = str(e)
    return (isinstance(e, OSError) and e.errno == errno.ENOSPC) or "No space left on device" in text or \
        ("RESOURCE_EXHAUSTED" in text and "Error writing" in text)


def _first_line(e: BaseException, width: int = 160) -> str:
    text = str(e).strip()
    return (text.splitlines()[0][:width] if text else type(e).__name__)


def explain(e: BaseException) -> str | None:
    """The one line for an error that is the machine's, not the program's (a full disk, an output
    place that cannot be written, a device out of memory); None for anything else."""
    if _disk_full(e):
        where = getattr(e, "filename", None)
        return (f"the disk is full{f' (writing {where})' if where else ''}: free some space (or pick an --out "
                f"on another disk) and run the command again; a training run resumes from its last checkpoint")
    if isinstance(e, OSError) and getattr(e, "filename", None) and e.strerror:
        return f"{e.filename}: {e.strerror}; check the path and its permissions"
    if "RESOURCE_EXHAUSTED" in str(e):
        return f"out of memory ({_first_line(e)}); make the run, batch or --episodes smaller"
    return None


def reopen_closed_streams() -> None:
    """Standard streams the caller closed (``marl ... >&-``) reopened on the null device, so that output and
    the error line go nowhere instead of raising, and no file opened later takes descriptor 0, 1 or 2 (a
    child process would write into it)."""
    import os
    import sys

    for fd in (0, 1, 2):
        try:
            os.fstat(fd)
        except OSError:
            null = os.open(os.devnull, os.O_RDWR)
            if null != fd:
                os.dup2(null, fd)
                os.close(null)
    for name, mode in (("stdin", "r"), ("stdout", "w"), ("stderr", "w")):
        if getattr(sys, name) is None:
            setattr(sys, name, open(os.devnull, mode))
        if getattr(sys, f"__{name}__") is None:  # a library may reset sys.stdout to sys.__stdout__ (jaxmarl does)
            setattr(sys, f"__{name}__", getattr(sys, name))


def _silence_stdout() -> None:
    """After a broken pipe: standard output goes to the null device, so that nothing (the interpreter's
    last flush included) writes to the closed pipe again."""
    import os
    import sys

    try:
        null = os.open(os.devnull, os.O_WRONLY)
        os.dup2(null, sys.stdout.fileno())
        os.close(null)
    except (OSError, ValueError, AttributeError):
        pass


def _flush_all() -> None:
    import sys

    for s in (sys.stdout, sys.stderr):
        try:
            if s is not None:
                s.flush()
        except (OSError, ValueError):
            pass


def _crash_report(prog: str, e: BaseException) -> str:
    """Write the traceback to a log file; the one line that names the error and the file."""
    import os
    import tempfile
    import time
    import traceback

    text = "".join(traceback.format_exception(e))
    try:
        fd, path = tempfile.mkstemp(prefix=f"{prog}-crash-{time.strftime('%Y%m%d-%H%M%S')}-", suffix=".log")
        with os.fdopen(fd, "w") as f:
            f.write(text)
    except OSError:
        path = None
    where = f"the traceback is in {path}" if path else "the traceback could not be saved"
    return (f"internal error: {type(e).__name__}: {_first_line(e, 120)}; {where}: please report it with that file "
            f"(MARL_DEBUG=1 prints it here)")


def run_guarded(prog: str, fn, *args, hard_exit: bool = False) -> int:
    """Call ``fn(*args)`` as a command: its return value is the exit code.

    A UserError, an interruption (Ctrl-C or SIGTERM), a full disk, an unwritable path or an
    out-of-memory inside a compiled program prints one line ``PROG: error: ...`` on stderr and returns
    2; standard output closed by its reader (a broken pipe) ends quietly with ``EXIT_PIPE`` (141, as a
    shell reports ``git log | head -1``); closed standard streams are reopened on the null device; any
    other exception prints one line naming it and a log file holding the traceback, and returns
    70 (``MARL_DEBUG=1`` re-raises it instead). ``hard_exit`` (a process of its own, not a library
    call): after an interruption or an error the process ends at once with that code (``os._exit``),
    so no background thread of XLA or orbax prints at interpreter shutdown; after success, Ctrl-C and
    SIGTERM are ignored while the interpreter shuts down. Used by the ``marl`` command
    and the sweep worker (``marl.worker``)."""
    import os
    import signal
    import sys
    import warnings

    reopen_closed_streams()
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    warnings.filterwarnings("ignore", message="coroutine .* was never awaited", category=RuntimeWarning)
    debug = parse_bool(os.environ.get("MARL_DEBUG", "")) is not False
    old = signal.signal(signal.SIGTERM, _interrupt)  # SIGTERM stops like Ctrl-C: one line, exit 2
    old_hook = sys.unraisablehook
    sys.unraisablehook = _redeliver_dropped_stop(old_hook)
    code = None
    try:
        code = fn(*args)
        if sys.stdout is not None:
            sys.stdout.flush()  # here, where a closed pipe is caught, not at interpreter shutdown
        return code
    except UserError as e:
        print(f"{prog}: error: {e}", file=sys.stderr)
        code = EXIT_USER
        return code
    except BrokenPipeError:  # the reader of our output has gone: nothing to say, and no one to say it to
        _silence_stdout()
        code = EXIT_PIPE
        return code
    except KeyboardInterrupt:  # outside a training loop (which says how to resume)
        print(f"{prog}: error: interrupted", file=sys.stderr)
        code = EXIT_USER
        return code
    except Exception as e:
        if debug:
            raise
        line = explain(e)
        print(f"{prog}: error: {line or _crash_report(prog, e)}", file=sys.stderr)
        code = EXIT_USER if line else EXIT_INTERNAL
        return code
    finally:
        signal.signal(signal.SIGTERM, old)
        sys.unraisablehook = old_hook
        if hard_exit:  # the command is over: a late Ctrl-C / SIGTERM must not print a traceback at shutdown
            signal.signal(signal.SIGINT, signal.SIG_IGN)
            signal.signal(signal.SIGTERM, signal.SIG_IGN)
            if code not in (None, 0):
                _flush_all()
                os._exit(code)

