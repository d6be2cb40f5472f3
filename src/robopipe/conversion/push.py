"""Push a converted, validated v3.0 dataset to where its users load it from: a Hugging Face
Hub dataset repo (with lerobot 0.6.1's conventions) or any fsspec URL (``s3://...``,
``hf://buckets/...``, a local folder).

Both are idempotent and resumable: only files missing or different on the target are
uploaded, so a second push uploads nothing (and makes no Hub commit), and a push that was
killed uploads only what it had not finished.

A Hub push scales to DROID-sized datasets: the files are hashed once, in parallel; their
uploads (LFS in ``UPLOAD_THREADS`` threads, or Xet, as the Hub negotiates) go through
``huggingface_hub``, which retries each request on a lost connection or HTTP 408/429/5xx; and
the commits are bounded, at most
``ceil(data and video files / files_per_commit) + 1`` (see :func:`_batches`), ``meta/`` in the
last. ``HfApi.upload_large_folder`` is not used: huggingface_hub 2.4 folds it into
``upload_folder``, whose multi-commit pipeline needs Xet storage (else it makes one commit),
commits adaptive batches of 20 to 1,000 files (50 commits or more for 50,000 files) with
nothing keeping ``meta/`` last, and puts the deletions in its first commit (a v2.1 branch would
lose its dataset before the new one is complete).
"""

from __future__ import annotations

import datetime
import hashlib
import json
import logging
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, fields
from pathlib import Path

import tenacity

from robopipe.errors import DatasetError
from robopipe.formats.v30_reader import open_url
from robopipe.layout import (
    DATA_PATH,
    DATASET_FOLDERS,
    DEFAULT_CHUNK_SIZE,
    DEFAULT_DATA_FILE_SIZE_IN_MB,
    DEFAULT_VIDEO_FILE_SIZE_IN_MB,
    INFO_PATH,
    VIDEO_PATH,
)

log = logging.getLogger(__name__)

CODEBASE_VERSION = "v3.0"
OLD_VERSION = "v2.1"
CARD = "README.md"
RETRY_STATUS = {429, 500, 502, 503, 504}
TRANSIENT_NAMES = {"ConnectionError", "Timeout", "TransportError"}
RETRY_WAIT_MAX_S = 30.0  # waits double from 1 s up to this
UPLOAD_THREADS = 8  # files hashed, and LFS objects uploaded, at a time


@dataclass(frozen=True)
class PushTarget:
    """Where a dataset is pushed, and how: a dataset's ``push:`` config section.

    Attributes:
        repo_id: a Hub dataset repo (``user/name``); created if missing.
        url: an fsspec URL instead (``s3://bucket/name``, ``hf://buckets/user/b/name``, a
            folder): the dataset's files are copied there as they are.
        branch: the Hub branch to commit to (created from ``main`` if missing).
        private: create the Hub repo private (an existing repo keeps its visibility).
        commit_message: the Hub commit's summary.
        create_pr: open a pull request with the commit instead of committing to ``branch``;
            the ``v3.0`` tag is then left for after the merge.
        overwrite: replace a different dataset that the target already holds (refused
            otherwise).
        license: the dataset card's license.
        tags: the dataset card's tags besides ``LeRobot``.
        storage_options: fsspec options of ``url`` (credentials, ``endpoint_url``...).
        files_per_commit: most files added in one Hub commit (the Hub takes 25,000 LFS files
            per commit); larger datasets take several commits, ``meta/`` in the last: at most
            ``ceil(data and video files / files_per_commit) + 1``, over a killed push and its
            rerun together too.
        retries: attempts after a transient error (connection lost, HTTP 429 or 5xx); each
            attempt compares the target again, so no work is done twice.
    """

    repo_id: str | None = None
    url: str | None = None
    branch: str = "main"
    private: bool = False
    commit_message: str = "Upload LeRobot v3.0 dataset (converted by robopipe)"
    create_pr: bool = False
    overwrite: bool = False
    license: str | None = "apache-2.0"
    tags: tuple[str, ...] = ()
    storage_options: dict = field(default_factory=dict)
    files_per_commit: int = 10_000
    retries: int = 5

    @classmethod
    def from_config(cls, entry: dict) -> PushTarget:
        """The target of a ``push:`` config section.

        Raises:
            ValueError: neither or both of ``repo_id`` and ``url``, or an unknown key.
        """
        names = {f.name for f in fields(cls)}
        if unknown := sorted(set(entry) - names):
            raise ValueError(f"push: unknown keys {unknown}")
        if ("repo_id" in entry) == ("url" in entry):
            raise ValueError("push: give exactly one of repo_id (the Hub) and url (fsspec)")
        return cls(**{**entry, "tags": tuple(entry.get("tags", ()))})

    @property
    def name(self) -> str:
        """The target as one string: ``hf://datasets/<repo_id>`` or the URL."""
        return f"hf://datasets/{self.repo_id}" if self.repo_id else self.url


