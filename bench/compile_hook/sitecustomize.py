"""Imported by every Python process started with this folder on PYTHONPATH (``bench/compile_count.py`` puts it
there): when ``MARL_COMPILE_LOG_DIR`` is set, JAX's own compile log (``jax_log_compiles``: "Finished XLA
compilation of NAME in S sec", and "Persistent compilation cache hit for NAME") goes, one JSON line a record,
to ``MARL_COMPILE_LOG_DIR/<pid>.jsonl`` (with the process's command line), so that the programs compiled by a
command and every subprocess it starts (sweep workers, probe jobs) are counted from one folder. No jax here:
only a handler on the ``jax`` logger, which JAX's loggers propagate to."""

import os

if os.environ.get("MARL_COMPILE_LOG_DIR"):
    import json
    import logging
    import re
    import sys
    import time

    _FINISHED = re.compile(r"Finished XLA compilation of (.+) in ([0-9.e+-]+) sec")
    _HIT = re.compile(r"Persistent compilation cache hit for '([^']+)'")

    class _CompileLog(logging.Handler):
        def __init__(self, folder: str):
            super().__init__(logging.DEBUG)
            self.folder = folder

        def emit(self, record):
            msg = record.getMessage()
            m = _FINISHED.search(msg)
            row = ({"event": "compile", "name": m.group(1), "secs": float(m.group(2))} if m else
                   {"event": "hit", "name": h.group(1)} if (h := _HIT.search(msg)) else None)
            if row is None:
                return
            row.update(pid=os.getpid(), thread=record.thread, t=time.time(), argv=sys.argv[:8])
            with open(os.path.join(self.folder, f"{os.getpid()}.jsonl"), "a") as f:  # one line a write: lines of a process stay whole
                f.write(json.dumps(row) + "\n")

    os.makedirs(os.environ["MARL_COMPILE_LOG_DIR"], exist_ok=True)
    _logger = logging.getLogger("jax")
    _logger.addHandler(_CompileLog(os.environ["MARL_COMPILE_LOG_DIR"]))
    os.environ.setdefault("JAX_LOG_COMPILES", "1")
