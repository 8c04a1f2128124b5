"""The import graph keeps the one-way flow the folders show, read from the source with ``ast`` (no module is imported).

The rules, checked on every module under ``src/openqna``:

1. **Layers, by folder.**  A module imports only from its own layer or a lower one:

   ====  ==========  ==========================================================================
   4     surfaces    ``api/``, ``cli/``, ``server.py``, ``evaluation/`` (the quality harness
                     drives ``Service`` as the CLI does)
   3     core        ``kb/`` (the use cases), ``kinds/`` (knowledge bases with state of their
                     own), ``auth/`` (keys, roles, bearer tokens)
   2     components  ``index/``, ``answers/``, ``ranking/``, ``ingest/``, ``formats/``,
                     ``training/`` (a project's trained query adapter)
   1     seams       ``models/``, ``store/``, ``connected/`` (the user's own engines)
   0     foundation  ``openqna`` itself, ``records``, ``settings``, ``clock``, ``turns``,
                     ``strict_json`` and the filter language ``filters/``: plain data and
                     configuration that every layer may import (a filter is data that surfaces
                     parse, indexes evaluate and stores compile to SQL; JSON is read as text the
                     same way by surfaces, file formats and the stores' migrations)
   ====  ==========  ==========================================================================

2. **Siblings stay apart.**  Within a layer a package imports another package of that layer only
   where ``SIBLING_EDGES`` says so, which keeps the packages of every layer in one order.
3. **No surface imports a store**, not even its plain data types: ``api/``, ``cli/``,
   ``server.py`` and ``evaluation/`` reach the store through core (``kb.catalog`` re-exports the
   types core hands back, ``auth.keys`` re-exports ``ApiKey``).  A dataclass import looks harmless,
   but it is how the next direct store call arrives.
4. **Private names stay home.**  No module imports a ``_name`` from another module; when two
   modules need a thing, it has earned a public name.
5. **No cycles**, not even through an import inside a function or under ``TYPE_CHECKING``; and **no
   two modules share a name**, so a file name says which module it is.

There is no allow-list: an arrow against these rules fails.
"""

from __future__ import annotations

import ast
from pathlib import Path

from conftest import REPO

SRC = REPO / "src"
PACKAGE = "openqna"

FOUNDATION = {"openqna", "openqna.records", "openqna.settings", "openqna.clock", "openqna.turns", "openqna.strict_json"}
FOUNDATION_PACKAGES = {"filters"}
SEAMS = {"models", "store", "connected"}
COMPONENTS = {"index", "answers", "ranking", "ingest", "formats", "training"}
CORE = {"kb", "kinds", "auth"}
SURFACE_PACKAGES = {"api", "cli", "evaluation"}
SURFACE_MODULES = {"openqna.server"}
LAYER_NAMES = {0: "foundation", 1: "seams", 2: "components", 3: "core", 4: "surfaces"}

# Imports between sibling packages of one layer that are allowed, and why.
SIBLING_EDGES = {
    ("answers", "index"),  # a span is chosen among an answer's analysed sentences (index.analyze)
    ("ranking", "index"),  # the ranker scores what the index holds
    ("ranking", "answers"),  # a follow-up prompt is matched against the previous answer's sentences
    ("ingest", "formats"),
    ("training", "ranking"),  # a trained adapter is judged by the ranker on held-out questions
    ("training", "index"),  # ... asked of the index without them  # FAQ extraction keeps records within Azure's limits (formats/limits.py)
    ("kb", "auth"),  # the catalog and the server's wiring hand keys to the surfaces
    ("kinds", "kb"),  # each kind is written and asked through the Service
    ("cli", "api"),  # `openqna serve` and `openqna mcp` start the surfaces
    ("cli", "evaluation"),  # `openqna eval`
    ("cli", "server"),  # `openqna serve`
    ("server", "api"),  # the app mounts every surface's routes
}

