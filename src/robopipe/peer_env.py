"""The peer environment: the Python 3.12 interpreter that has lerobot 0.6.1, lerobot-doctor and
lerobot-lancedb (``tools/install.sh --peers`` makes ``.venv-lerobot``), and what it has
installed. The benchmark's peer loaders (:mod:`robopipe.bench.peers`), the Lance copy and the
outside doctor run there.

Importing this module imports nothing heavy (the workflow calls :func:`peer_python` and
:func:`peer_packages` at parse time).
"""

from __future__ import annotations

import functools
import json
import subprocess
from pathlib import Path

DEFAULT_PEER_PYTHON = ".venv-lerobot/bin/python"  # tools/lerobot_env.sh, relative to the workdir
# the distributions whose versions name the peers (robopipe.bench.registry.LoaderSpec.peer_package)
PEER_DISTRIBUTIONS = ("lerobot", "lerobot-lancedb", "lancedb", "lerobot-doctor", "torch")
NO_PEERS = (
    "no peer environment: bench.lerobot_python is unset and .venv-lerobot/bin/python does "
    "not exist (bash tools/install.sh --peers makes it; it needs Python 3.12)"
)


def peer_python(bench: dict) -> str | None:
    """The peer interpreter: ``bench["lerobot_python"]`` when the key is set (null or false:
    none), else ``.venv-lerobot/bin/python`` when it exists in the working directory, else
    None."""
    if "lerobot_python" in bench:
        return bench["lerobot_python"] or None
    return DEFAULT_PEER_PYTHON if Path(DEFAULT_PEER_PYTHON).exists() else None


@functools.cache
def peer_packages(python: str | None) -> dict[str, str]:
    """{distribution: version} of :data:`PEER_DISTRIBUTIONS` installed in ``python`` (empty
    for None, or an interpreter that does not run); read with ``importlib.metadata``, without
    importing them (about 0.1 s)."""
    if not python:
        return {}
    code = (
        "import json, importlib.metadata as m\n"
        "out = {}\n"
        f"for d in {PEER_DISTRIBUTIONS!r}:\n"
        "    try: out[d] = m.version(d)\n"
        "    except m.PackageNotFoundError: pass\n"
        "print(json.dumps(out))"
    )
    try:
        done = subprocess.run([python, "-c", code], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return {}
    return json.loads(done.stdout) if done.returncode == 0 else {}


def peer_version(python: str | None, package: str) -> str | None:
    """``"<package> <version>"`` of a peer package installed in ``python``, or None."""
    version = peer_packages(python).get(package)
    return f"{package} {version}" if version else None
