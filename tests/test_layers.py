"""The package's layers (pyproject.toml's ``[tool.importlinter]``, docs/development.md): no
import runs up the layers, no two modules of a package import each other in a circle, and no
module takes another module's private name."""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
PACKAGE = REPO_ROOT / "src" / "robopipe"


def test_lint_imports_keeps_the_layer_contracts():
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT / "src")}
    lint = Path(sys.executable).with_name("lint-imports")
    done = subprocess.run(
        [str(lint) if lint.exists() else "lint-imports", "--no-cache"],
        cwd=REPO_ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "0 broken" in done.stdout


def private_names_taken() -> list[str]:
    """``file:line: module._name`` for each private name of a robopipe module that another
    module imports (``from robopipe.x import _y``) or reads (``x._y`` of ``import
    robopipe.x as x`` or ``from robopipe import x``)."""
    taken = []
    for path in sorted(PACKAGE.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        modules = {}  # local name -> robopipe module it names
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("robopipe"):
                for alias in node.names:
                    if alias.name.startswith("_") and not alias.name.startswith("__"):
                        taken.append(f"{path}:{node.lineno}: {node.module}.{alias.name}")
                    modules[alias.asname or alias.name] = f"{node.module}.{alias.name}"
            elif isinstance(node, ast.Import):
                for alias in node.names:
                    if alias.name.startswith("robopipe") and alias.asname:
                        modules[alias.asname] = alias.name
        for node in ast.walk(tree):
            if (
                isinstance(node, ast.Attribute)
                and isinstance(node.value, ast.Name)
                and node.value.id in modules
                and node.attr.startswith("_")
                and not node.attr.startswith("__")
            ):
                taken.append(f"{path}:{node.lineno}: {modules[node.value.id]}.{node.attr}")
    return taken


def test_no_module_takes_another_modules_private_name():
    assert private_names_taken() == []