@dataclass(frozen=True)
class LocalFile:
    """One file of the local dataset: its size (bytes), SHA-256 and git blob id (hex)."""

    path: Path
    size: int
    sha256: str
    git_oid: str

    @classmethod
    def hash(cls, path: Path) -> LocalFile:
        """Size, SHA-256 and git blob id of ``path``, from one read."""
        size = path.stat().st_size
        sha256, git = hashlib.sha256(), hashlib.sha1(b"blob %d\0" % size)
        with open(path, "rb") as f:
            while block := f.read(1 << 23):
                sha256.update(block)
                git.update(block)
        return cls(path, size, sha256.hexdigest(), git.hexdigest())


def dataset_files(root: str | Path) -> dict[str, Path]:
    """The files of the dataset at ``root`` (``meta/``, ``data/``, ``videos/``) by relative
    POSIX path, sorted; hidden files (Snakemake's ``.snakemake_timestamp``) left out."""
    root = Path(root)
    return {
        p.relative_to(root).as_posix(): p
        for top in DATASET_FOLDERS
        for p in sorted((root / top).rglob("*"))
        if p.is_file() and not p.name.startswith(".")
    }


def push_dataset(
    root: str | Path,
    target: PushTarget,
    *,
    name: str,
    validation: dict,
    endpoint: str | None = None,
) -> dict:
    """Push the v3.0 dataset at ``root`` to ``target``; return what was done (push.json).

    ``validation`` is the summary the ``validate`` step wrote for this dataset, or the check
    report of a v3.0 source: the push starts only if it counts (or lists) the data and video
    files that ``root`` holds. ``endpoint``:
    the Hub's address (default ``HF_ENDPOINT``, else huggingface.co); the token is
    ``HF_TOKEN`` or the one ``hf auth login`` saved.

    Returns:
        ``{"target", "repo_id", "url", "branch", "revision" (the Hub commit sha, None for a
        URL), "tag", "commits" (shas made), "pr_url", "files", "bytes" (the dataset's),
        "uploaded_files", "uploaded_bytes", "deleted_files", "seconds", "pushed_at"}``.

    Raises:
        DatasetError: ``root`` is not the validated dataset, or the target holds a different
            dataset and ``target.overwrite`` is not set.
        huggingface_hub.errors.HfHubHTTPError, OSError: the target failed (after retries).
    """
    start = time.monotonic()
    files = dataset_files(root)
    _check_validated(files, name, validation)
    if target.repo_id:
        local = hash_files(files)  # once: every attempt compares the Hub with these
        record = _with_retries(target, lambda: _push_to_hub(local, target, name, endpoint))
    else:
        record = _with_retries(target, lambda: _push_to_url(files, target, name))
    sizes = [p.stat().st_size for p in files.values()]
    return {
        "target": target.name,
        "repo_id": target.repo_id,
        "url": target.url,
        "branch": target.branch if target.repo_id else None,
        **record,
        "files": len(files),
        "bytes": sum(sizes),
        "seconds": round(time.monotonic() - start, 3),
        "pushed_at": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
    }


def hash_files(files: dict[str, Path], threads: int = UPLOAD_THREADS) -> dict[str, LocalFile]:
    """:meth:`LocalFile.hash` of each file (``files``: by relative path), ``threads`` at a
    time (hashlib releases the GIL), in ``files``' order."""
    with ThreadPoolExecutor(threads) as pool:
        return dict(zip(files, pool.map(LocalFile.hash, files.values()), strict=True))


