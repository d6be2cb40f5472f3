"""The local copy of a remote v3.0 dataset: every file of it fetched into a folder, once, for
the jobs that need local files (a ``local`` benchmark scenario, a training copy, a served
``http``/``s3`` scenario, a push). Its files are those its metadata names (info.json and
``meta/episodes`` name every data and video file: a plain http server, which lists nothing,
needs no listing) and those a listing finds where the filesystem lists (s3, the Hub).

The files go into a staging folder next to the copy, each file under a ``.part`` name renamed
when complete; a killed run leaves the staging folder, and the next run fetches only what it
lacks (a file of the remote size is kept). The copy is checked (``check_v30``) before the
staging folder is renamed into place, so the copy exists only complete and checked. The
metadata reads, the listing, each file's size and each download (a file shorter than its size
included) are retried after transient faults within a :class:`robopipe.retry.RetryBudget`.
"""

from __future__ import annotations

import functools
import os
import shutil
from collections.abc import Iterable
from pathlib import Path

from robopipe.checks.report import CheckReport
from robopipe.checks.v30 import check_v30
from robopipe.errors import DatasetError
from robopipe.formats.v30_reader import dataset_files, file_size, open_url
from robopipe.retry import DEFAULT_BUDGET, RemoteReadError, RetryBudget, ShortBody, call


def remote_files(
    url: str,
    storage_options: dict | None = None,
    retry_budget: RetryBudget = DEFAULT_BUDGET,
) -> dict[str, int]:
    """Every file of the dataset at ``url``: ``{relative path: size in bytes}``, sorted: those
    its metadata names (:func:`robopipe.formats.v30_reader.dataset_files`: info.json,
    ``meta/episodes``, and the data and video files the episodes name), which is all there is
    where the server lists nothing (plain http), and those a listing finds (which also gives
    their sizes in bulk, and the files no metadata names, such as ``README.md``). The metadata
    reads, the listing and each size are retried within ``retry_budget``.

    Raises:
        DatasetError: its metadata cannot be read, the root cannot be listed, or a file the
            metadata names is missing.
        robopipe.retry.RemoteReadError: a read, the listing or a size failed on every attempt.
    """
    fs, root = open_url(url, storage_options, retry_budget)
    base = fs._strip_protocol(root)
    try:
        named = dataset_files(url, storage_options, retry_budget)
        found = call(lambda: fs.find(root, detail=True), url, retry_budget)
        files = {
            fs._strip_protocol(path)[len(base) + 1 :]: int(info["size"])
            for path, info in found.items()
            if info.get("type") != "directory"
        }
        for rel in {*named.meta, *named.data, *named.videos} - set(files):
            files[rel] = file_size(fs, f"{root}/{rel}", retry_budget)
    except RemoteReadError:
        raise  # transient faults beyond the budget say nothing of the dataset
    except OSError as exc:  # FileNotFoundError included
        raise DatasetError(url, f"cannot list the dataset's files ({exc})") from exc
    return dict(sorted(files.items()))


def make_local_copy(
    url: str,
    name: str,
    dest: str | Path,
    *,
    storage_options: dict | None = None,
    tolerance_s: float | None = None,
    skip_episodes: Iterable[int] = (),
    episodes: Iterable[int] | None = None,
    doctor_python: str | None = None,
    retry_budget: RetryBudget = DEFAULT_BUDGET,
) -> CheckReport:
    """Fetch the v3.0 dataset at ``url`` into the folder ``dest`` (which must not exist),
    check it, and move it into place.

    Args:
        url: the dataset root (any fsspec URL); ``storage_options`` its fsspec options.
        name: the dataset name (messages).
        dest: the local copy's folder (what is there is replaced); its staging folder is
            ``.<dest name>.download`` beside it.
        tolerance_s, skip_episodes, episodes: the check's (:func:`check_v30`).
        doctor_python: the peer interpreter whose ``lerobot-lance-doctor`` also judges the
            copy (``check_v30(doctor=True)``; None: the verdict says it was skipped).
        retry_budget: how long each metadata read, the listing, each size and each download
            is retried.

    Returns:
        The local copy's check report (ok).

    Raises:
        DatasetError: its metadata cannot be read, the root cannot be listed, or the local
            copy fails the check (the staging folder is kept: the fetched files are not
            fetched again).
        robopipe.retry.RemoteReadError: a metadata read, the listing, a size or a download
            failed on every attempt of ``retry_budget`` (one line: the URL and the last
            error).
    """
    dest = Path(dest)
    staging = dest.with_name(f".{dest.name}.download")
    fs, root = open_url(url, storage_options, retry_budget)
    for rel, size in remote_files(url, storage_options, retry_budget).items():
        target = staging / rel
        if target.is_file() and target.stat().st_size == size:
            continue  # fetched by an earlier, interrupted run
        target.parent.mkdir(parents=True, exist_ok=True)
        part = target.with_name(target.name + ".part")
        source = f"{root}/{rel}"
        call(functools.partial(_download, fs, source, part, size), source, retry_budget)
        os.replace(part, target)
    check = {} if tolerance_s is None else {"tolerance_s": tolerance_s}
    report = check_v30(
        staging,
        name,
        skip_episodes=skip_episodes,
        episodes=episodes,
        doctor=True,
        doctor_python=doctor_python,
        **check,
    )
    if not report.ok:
        raise DatasetError(name, f"its local copy {staging} fails the check: {report.summary()}")
    if dest.exists():  # the empty folders Snakemake makes for the output
        shutil.rmtree(dest)
    os.replace(staging, dest)
    return report


def _download(fs, source: str, part: Path, size: int) -> None:
    """One attempt: ``source`` into ``part`` (rewritten whole).

    Raises:
        robopipe.retry.ShortBody: ``part`` is not ``size`` bytes long.
    """
    fs.get_file(source, str(part))
    got = part.stat().st_size
    if got != size:
        raise ShortBody(source, 0, size, got)
