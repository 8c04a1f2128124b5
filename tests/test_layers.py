"""The import graph keeps DESIGN.md's one-way flow, read from the source with ``ast`` (no module is imported).

The rules, checked on every module under ``src/openqna``:

1. **Layers.**  A module imports only from its own layer or a lower one:

   ====  ==========  ==========================================================================
   4     surfaces    ``api/*``, ``cli.py``, ``server.py``, ``evaluation/*`` (the quality harness
                     drives ``Service`` as the CLI does)
   3     core        every other top-level module: ``service``, ``catalog``, ``authoring``,
                     ``jobs``, ``keys``, ``answers``, ``documents``, ``tables``, ``vector_stores*``, ...
   2     components  ``retrieval/*``, ``ingest/*``, ``formats/*``
   1     seams       ``models/*``, ``store/*``
   0     foundation  ``openqna`` itself, ``records``, ``filter_ast``, ``settings``, ``clock``: plain
                     data and configuration that every layer may import (a filter is data that
                     surfaces parse, retrieval evaluates and stores compile to SQL)
   ====  ==========  ==========================================================================

2. **Siblings stay apart.**  Within the component and seam layers a package imports another
   package of its layer only where ``SIBLING_EDGES`` says so: models and stores never import
   each other, and retrieval, ingest and formats are independent except for the limits that
   FAQ extraction shares with the file formats.
3. **No surface imports a store**, not even its plain data types: ``api/*``, ``cli.py``,
   ``server.py`` and ``evaluation/*`` reach the store through core (``catalog`` re-exports the
   types core hands back, ``keys`` re-exports ``ApiKey``).  A dataclass import looks harmless,
   but it is how the next direct store call arrives.
4. **Private names stay home.**  No module imports a ``_name`` from another module; when two
   modules need a thing, it has earned a public name.

There is no allow-list: an arrow against these rules fails.
"""

from __future__ import annotations

import ast
from pathlib import Path

from conftest import REPO

SRC = REPO / "src"
PACKAGE = "openqna"

FOUNDATION = {"openqna", "openqna.records", "openqna.filter_ast", "openqna.settings", "openqna.clock",
              "openqna.turns"}
SURFACE_PACKAGES = {"api", "evaluation"}
SURFACE_MODULES = {"openqna.cli", "openqna.cli_common", "openqna.cli_keys", "openqna.cli_table", "openqna.server"}
COMPONENTS = {"retrieval", "ingest", "formats"}
SEAMS = {"models", "store"}
LAYER_NAMES = {0: "foundation", 1: "seams", 2: "components", 3: "core", 4: "surfaces"}

# Imports between sibling packages of one layer that are allowed, and why.
SIBLING_EDGES = {
    ("ingest", "formats"),  # FAQ extraction keeps records within Azure's limits (formats/limits.py)
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
    if module in FOUNDATION:
        return 0
    top = package_of(module)
    if top in SEAMS:
        return 1
    if top in COMPONENTS:
        return 2
    if top in SURFACE_PACKAGES or module in SURFACE_MODULES:
        return 4
    return 3


def is_surface(module: str) -> bool:
    return layer(module) == 4


def test_every_module_is_parsed():
    assert {"openqna.service", "openqna.api.azure", "openqna.store.sqlite", "openqna.keys"} <= set(MODULES)


def test_imports_only_go_down_the_layers():
    wrong = []
    for module in MODULES:
        for target, _ in imports(module):
            if target in FOUNDATION:
                continue
            mine, theirs = layer(module), layer(target)
            if theirs > mine:
                wrong.append(f"{module} ({LAYER_NAMES[mine]}) imports {target} ({LAYER_NAMES[theirs]})")
            elif theirs == mine and mine in (1, 2) and package_of(module) != package_of(target) \
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