def _file_counts(paths) -> dict[str, int]:
    """How many data and video files ``paths`` (relative to a dataset root) name."""
    paths = list(paths)
    return {
        "data_files": sum(p.startswith("data/") and p.endswith(".parquet") for p in paths),
        "video_files": sum(p.startswith("videos/") and p.endswith(".mp4") for p in paths),
    }


def _check_validated(files: dict[str, Path], name: str, validation: dict) -> None:
    counts = _file_counts(files)
    if "data_files" in validation:  # the conversion's validation report
        expected = {k: validation.get(k) for k in counts}
    else:  # a v3.0 source's check report: the files it read
        expected = _file_counts(validation.get("files", {}))
    if INFO_PATH not in files or counts != expected:
        raise DatasetError(
            name,
            f"push: the dataset holds {counts} but its validation checked {expected}; "
            "convert and validate it again (snakemake convert) before pushing",
        )


def _with_retries(target: PushTarget, push):
    """``push()``, again after a transient error (:func:`_transient`), up to
    ``target.retries`` times, waiting 1, 2, 4... s (at most ``RETRY_WAIT_MAX_S``) and
    logging a warning before each retry; the last error is raised as it is."""
    # Not robopipe.retry.call: that policy is for reads, bounds the retries by seconds since
    # the first attempt (an hours-long push would spend it on its first attempt) and replaces
    # the last error by a RemoteReadError, where a push is retried whole and raises
    # huggingface_hub's or the filesystem's error as it is.

    def warn(state: tenacity.RetryCallState) -> None:
        log.warning(
            "push to %s: %s; retrying in %.0f s",
            target.name,
            state.outcome.exception(),
            state.next_action.sleep,
        )

    retrying = tenacity.Retrying(
        stop=tenacity.stop_after_attempt(target.retries + 1),
        retry=tenacity.retry_if_exception(_transient),
        wait=tenacity.wait_exponential(multiplier=1, exp_base=2, max=RETRY_WAIT_MAX_S),
        before_sleep=warn,
        reraise=True,
    )
    return retrying(push)


def _transient(exc: Exception) -> bool:
    """A lost connection, a timeout, or HTTP 429 / 5xx: worth another attempt."""
    from huggingface_hub.errors import HfHubHTTPError

    if isinstance(exc, HfHubHTTPError):
        return getattr(exc.response, "status_code", None) in RETRY_STATUS
    if isinstance(exc, ConnectionError | TimeoutError):
        return True
    # the HTTP client's own (requests, httpx): ConnectionError, Timeout, TransportError
    return any(c.__name__ in TRANSIENT_NAMES for c in type(exc).__mro__)


# --- the Hub ---------------------------------------------------------------------------


def dataset_card(info: dict, repo_id: str, license: str | None, tags=()) -> str:
    """The dataset card (``README.md``) lerobot 0.6.1's ``push_to_hub`` writes.

    Source: ``create_lerobot_dataset_card`` and ``card_template.md`` in
    ``lerobot/datasets/`` (v0.6.1): YAML metadata (license, tags ``LeRobot`` + ``tags``,
    ``task_categories: robotics``, the ``default`` config on ``data/*/*.parquet``), then the
    template's sections, with ``meta/info.json`` shown as lerobot's ``DatasetInfo.to_dict()``
    (its fields in their order; unknown keys dropped).
    """
    from huggingface_hub import DatasetCard, DatasetCardData

    card_data = DatasetCardData(
        license=license,
        tags=["LeRobot", *tags],
        task_categories=["robotics"],
        configs=[{"config_name": "default", "data_files": "data/*/*.parquet"}],
    )
    badge = (
        "https://huggingface.co/datasets/huggingface/badges/resolve/main/visualize-this-dataset-xl"
    )
    text = f"""
This dataset was created using [LeRobot](https://github.com/huggingface/lerobot).


<a class="flex" href="https://huggingface.co/spaces/lerobot/visualize_dataset?path={repo_id}">
<img class="block dark:hidden" src="{badge}.svg"/>
<img class="hidden dark:block" src="{badge}-dark.svg"/>
</a>


## Dataset Description



- **Homepage:** [More Information Needed]
- **Paper:** [More Information Needed]
- **License:** {license or "[More Information Needed]"}

## Dataset Structure

[meta/info.json](meta/info.json):
```json
{json.dumps(_lerobot_info(info), indent=4)}
```


## Citation

**BibTeX:**

```bibtex
[More Information Needed]
```"""
    return str(DatasetCard(f"---\n{card_data.to_yaml()}\n---\n{text}"))


