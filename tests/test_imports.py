"""The layer boundaries of ARCHITECTURE.md, for every module of the package.

* No library module imports a command module (``monitor_cb.commands``): commands sit on top.
* Only ``monitor_cb.views`` itself imports ``monitor_cb.views`` (the pages' plain logic is the top).
* No reading-side package (ingest ... views) imports the training side (``monitor_cb.train``).
* Only ``dashboard.py`` and ``pages/`` import Streamlit: no module of ``monitor_cb`` does.
* Only the training layer imports MindSpore (or MindFormers): importing any other module loads neither.

Each module is imported as a user would (a fresh interpreter imports all of them, then looks at
``sys.modules``); a failure names the module that pulled the framework in.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
# The training layer: these may import MindSpore (most only when a function runs).
TRAINING = frozenset(
    {
        "monitor_cb.train.callback",
        "monitor_cb.train.cells",
        "monitor_cb.train.grad_norm",
        "monitor_cb.train.lr",
        "monitor_cb.train.system",
        "monitor_cb.train.mindformers",
        "monitor_cb.mindformers",  # the user-facing name of monitor_cb.train.mindformers
        "monitor_cb.commands.demo",
        "monitor_cb.demo.model",
        "monitor_cb.demo.train",
    }
)
# The two sides: the reading side's packages never import the training side's package.
READING = ("ingest", "importers", "analysis", "diagnosis", "charts", "compare", "views")
TRAINING_SIDE = ("monitor_cb.train", "monitor_cb.mindformers")
ALL_FOLDERS = tuple(f"monitor_cb/{p.name}/" for p in (REPO / "monitor_cb").iterdir() if p.is_dir()) + tuple(
    f"monitor_cb/{p.name}" for p in (REPO / "monitor_cb").glob("*.py")
)
UI = ("streamlit",)
FRAMEWORKS = ("mindspore", "mindformers")


def all_modules() -> list[str]:
    names = []
    for path in sorted((REPO / "monitor_cb").rglob("*.py")):
        parts = path.relative_to(REPO).with_suffix("").parts
        if parts[-1] == "__main__":
            continue  # runs the command line when imported
        names.append(".".join(parts[:-1] if parts[-1] == "__init__" else parts))
    return names


def loaded_after(modules: list[str]) -> set[str]:
    """Top-level package names in ``sys.modules`` after importing ``modules`` in a fresh interpreter."""
    code = "import importlib, sys\n"
    code += "".join(f"importlib.import_module({name!r})\n" for name in modules)
    code += "print(' '.join(sorted({m.split('.')[0] for m in sys.modules})))"
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, check=True, timeout=300
    )
    return set(out.stdout.split())


def culprits(modules: list[str], banned: tuple[str, ...]) -> list[str]:
    return [m for m in modules if set(banned) & loaded_after([m])]


def test_the_list_covers_the_package() -> None:
    names = all_modules()
    assert "monitor_cb.ingest.store" in names and "monitor_cb.commands.dashboard" in names
    assert set(names) >= TRAINING, TRAINING - set(names)


def test_no_module_of_the_package_imports_streamlit() -> None:
    modules = all_modules()
    if set(UI) & loaded_after(modules):
        raise AssertionError(f"these modules import Streamlit: {culprits(modules, UI)}")


def test_only_the_training_layer_imports_mindspore() -> None:
    modules = [m for m in all_modules() if m not in TRAINING]
    if set(FRAMEWORKS) & loaded_after(modules):
        raise AssertionError(f"these modules import MindSpore or MindFormers: {culprits(modules, FRAMEWORKS)}")


def imports_of(path: Path) -> list[tuple[str, int]]:
    """Every module name an ``import`` in ``path`` names (top level or inside a function), with its line."""
    names = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module and not node.level:
            names += [(node.module, node.lineno)] + [(f"{node.module}.{a.name}", node.lineno) for a in node.names]
        elif isinstance(node, ast.Import):
            names += [(a.name, node.lineno) for a in node.names]
    return names


def importers_of(packages: tuple[str, ...], allowed: tuple[str, ...]) -> list[str]:
    """``file:line`` of every import of a module in ``packages`` from a file outside ``allowed``."""
    offenders = []
    for path in sorted((REPO / "monitor_cb").rglob("*.py")):
        rel = path.relative_to(REPO).as_posix()
        if rel.startswith(allowed):
            continue
        for name, line in imports_of(path):
            if any(name == p or name.startswith(p + ".") for p in packages):
                offenders.append(f"{rel}:{line} imports {name}")
    return offenders


def test_library_code_never_imports_a_command_module() -> None:
    """Commands sit on top: only ``cli.py`` and other commands import ``monitor_cb.commands``."""
    allowed = ("monitor_cb/commands/", "monitor_cb/cli.py", "monitor_cb/__main__.py")
    assert not importers_of(("monitor_cb.commands",), allowed)


def test_only_the_pages_import_the_page_logic() -> None:
    """``monitor_cb.views`` sits on top of the reading side: nothing below it reaches up to a page."""
    assert not importers_of(("monitor_cb.views",), ("monitor_cb/views/",))


def test_the_reading_side_never_imports_the_training_side() -> None:
    """The two sides share the file format only (``record.py``): a reader never loads the callback's modules."""
    reading = tuple(f"monitor_cb/{p}/" for p in READING)
    offenders = importers_of(TRAINING_SIDE, tuple(p for p in ALL_FOLDERS if p not in reading))
    assert not offenders, offenders
