"""lerobot 0.6.1's own v2.1 -> v3.0 converter, run by the peer interpreter (``.venv-lerobot``,
``tools/lerobot_env.sh``): what robopipe's output is compared with
(:mod:`robopipe.harness.lerobot_compat`) and timed against (``benchmarks/convert_speed.py``).

lerobot's converter (``lerobot.scripts.convert_dataset_v21_to_v30``) converts in place, so it
runs on a writable COPY of the source, offline: ``HF_HUB_OFFLINE=1``, ``HF_HOME`` in a folder
of ours, ``push_to_hub=False``. Its CLI takes whole MB only, so fractional thresholds or a
non-default chunk size (lerobot's module constant ``DEFAULT_CHUNK_SIZE``, patched) go through
``convert_dataset()`` in a ``python -c`` instead.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

from robopipe.harness.process import measured_process
from robopipe.layout import DEFAULT_DATA_FILE_SIZE_IN_MB, DEFAULT_VIDEO_FILE_SIZE_IN_MB

REPO_ID = "local/x"  # the repo id lerobot is given for a local root
DEFAULT_CHUNKS_SIZE = 1000  # lerobot 0.6.1's DEFAULT_CHUNK_SIZE


def offline_env(hf_home: Path) -> dict[str, str]:
    """Environment for the lerobot interpreter: no Hub access, HF caches under ``hf_home``."""
    env = dict(os.environ)
    env.update(
        HF_HOME=str(hf_home),
        HF_LEROBOT_HOME=str(hf_home / "lerobot"),
        HF_HUB_OFFLINE="1",
        HF_DATASETS_OFFLINE="1",
    )
    return env


def writable_copy(source: Path, dest: Path) -> Path:
    """Copy ``source`` to ``dest``, owner-writable throughout (sources may be read-only)."""
    shutil.copytree(source, dest, copy_function=shutil.copyfile)
    for folder, dirs, files in os.walk(dest):
        for name in [*dirs, *files]:
            path = Path(folder, name)
            path.chmod(path.stat().st_mode | 0o200)
    Path(dest).chmod(Path(dest).stat().st_mode | 0o200)
    return dest


def lerobot_convert_command(
    python: str | Path, root: Path, data_mb: float, video_mb: float, chunks_size: int
) -> list[str]:
    """The command of the lerobot interpreter ``python`` that converts ``root`` in place with
    these thresholds (MB) and files per chunk folder: the CLI when it can take them."""
    whole_mb = float(data_mb).is_integer() and float(video_mb).is_integer()
    if whole_mb and chunks_size == DEFAULT_CHUNKS_SIZE:
        return [
            str(python),
            "-m",
            "lerobot.scripts.convert_dataset_v21_to_v30",
            f"--repo-id={REPO_ID}",
            f"--root={root}",
            "--push-to-hub=false",
            f"--data-file-size-in-mb={int(data_mb)}",
            f"--video-file-size-in-mb={int(video_mb)}",
        ]
    code = (
        "import lerobot.scripts.convert_dataset_v21_to_v30 as c\n"
        f"c.DEFAULT_CHUNK_SIZE = {int(chunks_size)}\n"
        f"c.convert_dataset(repo_id={REPO_ID!r}, root={str(root)!r}, push_to_hub=False, "
        f"data_file_size_in_mb={data_mb!r}, video_file_size_in_mb={video_mb!r})\n"
    )
    return [str(python), "-c", code]


def run_lerobot_converter(
    python: str | Path,
    source: Path,
    out: Path,
    data_mb: float,
    video_mb: float,
    chunks_size: int,
    hf_home: Path,
) -> Path:
    """Convert a copy of ``source`` at ``out`` with lerobot (in place; the ``out_old`` folder
    it leaves is removed); its output goes to ``out.lerobot.log`` beside ``out``.

    Raises:
        RuntimeError: lerobot's converter failed (the message names the log).
    """
    writable_copy(source, out)
    cmd = lerobot_convert_command(python, out, data_mb, video_mb, chunks_size)
    log = out.with_name(out.name + ".lerobot.log")
    with open(log, "w") as f:
        proc = subprocess.run(cmd, env=offline_env(hf_home), stdout=f, stderr=subprocess.STDOUT)
    if proc.returncode != 0:
        raise RuntimeError(f"lerobot's converter failed (exit {proc.returncode}), see {log}")
    shutil.rmtree(out.with_name(out.name + "_old"))
    return out


def measure_lerobot_converter(python: str | Path, source: Path, work: Path, name: str) -> dict:
    """:func:`robopipe.harness.process.measured_process` of lerobot's converter, default
    thresholds, on a fresh copy of ``source`` at ``work/lerobot/name`` (copying not timed);
    its log is ``work/name.lerobot.log``, its HF cache ``work/hf`` (emptied first)."""
    root = work / "lerobot" / name
    for path in (root, root.with_name(name + "_old"), root.with_name(name + "_v30")):
        shutil.rmtree(path, ignore_errors=True)
    root.parent.mkdir(parents=True, exist_ok=True)
    writable_copy(source, root)
    cmd = lerobot_convert_command(
        python,
        root,
        DEFAULT_DATA_FILE_SIZE_IN_MB,
        DEFAULT_VIDEO_FILE_SIZE_IN_MB,
        DEFAULT_CHUNKS_SIZE,
    )
    hf_home = work / "hf"
    shutil.rmtree(hf_home, ignore_errors=True)  # no arrow cache left from an earlier run
    return measured_process(cmd, work / f"{name}.lerobot.log", env=offline_env(hf_home))