# lerobot 0.6.1's DatasetInfo fields and defaults (lerobot/datasets/utils.py:115)
LEROBOT_INFO_DEFAULTS = {
    "codebase_version": None,
    "fps": None,
    "features": None,
    "total_episodes": 0,
    "total_frames": 0,
    "total_tasks": 0,
    "chunks_size": DEFAULT_CHUNK_SIZE,
    "data_files_size_in_mb": DEFAULT_DATA_FILE_SIZE_IN_MB,
    "video_files_size_in_mb": DEFAULT_VIDEO_FILE_SIZE_IN_MB,
    "data_path": DATA_PATH,
    "video_path": VIDEO_PATH,
    "robot_type": None,
    "splits": {},
    "tools": None,
}


def _lerobot_info(info: dict) -> dict:
    """``DatasetInfo.from_dict(info).to_dict()``: known fields in order, ``tools`` only if set."""
    out = {key: info.get(key, default) for key, default in LEROBOT_INFO_DEFAULTS.items()}
    if out["tools"] is None:
        del out["tools"]
    return out


def _push_to_hub(local: dict[str, LocalFile], target: PushTarget, name: str, endpoint) -> dict:
    """One attempt: compare the branch with the dataset (``local``: its files, hashed), commit
    what differs in bounded batches (:func:`_batches`), tag ``v3.0``.

    Each commit uploads its files' LFS objects first, ``UPLOAD_THREADS`` at a time; an object
    the Hub already stores (uploaded by a killed attempt whose commit never came) is skipped by
    the LFS batch API, and a file the branch already holds is not even offered, so a rerun
    uploads each file at most once."""
    from huggingface_hub import CommitOperationAdd, CommitOperationDelete, HfApi

    api = HfApi(endpoint=endpoint)
    repo_id, branch = target.repo_id, target.branch
    api.create_repo(repo_id, repo_type="dataset", private=target.private, exist_ok=True)
    if branch != "main":
        api.create_branch(repo_id, repo_type="dataset", branch=branch, exist_ok=True)
    refs = api.list_repo_refs(repo_id, repo_type="dataset")
    head = next(r.target_commit for r in refs.branches if r.name == branch)
    tags = {r.name: r.target_commit for r in refs.tags}
    remote = _hub_tree(api, repo_id, head)

    info = json.loads(local[INFO_PATH].path.read_text())
    card = dataset_card(info, repo_id, target.license, target.tags).encode()
    version = _hub_version(api, repo_id, head, remote, local)
    _refuse_other_dataset(target, name, f"{target.name} (branch {branch})", local, remote, version)
    tagged = tags.get(CODEBASE_VERSION)
    if tagged not in (None, head):
        tagged_meta = _hub_tree(api, repo_id, tagged, "meta")
        tagged_version = _hub_version(api, repo_id, tagged, tagged_meta, local)
        where = f"{target.name} (tag {CODEBASE_VERSION})"
        _refuse_other_dataset(target, name, where, local, tagged_meta, tagged_version)
    if OLD_VERSION not in tags and version == OLD_VERSION:
        log.info("tagging the v2.1 dataset on %s as %s", target.name, OLD_VERSION)
        api.create_tag(repo_id, tag=OLD_VERSION, revision=head, repo_type="dataset")

    changed = [path for path, f in local.items() if not _same(remote.get(path), f)]
    card_changed = not _same(remote.get(CARD), _bytes_file(card))
    stale = [p for p in remote if p.split("/")[0] in DATASET_FOLDERS and p not in local]
    commits, pr_url = [], None
    if changed or card_changed or stale:
        bulk = [_addition(local[p], p) for p in changed if not p.startswith("meta/")]
        last = [_addition(local[p], p) for p in changed if p.startswith("meta/")]
        last += [CommitOperationAdd(CARD, card)] if card_changed else []
        last += [CommitOperationDelete(p) for p in stale]
        operations = _batches(bulk, last, target.files_per_commit)
        revision = branch
        for i, ops in enumerate(operations, 1):
            part = f" ({i}/{len(operations)})" if len(operations) > 1 else ""
            commit = api.create_commit(
                repo_id,
                ops,
                commit_message=target.commit_message + part,
                repo_type="dataset",
                revision=revision,
                create_pr=target.create_pr and i == 1,
                parent_commit=head,
                num_threads=UPLOAD_THREADS,
            )
            log.info("committed %d files to %s: %s", len(ops), target.name, commit.oid)
            if commit.pr_url:
                pr_url, revision = commit.pr_url, commit.pr_revision
            head = commit.oid
            commits.append(commit.oid)
    tag = None
    if not target.create_pr:
        tag = CODEBASE_VERSION
        if tags.get(CODEBASE_VERSION) != head:
            if CODEBASE_VERSION in tags:
                api.delete_tag(repo_id, tag=CODEBASE_VERSION, repo_type="dataset")
            api.create_tag(repo_id, tag=CODEBASE_VERSION, revision=head, repo_type="dataset")
    uploaded = changed + ([CARD] if card_changed else [])
    return {
        "revision": head,
        "tag": tag,
        "commits": commits,
        "pr_url": pr_url,
        "uploaded_files": len(uploaded),
        "uploaded_bytes": sum(local[p].size if p in local else len(card) for p in uploaded),
        "deleted_files": len(stale),
    }


