"""The suite's import layers hold: no edge points up a layer and no import cycle (parsed with ``ast``).

Layers, bottom to top (a module may import its own layer or any layer below; longest prefix wins):

    1 common   2 envs   3 marl.core   4 marl.runs   5 marl.analysis
    6 marl (the package), marl.api, marl.worker   7 probes   8 sweeps   9 cli

An edge is any way a module can load another: ``import`` / ``from ... import`` anywhere in the file
(a function-local import only delays a cycle to the first call), relative imports,
``importlib.import_module`` / ``__import__`` with a constant name, and a string constant that equals a
dotted module name (a table of modules loaded by name, or ``python -m MODULE`` run in a subprocess,
which depends on that module as much as an import does). These are the rules of
/work/shared/tools/import_layers.py but for two things that checker counts and this test does not: a
one-word string (``prog="marl"``, a wandb project "marl") is not the package ``marl``, and
``from pkg import submodule`` is an edge to ``pkg.submodule`` only (Python runs ``pkg/__init__`` first
for ``import pkg.submodule`` too; ``from pkg import attr``, an attribute of the package, is an edge to
``pkg``). Also: ``common`` imports no jax-family package anywhere, library code imports no test or
bench code, and ``import marl_cli.main`` / ``marl --help`` load no jax.
"""

from __future__ import annotations

import ast
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import project_packages

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = project_packages()  # every package of pyproject.toml (each needs a layer below)
LAYERS = {"marl_common": 1, "envs": 2, "marl.core": 3, "marl.runs": 4, "marl.analysis": 5,
          "marl": 6, "marl.api": 6, "marl.worker": 6, "probes": 7, "studies": 8, "sweeps": 9, "marl_cli": 10}
JAX_FAMILY = frozenset({"jax", "jaxlib", "jaxmarl", "flax", "optax", "orbax", "chex", "gymnax", "evosax"})
NOT_LIBRARY = frozenset({"tests", "bench", "notebooks", "docs", "recipes"})  # library code never imports these


# -- the graph -------------------------------------------------------------------------------------

