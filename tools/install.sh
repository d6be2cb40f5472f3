#!/usr/bin/env bash
# Install what robopipe needs on a fresh Debian 12 machine (run as root, or with sudo rights).
#   tools/install.sh          the workflow: FFmpeg libraries, nginx (the benchmark's http
#                             source, started on 127.0.0.1 by the harness, never as a
#                             service), robopipe with torch/torchcodec
#   tools/install.sh --test   also what the tests use: Chromium (report screenshot), munge and
#                             SLURM daemons (the real local cluster), pytest, moto, and
#                             robomimic 0.3.0 from PyPI (parity tests and robomimic_seq_*
#                             benchmark loaders; without its training deps, which its
#                             SequenceDataset does not import)
#   tools/install.sh --peers  also the peer environment .venv-lerobot (tools/lerobot_env.sh:
#                             Python 3.12 with lerobot 0.6.1 and lerobot-lancedb 0.3.1,
#                             pinned) for the peer loaders, the lance copy and
#                             lerobot-lance-doctor; skipped, with a message, where no Python
#                             3.12 is found (the run then skips the peers and says why)
# The flags combine: tools/install.sh --test --peers.
set -euo pipefail
cd "$(dirname "$0")/.."

test_extras=false
peers=false
for arg in "$@"; do
    case "$arg" in
        --test) test_extras=true ;;
        --peers) peers=true ;;
        *) echo "usage: tools/install.sh [--test] [--peers]" >&2; exit 2 ;;
    esac
done

sudo=""
[ "$(id -u)" -ne 0 ] && sudo="sudo"
packages=(ffmpeg nginx)
if $test_extras; then
    packages+=(chromium munge slurm-client slurmctld slurmd)
fi
missing=()
for p in "${packages[@]}"; do
    dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
    export DEBIAN_FRONTEND=noninteractive
    $sudo apt-get update -qq
    # keep package scripts from starting daemons: the tests start their own SLURM cluster,
    # the benchmark its own nginx
    echo 'exit 101' | $sudo tee /usr/sbin/policy-rc.d >/dev/null
    $sudo chmod +x /usr/sbin/policy-rc.d
    $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
    $sudo rm -f /usr/sbin/policy-rc.d
fi

extras="torch"
$test_extras && extras="torch,test"
python -m pip install -q -e ".[$extras]"
if $test_extras; then
    python -m pip install -q --no-deps robomimic==0.3.0
    python -m pip install -q termcolor  # imported by robomimic.utils.log_utils
fi
# pyenv puts new console scripts (snakemake) on PATH only after a rehash
if command -v pyenv >/dev/null 2>&1; then
    pyenv rehash
fi
if $peers; then
    bash tools/lerobot_env.sh || echo "tools/install.sh: no peer environment made (above);" \
        "robopipe runs without its peers and its report says so" >&2
fi