def _addition(file: LocalFile, path_in_repo: str):
    """The ``CommitOperationAdd`` of ``file``, its SHA-256 given so that huggingface_hub does
    not read the file again to hash it (it reads it once more, to upload it)."""
    from huggingface_hub import CommitOperationAdd

    operation = CommitOperationAdd(path_in_repo, str(file.path))
    if not getattr(
        operation.upload_info, "is_hashed", True
    ):  # hashed lazily (recent huggingface_hub)
        operation.upload_info.sha256 = bytes.fromhex(file.sha256)
    return operation


def _batches(bulk: list, last: list, size: int) -> list[list]:
    """One commit if all fits, else ``bulk`` in commits of ``size`` and ``last`` after them
    (``meta/``, the card and deletions: the branch turns into the new dataset in its last
    commit). So at most ``ceil(len(bulk) / size) + 1`` commits; a rerun after a kill offers
    only the files no commit holds yet, so the bound holds for both runs together."""
    if len(bulk) + len(last) <= size:
        return [bulk + last]
    return [bulk[i : i + size] for i in range(0, len(bulk), size)] + [last]


def _hub_tree(api, repo_id: str, revision: str, folder: str | None = None) -> dict:
    """{path: RepoFile} of a Hub revision (below ``folder`` if given; {} if it is absent)."""
    from huggingface_hub import RepoFile
    from huggingface_hub.errors import RemoteEntryNotFoundError

    try:
        entries = api.list_repo_tree(
            repo_id, folder, recursive=True, revision=revision, repo_type="dataset"
        )
        return {e.path: e for e in entries if isinstance(e, RepoFile)}
    except RemoteEntryNotFoundError:
        return {}


def _same(remote, local: LocalFile) -> bool:
    """Whether a Hub file (``RepoFile`` or None) holds ``local``'s bytes."""
    if remote is None:
        return False
    if remote.lfs is not None:
        return remote.lfs.sha256 == local.sha256
    return remote.blob_id == local.git_oid


def _bytes_file(data: bytes) -> LocalFile:
    git = hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()
    return LocalFile(Path(), len(data), hashlib.sha256(data).hexdigest(), git)