def module_files(root: Path = ROOT, packages=PACKAGES) -> dict[str, Path]:
    """Dotted module name -> file, for every .py file of the packages (``pkg/__init__.py`` is ``pkg``)."""
    out = {}
    for pkg in packages:
        for f in sorted((root / pkg).rglob("*.py")):
            parts = list(f.relative_to(root).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts = parts[:-1]
            out[".".join(parts)] = f
    return out


def _absolute(name: str, is_package: bool, level: int, module: str | None) -> str:
    """``from <level dots><module> import ...`` in module ``name``, as an absolute module name."""
    if not level:
        return module or ""
    anchor = (name if is_package else name.rpartition(".")[0]).split(".")
    anchor = anchor[: len(anchor) - (level - 1)]
    return ".".join(anchor + ([module] if module else []))


def _import_call_target(node: ast.Call, name: str, is_package: bool) -> str | None:
    """The module an ``import_module(...)`` / ``__import__(...)`` call with a constant name loads (a
    relative name resolved against a constant ``package``), else None."""
    fn = node.func
    fname = fn.attr if isinstance(fn, ast.Attribute) else getattr(fn, "id", "")
    if fname not in ("import_module", "__import__") or not node.args or not isinstance(node.args[0], ast.Constant) \
            or not isinstance(node.args[0].value, str):
        return None
    target = node.args[0].value
    if target.startswith("."):  # import_module(".x", package="pkg") / import_module(".x", "pkg")
        pkg = node.args[1] if len(node.args) > 1 else next((k.value for k in node.keywords if k.arg == "package"), None)
        if not (isinstance(pkg, ast.Constant) and isinstance(pkg.value, str)):
            return None
        dots = len(target) - len(target.lstrip("."))
        target = _absolute(pkg.value, True, dots, target.lstrip(".") or None)
    return target


def imported_names(name: str, source: str, is_package: bool = False) -> set[str]:
    """Every name an import statement or an import_module/__import__ call in ``source`` loads, suite or
    not (``from a import b`` gives ``a`` and ``a.b``)."""
    out = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = _absolute(name, is_package, node.level, node.module)
            out.add(base)
            out.update(f"{base}.{a.name}" for a in node.names if a.name != "*")
        elif isinstance(node, ast.Call) and (t := _import_call_target(node, name, is_package)):
            out.add(t)
    return {t for t in out if t}


def imports_of(name: str, source: str, modules: set[str], is_package: bool = False) -> set[str]:
    """The suite's modules (of ``modules``) that ``source``, module ``name``, loads, anywhere in the file.

    ``import a.b``: ``a.b``. ``from a import b``: ``a.b`` when that is a module, else ``a`` (``b`` is an
    attribute of ``a``); relative forms are resolved against ``name``. A name that is not a module is
    cut back to its longest prefix that is (``import a.b.c`` of a module ``a.b``). The parent packages
    Python runs on the way to a module are not edges. ``import_module`` / ``__import__`` with a constant
    name count; so does a string constant that is exactly a dotted module name (a bare word such as
    ``"marl"``, the command's name and a wandb project, is not taken for the package ``marl``)."""
    found = set()

    def add(target: str, exact: bool = False) -> None:
        t = target
        while not exact and t and t not in modules:
            t = t.rpartition(".")[0]
        if t in modules and t != name:
            found.add(t)

    tree = ast.parse(source)
    call_args = {id(a) for node in ast.walk(tree) if isinstance(node, ast.Call)
                 and _import_call_target(node, name, is_package) for a in [*node.args, *(k.value for k in node.keywords)]}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                add(a.name)
        elif isinstance(node, ast.ImportFrom):
            base = _absolute(name, is_package, node.level, node.module)
            for a in node.names:
                add(f"{base}.{a.name}" if f"{base}.{a.name}" in modules else base)
        elif isinstance(node, ast.Call) and (t := _import_call_target(node, name, is_package)):
            add(t)
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and "." in node.value \
                and id(node) not in call_args:
            add(node.value, exact=True)  # a table of modules loaded by name, `python -m MODULE`, ...
    return found


def import_graph(root: Path = ROOT, packages=PACKAGES) -> dict[str, set[str]]:
    files = module_files(root, packages)
    names = set(files)
    return {m: imports_of(m, f.read_text(), names, f.name == "__init__.py") for m, f in files.items()}


def layer_of(module: str) -> int | None:
    """The layer of the longest prefix of LAYERS (whole dotted components) that ``module`` starts with."""
    parts = module.split(".")
    for i in range(len(parts), 0, -1):
        if ".".join(parts[:i]) in LAYERS:
            return LAYERS[".".join(parts[:i])]
    return None


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

    sys.setrecursionlimit(max(sys.getrecursionlimit(), 10_000))
    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def _cycle_path(graph: dict[str, set[str]], comp: list[str]) -> list[str]:
    """One shortest loop through an SCC, for the message: a -> b -> ... -> a."""
    inside, start = set(comp), comp[0]
    prev, queue = {start: None}, [start]
    while queue:
        v = queue.pop(0)
        for w in sorted(graph[v] & inside):
            if w == start:
                path = [v]
                while path[-1] != start:
                    path.append(prev[path[-1]])
                return path[::-1] + [start]
            if w not in prev:
                prev[w] = v
                queue.append(w)
    return comp + [start]


def problems(graph: dict[str, set[str]]) -> list[str]:
    """Every module without a layer, every edge up a layer, every cycle: one line each."""
    out = []
    for m in sorted(graph):
        if layer_of(m) is None:
            out.append(f"no layer: {m}")
        for t in sorted(graph[m]):
            lm, lt = layer_of(m), layer_of(t)
            if lm is not None and lt is not None and lt > lm:
                out.append(f"upward edge: {m} (layer {lm}) imports {t} (layer {lt})")
    for comp in find_cycles(graph):
        out.append(f"import cycle: {' -> '.join(_cycle_path(graph, comp))}  (SCC: {', '.join(comp)})")
    return out


def check_tree(root: Path = ROOT) -> None:
    """Assert the layers and acyclicity of the tree at ``root`` (used on the repo and on planted copies)."""
    found = problems(import_graph(root))
    assert not found, f"{len(found)} import-layer problem(s) under {root}:\n  " + "\n  ".join(found)


def top_level_imports(root: Path, package: str) -> dict[str, set[str]]:
    """Module -> the top-level names of every import statement / import_module call in it (suite or not)."""
    out = {}
    for m, f in module_files(root, (package,)).items():
        out[m] = {t.split(".")[0] for t in imported_names(m, f.read_text(), f.name == "__init__.py")}
    return out


# -- the checker on synthetic sources --------------------------------------------------------------

def test_finder_sees_function_local_relative_importlib_and_string_imports():
    src = ("import a.b\nfrom a import c\nimport importlib\n\ndef f():\n    from . import d\n    from .c import x\n"
           "    importlib.import_module('a.f')\n    __import__('a.g')\n    return {'cmd': 'a.h', 'msg': 'a.nope', 'word': 'a'}\n")
    mods = {"a", "a.b", "a.c", "a.d", "a.e", "a.f", "a.g", "a.h"}
    assert imports_of("a.e", src, mods) == {"a.b", "a.c", "a.d", "a.f", "a.g", "a.h"}
    assert imports_of("a.e", "import importlib\nimportlib.import_module('.b', package='a')\n", mods) == {"a.b"}
    assert imports_of("a.e", "from a import attr\n", mods) == {"a"}  # an attribute of the package a
    assert find_cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert find_cycles({"a": {"b"}, "b": set()}) == []
    assert [layer_of(m) for m in ("marl_common.files", "marl", "marl.core.trainer", "marl.runs", "marl.analysis.x",
                                  "marl.api", "marl.worker.x", "probes", "studies.rules", "sweeps.runner", "marl_cli.main",
                                  "tests.x")] == [1, 6, 3, 4, 5, 6, 6, 7, 8, 9, 10, None]
    assert layer_of("marl.coreX") == 6  # whole components: marl.coreX is under marl, not marl.core


def _synthetic(tmp_path: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(text)
    return tmp_path


def test_checker_catches_a_function_local_upward_edge(tmp_path):
    root = _synthetic(tmp_path, {"marl/__init__.py": "", "marl/core/__init__.py": "", "marl/analysis/__init__.py": "",
                                 "marl/analysis/report.py": "X = 1\n",
                                 "marl/core/thing.py": "def f():\n    from marl.analysis import report\n"})
    found = problems(import_graph(root, ("marl",)))
    assert found == ["upward edge: marl.core.thing (layer 3) imports marl.analysis.report (layer 5)"]
    with pytest.raises(AssertionError, match="upward edge: marl.core.thing"):
        check_tree(root)


def test_checker_catches_an_importlib_cycle(tmp_path):
    root = _synthetic(tmp_path, {"x/__init__.py": "", "x/a.py": "import x.b\n",
                                 "x/b.py": "import importlib\n\ndef f():\n    return importlib.import_module(\"x.a\")\n"})
    graph = import_graph(root, ("x",))
    assert graph["x.b"] == {"x.a"} and find_cycles(graph) == [["x.a", "x.b"]]
    assert any(p.startswith("import cycle: x.a -> x.b -> x.a") for p in problems(graph))


# -- the repository --------------------------------------------------------------------------------

def test_repo_layers_hold_and_there_are_no_cycles():
    graph = import_graph()
    assert "marl.core.trainer" in graph and set(PACKAGES) <= {m.split(".")[0] for m in graph}
    check_tree(ROOT)


def test_library_never_imports_tests_or_bench():
    bad = {m: sorted(ts & NOT_LIBRARY) for p in PACKAGES for m, ts in top_level_imports(ROOT, p).items() if ts & NOT_LIBRARY}
    assert not bad, f"library modules import test/bench code: {bad}"


def test_common_imports_no_jax_family_package():
    bad = {m: sorted(ts & JAX_FAMILY) for m, ts in top_level_imports(ROOT, "marl_common").items() if ts & JAX_FAMILY}
    assert not bad, f"common must not import jax-family packages (anywhere in the file): {bad}"
    code = ("import sys, pkgutil, importlib, marl_common as common\n"
            "for m in pkgutil.walk_packages(common.__path__, 'marl_common.'): importlib.import_module(m.name)\n"
            f"print(sorted({{n.split('.')[0] for n in sys.modules}} & {set(JAX_FAMILY)!r}))")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip() == "[]", f"importing every common module loads {out.stdout.strip()}"


def _jax_family_imported(cmd: list[str], codes=(0,)) -> list[str]:
    """Run ``cmd`` with -X importtime (PYTHONPROFILEIMPORTTIME) and list the jax-family packages it imported
    (it must end with one of ``codes``)."""
    env = {**os.environ, "PYTHONPROFILEIMPORTTIME": "1",
           "PYTHONPATH": os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p)}
    out = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert out.returncode in codes, out.stderr[-3000:]
    mods = {ln.rsplit("|", 1)[-1].strip().split(".")[0] for ln in out.stderr.splitlines() if ln.startswith("import time:")}
    assert "marl_cli" in mods, out.stderr[-2000:]  # the profile is there
    return sorted(mods & JAX_FAMILY)


@pytest.mark.slow
def test_cli_import_and_help_load_no_jax():
    """``import marl_cli.main`` plus building the parser, and ``marl --help`` (the installed script, else
    ``python -m marl_cli.main --help``), import no jax-family package: help must stay fast."""
    found = {"import marl_cli.main; make_parser()": _jax_family_imported(
        [sys.executable, "-c", "import marl_cli.main; marl_cli.main.make_parser()"])}
    script = Path(sys.executable).with_name("marl")
    help_cmd = [str(script), "--help"] if script.exists() else [sys.executable, "-m", "marl_cli.main", "--help"]
    found["marl --help"] = _jax_family_imported(help_cmd)
    assert not any(found.values()), f"jax-family packages imported: {found}"


@pytest.mark.slow
def test_commands_that_compute_nothing_load_no_jax():
    """``marl envs``, ``marl config show`` and a config typo's one-line error read the environments as data
    (``envs.catalog``) and import no jax-family package (jaxmarl included): they answer in about a second."""
    script = Path(sys.executable).with_name("marl")
    base = [str(script)] if script.exists() else [sys.executable, "-m", "marl_cli.main"]
    found = {" ".join(argv): _jax_family_imported(base + argv, codes=(0, 2))
             for argv in (["envs"], ["config", "show", "--env", "mpe:simple_spread"], ["train", "lrr=1e-3"],
                          ["train", "--env", "smax:3mm"])}
    assert not any(found.values()), f"jax-family packages imported: {found}"


@pytest.mark.slow
def test_planning_a_sweep_or_a_studys_status_loads_no_jax(tmp_path):
    """``marl sweep FILE --dry-run`` and ``marl study FILE --status`` plan the runs, their fused groups and the
    probe jobs (alpha grids and batch memory checked) and import no jax-family package: about 0.7 s, against
    about 5 s when planning imported the probe programs and the trainer for two checks (session 28)."""
    base = [sys.executable, "-m", "marl_cli.main"]
    out = str(tmp_path / "o")
    found = {"sweep --dry-run": _jax_family_imported(base + ["sweep", "sweeps/connectivity_3maps.toml", "--out", out,
                                                              "--dry-run"]),
             "study --status": _jax_family_imported(base + ["study", "studies/declared/connectivity_3maps.toml",
                                                            "--out", out, "--status"])}
    assert not any(found.values()), f"jax-family packages imported: {found}"
    assert not (tmp_path / "o").exists()


# -- the checker on a planted copy of this repository ----------------------------------------------

def copy_tree(dest: Path) -> Path:
    """The .py files of the suite's packages, copied to ``dest``."""
    for pkg in PACKAGES:
        for f in (ROOT / pkg).rglob("*.py"):
            (dest / f.relative_to(ROOT)).parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(f, dest / f.relative_to(ROOT))
    return dest


def plant(root: Path) -> None:
    """An upward, function-local edge (marl.core.trainer -> marl.analysis.report) and an importlib cycle
    (marl_common.files -> marl_common.stats by importlib inside a function; marl_common.stats -> marl_common.files)."""
    with (root / "marl" / "core" / "trainer.py").open("a") as f:
        f.write("\n\ndef _planted():\n    from marl.analysis import report\n    return report\n")
    with (root / "marl_common" / "files.py").open("a") as f:
        f.write("\n\ndef _planted():\n    import importlib\n    return importlib.import_module(\"marl_common.stats\")\n")
    with (root / "marl_common" / "stats.py").open("a") as f:
        f.write("\n\ndef _planted():\n    from marl_common import files\n    return files\n")


def test_planted_edge_and_cycle_in_a_copy_of_the_repo_fail(tmp_path):
    root = copy_tree(tmp_path / "repo")
    before = set(problems(import_graph(root)))  # whatever the tree has today (must be none: see above)
    plant(root)
    new = [p for p in problems(import_graph(root)) if p not in before]
    assert "upward edge: marl.core.trainer (layer 3) imports marl.analysis.report (layer 5)" in new
    assert any(p.startswith("import cycle: marl_common.files -> marl_common.stats -> marl_common.files") for p in new), new
    with pytest.raises(AssertionError) as e:
        check_tree(root)
    assert "marl.analysis.report" in str(e.value) and "marl_common.files -> marl_common.stats" in str(e.value)
