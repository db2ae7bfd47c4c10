"""Build the HTML API reference from the docstrings with pdoc (``pip install -e '.[dev]'``).

    python docs/build_api.py [OUT]     # default docs/api-html/ (git-ignored); open OUT/index.html

pdoc imports every module of the public packages (``envs`` prints jaxmarl's import lines). Any pdoc
warning (a module that fails to import, a name in ``__all__`` that does not resolve, ...) fails the
build: the reference never silently misses a module. Exit status 0 on success, 1 on warnings.
"""

from __future__ import annotations

import importlib
import pkgutil
import sys
import warnings
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("marl_common", "envs", "marl", "probes", "studies", "sweeps", "marl_cli")


def _resolve_lazy_names() -> None:
    """Packages that load names on first use (a module ``__getattr__`` for names listed in ``__all__``,
    so that importing them imports no jax) get those names bound, so pdoc finds and documents them."""
    for pkg in PACKAGES:
        mod = importlib.import_module(pkg)
        for info in pkgutil.walk_packages(mod.__path__, f"{pkg}."):
            if not info.ispkg:
                continue
            sub = importlib.import_module(info.name)
            for name in getattr(sub, "__all__", ()):
                if name not in vars(sub) and hasattr(sub, "__getattr__"):
                    setattr(sub, name, getattr(sub, name))


def build(out: str | Path) -> list[str]:
    """Write the reference into ``out``; returns pdoc's warnings (empty when the build is clean)."""
    import pdoc
    import pdoc.render

    sys.path.insert(0, str(ROOT))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        _resolve_lazy_names()
        pdoc.render.configure(docformat="restructuredtext", search=False)
        pdoc.pdoc(*PACKAGES, output_directory=Path(out))
    return [str(w.message) for w in caught if w.category is not DeprecationWarning]


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    out = Path(argv[0] if argv else ROOT / "docs" / "api-html").resolve()
    problems = build(out)
    for p in problems:
        print(f"pdoc: {p}", file=sys.stderr)
    if problems:
        print(f"API reference: {len(problems)} warning(s); fix them (see above)", file=sys.stderr)
        return 1
    print(f"wrote {out / 'index.html'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