def module_name(path: Path) -> str:
    parts = list(path.relative_to(SRC).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


MODULES = {module_name(p): p for p in sorted((SRC / PACKAGE).rglob("*.py"))}


def is_package(module: str) -> bool:
    return MODULES[module].name == "__init__.py"


def imports(module: str) -> list[tuple[str, str | None]]:
    """(imported module, name) for every import in ``module``; name is None for ``import x``."""
    tree = ast.parse(MODULES[module].read_text(encoding="utf-8"))
    here = module.split(".") if is_package(module) else module.split(".")[:-1]
    out: list[tuple[str, str | None]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out += [(a.name, None) for a in node.names if a.name.split(".")[0] == PACKAGE]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = here[: len(here) - node.level + 1]
                base = ".".join(anchor + ([base] if base else []))
            if base.split(".")[0] != PACKAGE:
                continue
            for alias in node.names:
                sub = f"{base}.{alias.name}"
                out.append((sub, None) if sub in MODULES else (base, alias.name))
    return out


def package_of(module: str) -> str:
    """``api``, ``store``, ...; a top-level module is its own package."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else ""


def layer(module: str) -> int:
    top = package_of(module)
    if module in FOUNDATION or top in FOUNDATION_PACKAGES:
        return 0
    if top in SEAMS:
        return 1
    if top in COMPONENTS:
        return 2
    if top in CORE:
        return 3
    if top in SURFACE_PACKAGES or module in SURFACE_MODULES:
        return 4
    raise AssertionError(f"{module} is in no layer: add its folder to one in {__name__}")


def is_surface(module: str) -> bool:
    return layer(module) == 4


def test_every_module_is_parsed():
    assert {"openqna.kb.service", "openqna.api.azure.runtime", "openqna.store.sqlite", "openqna.auth.keys"} <= set(MODULES)


def test_imports_only_go_down_the_layers():
    wrong = []
    for module in MODULES:
        for target, _ in imports(module):
            if target in FOUNDATION:
                continue
            mine, theirs = layer(module), layer(target)
            if theirs > mine:
                wrong.append(f"{module} ({LAYER_NAMES[mine]}) imports {target} ({LAYER_NAMES[theirs]})")
            elif theirs == mine and package_of(module) != package_of(target) \
                    and (package_of(module), package_of(target)) not in SIBLING_EDGES:
                wrong.append(f"{module} imports its sibling {target}")
    assert not wrong, "\n".join(wrong)


def test_no_surface_imports_a_store():
    wrong = [f"{module} imports {target}" for module in MODULES if is_surface(module)
             for target, _ in imports(module) if package_of(target) == "store"]
    assert not wrong, "\n".join(wrong)


def test_private_names_do_not_cross_module_lines():
    wrong = []
    for module in MODULES:
        for target, name in imports(module):
            if name is None or not name.startswith("_") or name.startswith("__") or target == module:
                continue
            wrong.append(f"{module} imports {name} from {target}")
    assert not wrong, "\n".join(wrong)



def test_there_is_no_import_cycle():
    graph = {module: {target for target, _ in imports(module) if target in MODULES and target != module}
             for module in MODULES}
    cycles, done = [], set()

    def visit(module: str, path: list[str]) -> None:
        if module in path:
            cycles.append(" -> ".join(path[path.index(module):] + [module]))
            return
        if module in done:
            return
        for target in sorted(graph[module]):
            visit(target, path + [module])
        done.add(module)

    for module in sorted(MODULES):
        visit(module, [])
    assert not cycles, "\n".join(cycles)


def test_no_two_modules_share_a_name():
    by_name: dict[str, list[str]] = {}
    for module, path in MODULES.items():
        if path.name != "__init__.py":
            by_name.setdefault(path.stem, []).append(module)
    shared = {name: modules for name, modules in by_name.items() if len(modules) > 1}
    assert not shared, shared


def test_the_folders_are_the_layers():
    """Every module is in a layer (``layer`` raises otherwise), and a foundation package stays foundation."""
    assert {layer(module) for module in MODULES} == set(LAYER_NAMES)
    wrong = [f"{module} imports {target}" for module in MODULES if layer(module) == 0
             for target, _ in imports(module) if layer(target) > 0]
    assert not wrong, "\n".join(wrong)
