"""No import cycles among the suite's modules, function-local imports included (parsed with ``ast``).

A function-local import only delays a cycle to the first call; every import statement anywhere in a
module of envs, marl, probes or sweeps is an edge here.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("envs", "marl", "probes", "sweeps")


def module_files(root: Path = ROOT) -> dict[str, Path]:
    """Dotted module name -> file, for every .py file of the packages (``pkg/__init__.py`` is ``pkg``)."""
    out = {}
    for pkg in PACKAGES:
        for f in sorted((root / pkg).rglob("*.py")):
            parts = list(f.relative_to(root).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts = parts[:-1]
            out[".".join(parts)] = f
    return out


def imports_of(name: str, source: str, modules: set[str], is_package: bool = False) -> set[str]:
    """The suite's modules that ``source`` (module ``name``) imports, anywhere in the file.

    ``import a.b`` and ``from a.b import c`` import ``a.b``; ``from a import b`` imports ``a.b`` when
    that is a module, else ``a``. Relative imports are resolved against ``name``."""
    found = set()
    package = name if is_package else name.rpartition(".")[0]
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")
                anchor = anchor[: len(anchor) - (node.level - 1)]
                base = ".".join(anchor + ([base] if base else []))
            targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in modules else base for a in node.names]
        else:
            continue
        found.update(t for t in targets if t in modules and t != name)
    return found


def find_cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan), each as a sorted list."""
    index, low, stack, on, out = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def import_graph(root: Path = ROOT) -> dict[str, set[str]]:
    files = module_files(root)
    names = set(files)
    return {m: imports_of(m, f.read_text(), names, f.name == "__init__.py") for m, f in files.items()}


def test_finder_sees_function_local_and_relative_imports():
    src = "import a.b\nfrom a import c\n\ndef f():\n    from . import d\n    from .c import x\n"
    mods = {"a", "a.b", "a.c", "a.d", "a.e"}
    assert imports_of("a.e", src, mods) == {"a.b", "a.c", "a.d"}
    assert find_cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert find_cycles({"a": {"b"}, "b": set()}) == []


def test_no_import_cycles():
    graph = import_graph()
    assert "marl.core.trainer" in graph and "probes" in {m.split(".")[0] for m in graph}
    cycles = find_cycles(graph)
    assert not cycles, "import cycles: " + "; ".join(" <-> ".join(c) for c in cycles)