def _hub_version(api, repo_id: str, revision: str, remote: dict, local: dict) -> str | None:
    """The ``codebase_version`` in ``meta/info.json`` at a Hub revision (``remote``: its
    files), or None; read from the Hub only when that file is not the local one."""
    if INFO_PATH not in remote:
        return None
    if _same(remote[INFO_PATH], local[INFO_PATH]):
        return CODEBASE_VERSION
    with tempfile.TemporaryDirectory() as tmp:
        path = api.hf_hub_download(
            repo_id, INFO_PATH, repo_type="dataset", revision=revision, local_dir=tmp
        )
        return json.loads(Path(path).read_text()).get("codebase_version")


def _refuse_other_dataset(target, name, where, local, remote, version) -> None:
    """Raise unless ``remote`` (a Hub revision's files, holding a dataset of ``version``)
    holds no v3.0 dataset, this dataset (the same ``meta/``), or ``overwrite`` is set."""
    remote_meta = {p: f for p, f in remote.items() if p.startswith("meta/")}
    local_meta = {p: f for p, f in local.items() if p.startswith("meta/")}
    same = remote_meta.keys() == local_meta.keys() and all(
        _same(remote_meta[p], f) for p, f in local_meta.items()
    )
    if version == CODEBASE_VERSION and not same and not target.overwrite:
        raise DatasetError(name, _refusal(where))


def _refusal(where: str) -> str:
    return (
        f"push: {where} already holds a different dataset; push it elsewhere, "
        "or set push.overwrite: true to replace it"
    )


# --- fsspec URLs -----------------------------------------------------------------------


def _push_to_url(files: dict[str, Path], target: PushTarget, name: str) -> dict:
    """One attempt: copy the files missing on the target (by path and size), ``meta/`` last
    and ``meta/info.json`` last of all, then delete the target's files the dataset lacks."""
    from fsspec.implementations.local import LocalFileSystem

    # a filesystem of its own, with the read timeouts: no pooled connection of an earlier
    # attempt's, or of another push's to a server that has stopped, no earlier listing
    fs, base = open_url(target.url, target.storage_options)
    if isinstance(fs, LocalFileSystem):
        fs = LocalFileSystem(auto_mkdir=True)  # make the folder's subfolders
    remote = _url_tree(fs, base)
    if INFO_PATH in remote and not _same_meta(fs, base, files, remote):
        if not target.overwrite:
            raise DatasetError(name, _refusal(target.url))
        log.info("overwriting the dataset at %s", target.url)
        fs.rm([f"{base}/{p}" for p in sorted(remote, key=lambda p: p != INFO_PATH)])
        remote = {}
    missing = [p for p, local in files.items() if remote.get(p) != local.stat().st_size]
    order = sorted(missing, key=lambda p: (p.startswith("meta/"), p == INFO_PATH))
    bulk = [p for p in order if not p.startswith("meta/")]
    if bulk:
        fs.put([str(files[p]) for p in bulk], [f"{base}/{p}" for p in bulk])
    for p in order[len(bulk) :]:
        fs.put_file(str(files[p]), f"{base}/{p}")
    stale = [p for p in remote if p not in files]
    if stale:
        fs.rm([f"{base}/{p}" for p in stale])
    return {
        "revision": None,
        "tag": None,
        "commits": [],
        "pr_url": None,
        "uploaded_files": len(missing),
        "uploaded_bytes": sum(files[p].stat().st_size for p in missing),
        "deleted_files": len(stale),
    }


def _url_tree(fs, base: str) -> dict[str, int]:
    """{relative path: size} of the dataset files under ``base`` ({} if absent)."""
    if not fs.exists(base):
        return {}
    tree = {}
    for path, info in fs.find(base, detail=True).items():
        rel = path[len(base) :].lstrip("/")
        if rel.split("/")[0] in DATASET_FOLDERS and info.get("type") != "directory":
            tree[rel] = info["size"]
    return tree


def _same_meta(fs, base: str, files: dict[str, Path], remote: dict[str, int]) -> bool:
    """Whether the target's ``meta/`` files are the dataset's, byte for byte."""
    local_meta = {p for p in files if p.startswith("meta/")}
    if local_meta != {p for p in remote if p.startswith("meta/")}:
        return False
    return all(fs.cat_file(f"{base}/{p}") == files[p].read_bytes() for p in sorted(local_meta))
