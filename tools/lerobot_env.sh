#!/usr/bin/env bash
# Create the peer environment in .venv-lerobot/ (repo root): Python 3.12 with lerobot 0.6.1,
# lerobot-lancedb 0.3.1 (LanceDBDataset, lerobot-lance-convert, lerobot-lance-doctor) and
# lerobot-doctor 0.2.0 (content checks: the quality stage's peer), pinned.
# robopipe runs its peer loaders, the lance copy and both doctors in it (robopipe.peer_env:
# the default bench.lerobot_python), as do robopipe-lerobot-compat, benchmarks/convert_speed.py
# and the opt-in compatibility tests; robopipe itself never imports lerobot.
# Usage: tools/lerobot_env.sh, or tools/install.sh --peers (re-running is safe: pip skips what
# is installed)
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
venv="$root/.venv-lerobot"

find_python312() {
    if command -v pyenv >/dev/null 2>&1; then
        local prefix
        if prefix="$(pyenv prefix 3.12.1 2>/dev/null)" && [ -x "$prefix/bin/python3.12" ]; then
            echo "$prefix/bin/python3.12"
            return
        fi
    fi
    local candidate
    for candidate in python3.12 "${PYENV_ROOT:-$HOME/.pyenv}/versions/3.12.1/bin/python3.12"; do
        if command -v "$candidate" >/dev/null 2>&1 && "$candidate" -c 'import venv' 2>/dev/null; then
            command -v "$candidate"
            return
        fi
    done
    return 1
}

if ! python312="$(find_python312)"; then
    echo "error: lerobot 0.6.1 needs Python 3.12, none found (tried 'pyenv prefix 3.12.1'," \
        "python3.12 on PATH). Install one, e.g. 'pyenv install 3.12.1'." >&2
    exit 1
fi

echo "using $python312 ($("$python312" --version))"
if [ ! -x "$venv/bin/python" ]; then
    "$python312" -m venv "$venv"
fi
"$venv/bin/python" -m pip install --upgrade pip
# accelerate-dep: lerobot-train needs accelerate (benchmarks/lerobot_train_dropin.py runs it)
# lerobot-lancedb 0.3.1 needs lancedb >= 0.37.1b0 (blob v2, fetch_blob_ranges): 0.37.1 is on PyPI
# tenacity: robopipe's loaders retry with it, and lerobot-train imports them here (the drop-in)
# lerobot-doctor: the quality stage runs `lerobot-doctor check` beside its own checks
# (robopipe.bench.quality_peer)
time "$venv/bin/python" -m pip install \
    torch==2.11.0 torchvision==0.26.0 torchcodec==0.11.1 "lerobot[dataset,accelerate-dep]==0.6.1" \
    lerobot-lancedb==0.3.1 lancedb==0.37.1 lerobot-doctor==0.2.0 "tenacity>=8.2"
"$venv/bin/python" -m pip check
"$venv/bin/python" -c 'import lerobot, lerobot_lancedb, torch; from importlib.metadata import version
print("lerobot", lerobot.__version__, "lerobot-lancedb", version("lerobot-lancedb"),
      "lerobot-doctor", version("lerobot-doctor"), "torch", torch.__version__)'
echo "ready: $venv/bin/python"
