"""Every public function, class and method of the library has a docstring, and the lazy names of
``marl.analysis.search`` resolve.

Public: no leading underscore. Only what a module defines counts (``obj.__module__ == module.__name__``), not
what it imports; a method counts when its class defines it (``vars(cls)``). A dataclass or namedtuple
without a docstring gets a generated one (``Name(field, ...)``): that counts as missing.
"""

from __future__ import annotations

import importlib
import inspect
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# packages (recursively) and single modules whose public names must be documented
SCOPE = ("marl_common", "envs", "marl/core", "marl/runs", "marl/analysis", "marl/api.py", "marl/worker.py", "probes",
         "studies", "sweeps", "marl_cli")


def module_names(root: Path = ROOT, scope=SCOPE) -> list[str]:
    """Dotted names of every .py file in ``scope`` (``pkg/__init__.py`` is ``pkg``)."""
    files = []
    for s in scope:
        p = root / s
        files += sorted(p.rglob("*.py")) if p.is_dir() else [p]
    out = []
    for f in files:
        parts = list(f.relative_to(root).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out.append(".".join(parts))
    return list(dict.fromkeys(out))


def _undocumented(obj) -> bool:
    doc = obj.__dict__.get("__doc__") if inspect.isclass(obj) else getattr(obj, "__doc__", None)
    if not doc or not doc.strip():
        return True
    # the docstring dataclasses / namedtuple generate for a class that has none: "Name(a, b: int = 0)"
    return inspect.isclass(obj) and doc.startswith(f"{obj.__name__}(") and doc.rstrip().endswith(")") \
        and "\n" not in doc.strip()


def _function(member):
    """The function behind a class member (plain, static, class method or property), else None."""
    if isinstance(member, (staticmethod, classmethod)):
        member = member.__func__
    elif isinstance(member, property):
        member = member.fget
    return member if inspect.isfunction(member) else None


def missing_docstrings(module) -> list[str]:
    """``module.name`` / ``module.Class.method`` for each public name defined in ``module`` without a docstring."""
    out = []
    for name, obj in sorted(vars(module).items()):
        if name.startswith("_") or not (inspect.isfunction(obj) or inspect.isclass(obj)) \
                or getattr(obj, "__module__", None) != module.__name__:
            continue
        if _undocumented(obj):
            out.append(f"{module.__name__}.{name}")
        if inspect.isclass(obj):
            for mname, member in sorted(vars(obj).items()):
                fn = _function(member)
                if mname.startswith("_") or fn is None or fn.__module__ != module.__name__ \
                        or fn.__qualname__ != f"{obj.__qualname__}.{fn.__name__}" or fn.__name__ != mname:
                    continue  # not a method the class defines (e.g. a field's default, a lambda)
                if _undocumented(fn):
                    out.append(f"{module.__name__}.{name}.{mname}")
    return out


def test_every_public_function_class_and_method_has_a_docstring():
    names = module_names()
    assert {"marl_cli.main", "marl.api", "marl.worker", "marl.analysis.search.loop", "probes.api", "sweeps.runner",
            "envs", "marl_common.files"} <= set(names)
    missing = [m for name in names for m in missing_docstrings(importlib.import_module(name))]
    assert not missing, f"{len(missing)} public name(s) without a docstring:\n  " + "\n  ".join(missing)


def test_the_check_sees_a_missing_docstring(monkeypatch):
    import sys
    import types

    mod = types.ModuleType("planted")
    monkeypatch.setitem(sys.modules, "planted", mod)  # dataclasses look their module up
    exec("import dataclasses\n"
         "def f():\n    pass\n"
         "def g():\n    '''Documented.'''\n"
         "def _private():\n    pass\n"
         "@dataclasses.dataclass\nclass D:\n    x: int = 0\n    fn: object = lambda: 0\n"
         "    def m(self):\n        pass\n"
         "    @property\n    def p(self):\n        return 1\n"
         "class C:\n    '''Documented.'''\n    def ok(self):\n        '''Documented.'''\n", mod.__dict__)
    assert missing_docstrings(mod) == ["planted.D", "planted.D.m", "planted.D.p", "planted.f"]


def test_every_name_of_the_search_package_resolves():
    import marl.analysis.search as search

    unresolved = []
    for name in search.__all__:
        try:
            getattr(search, name)
        except AttributeError:
            unresolved.append(name)
    assert not unresolved, f"marl.analysis.search.__all__ names that do not resolve: {unresolved}"
    assert len(set(search.__all__)) == len(search.__all__), "duplicate names in marl.analysis.search.__all__"
