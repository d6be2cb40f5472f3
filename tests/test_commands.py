"""The package's commands (``[project.scripts]`` of pyproject.toml): each names a documented
function that parses its own command line."""

from __future__ import annotations

import importlib
import tomllib
from pathlib import Path

import pytest

PYPROJECT = Path(__file__).resolve().parent.parent / "pyproject.toml"
SCRIPTS = tomllib.loads(PYPROJECT.read_text("utf-8"))["project"]["scripts"]


def test_the_commands_users_run_are_listed():
    assert {"robopipe-lerobot-compat", "robopipe-repeat"} <= set(SCRIPTS)


@pytest.mark.parametrize("command", sorted(SCRIPTS))
def test_a_command_is_a_documented_main_with_help(command, capsys):
    module_name, function = SCRIPTS[command].split(":")
    module = importlib.import_module(module_name)
    main = getattr(module, function)
    assert module.__doc__.startswith(f"``{command}``"), "the module's docstring names it"
    assert main.__doc__
    with pytest.raises(SystemExit) as exited:
        main(["--help"])
    assert exited.value.code == 0
    assert capsys.readouterr().out.startswith(f"usage: {command} ")
