"""Command-line flags generated from a function's keyword-only parameters, so a generator's
or a tool's options are declared once: in the signature it already has."""

from __future__ import annotations

import argparse
import inspect
from collections.abc import Callable, Iterable


def add_keyword_flags(
    parser: argparse.ArgumentParser, func: Callable, *, skip: Iterable[str] = ()
) -> None:
    """Add a ``--flag-name`` for each keyword-only parameter of ``func`` that has a default
    of type int, float, str, bool or None (``--name`` stays a string), except those in
    ``skip``. A bool default gives a ``--flag/--no-flag`` pair; a list or tuple default of
    strings gives ``nargs="+"``. Defaults and types come from the signature."""
    for name, param in inspect.signature(func).parameters.items():
        if param.kind is not param.KEYWORD_ONLY or name in skip:
            continue
        default, flag = param.default, "--" + name.replace("_", "-")
        if default is param.empty:
            continue
        if isinstance(default, bool):
            parser.add_argument(flag, action=argparse.BooleanOptionalAction, default=default)
        elif isinstance(default, list | tuple):
            parser.add_argument(flag, nargs="+", default=list(default))
        elif default is None:
            parser.add_argument(flag, type=int, default=None)
        else:
            parser.add_argument(flag, type=type(default), default=default)


def keyword_values(args: argparse.Namespace, func: Callable) -> dict:
    """The parsed values of ``func``'s keyword-only parameters found in ``args``."""
    return {
        name: getattr(args, name)
        for name, param in inspect.signature(func).parameters.items()
        if param.kind is param.KEYWORD_ONLY and hasattr(args, name)
    }
