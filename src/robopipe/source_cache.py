"""A remote v2.1 source (a Hub dataset repo, or a folder at any fsspec URL) that the jobs read
file by file: the ``plan`` job lists it once into a manifest (an SQLite file: each job looks
up only the files it reads, whatever the dataset's size); the plan and the check read its
metadata files, parquet footers and mp4 headers by range reads; each shard and aggregate job
fetches only the files it reads into a cache folder.

The cache mirrors the dataset's layout under a folder named by a digest of the URL (pinned to
a commit for the Hub): ``<cache>/<key>/meta/info.json``, ``<cache>/<key>/data/...``; so a cached
source is a v2.1 folder to every reader. (A file changed in place at a non-Hub URL, keeping its
size, is not noticed: remove the cache.) One file lock per file (``filelock``, which
huggingface_hub uses too) makes the jobs of one node fetch each file once: a job that finds a
file complete in the cache reads it from there. Downloads are resumable and verified: a file is
read in blocks of :data:`DOWNLOAD_BLOCK` (range requests, through the same fsspec buffered
file the metadata reads use) and appended to ``.<name>.part``, which a killed job leaves for
the next one to continue; the size is compared with the listing's, and the sha256 with the
Hub's LFS oid where the Hub gives one; the file is renamed into place only once complete and
verified. (huggingface_hub 2.4's ``hf_hub_download`` restarts an interrupted download from
zero, in a temporary file of its own: it does not resume.)

The cache folder (``cache_dir``) may name environment variables (``$TMPDIR/robopipe/...``),
expanded by each job on its own node, so a cluster's nodes each fill a cache on a local disk.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import sqlite3
import threading
from collections.abc import Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from robopipe import hub
from robopipe.atomic import atomic_path
from robopipe.errors import DatasetError
from robopipe.formats.v21_reader import V21_META_FILES, V21Source, load_source
from robopipe.formats.v30_reader import open_file, open_url, retrying_file
from robopipe.layout import DATASET_FOLDERS
from robopipe.retry import DEFAULT_BUDGET, RetryBudget, call

MANIFEST_VERSION = 1
MANIFEST_SUFFIX = ".sqlite"
HUB_SCHEME = "hf://datasets/"
FOOTER_READERS = 16  # parquet footers read at once (read_ahead)
FOOTER_AHEAD = 256  # footers read ahead of the one asked for, at most
RANGE_BLOCK = 64 * 1024  # the least bytes one range request of an mp4 or parquet fetches
DOWNLOAD_BLOCK = 8 * 2**20  # bytes of one range request of a download
FETCH_THREADS = 4  # files one job fetches at once
LOCKS = ".locks"  # the cache's lock files, one per source file


@dataclass
class RemoteSource:
    """A listed remote v2.1 dataset and its cache.

    Attributes:
        name: the dataset name (for messages).
        url: ``hf://datasets/<repo_id>@<commit sha>`` for a Hub repo (pinned to the commit the
            revision named when it was listed), else the fsspec URL of the dataset folder.
        cache: the cache folder as configured (environment variables unexpanded).
        files: ``{path relative to the dataset root: [size in bytes, sha256 hex or None]}``
            (a dict when listed, a :class:`ManifestFiles` when loaded from a manifest).
        storage_options: fsspec options of ``url`` (credentials, ``client_kwargs``).
        retry: how long each range request is retried (``robopipe.retry.RetryBudget``'s
            config: ``attempts``, ``seconds``, ``read_timeout_s``).
    """

    name: str
    url: str
    cache: str
    files: Mapping[str, list]
    storage_options: dict = field(default_factory=dict)
    retry: dict = field(default_factory=dict)
    _ahead: dict = field(default_factory=dict, repr=False, compare=False)
    _queue: Iterator | None = field(default=None, repr=False, compare=False)
    _readers: ThreadPoolExecutor | None = field(default=None, repr=False, compare=False)

    @property
    def root(self) -> Path:
        """Where this listing's files are cached on this node: a folder of the cache
        (environment variables expanded) named by a digest of :attr:`url`, so that a Hub
        revision that moved to another commit never reads a file cached from the old one."""
        key = hashlib.sha256(self.url.encode()).hexdigest()[:16]
        return Path(os.path.expandvars(self.cache)) / key

    @property
    def hub_repo(self) -> tuple[str, str] | None:
        """``(repo_id, commit)`` of a Hub source, else None."""
        if not self.url.startswith(HUB_SCHEME):
            return None
        repo_id, commit = self.url[len(HUB_SCHEME) :].rsplit("@", 1)
        return repo_id, commit

    def save(self, path: str | Path) -> None:
        """Write the manifest to ``path`` atomically: an SQLite file of two tables, ``source``
        (``version``, ``name``, ``url``, ``cache``, ``storage_options``, ``retry`` as JSON) and
        ``files``
        (``path``, ``size``, ``sha256``), read back by :func:`load_manifest`."""
        header = {
            "version": MANIFEST_VERSION,
            "name": self.name,
            "url": self.url,
            "cache": self.cache,
            "storage_options": self.storage_options,
            "retry": self.retry,
        }
        with atomic_path(path) as tmp:
            db = sqlite3.connect(tmp)
            db.execute("CREATE TABLE source (key TEXT PRIMARY KEY, value TEXT)")
            db.executemany("INSERT INTO source VALUES (?, ?)", _json_rows(header))
            db.execute("CREATE TABLE files (path TEXT PRIMARY KEY, size INTEGER, sha256 TEXT)")
            rows = ((rel, size, sha256) for rel, (size, sha256) in self.files.items())
            db.executemany("INSERT INTO files VALUES (?, ?, ?)", rows)
            db.commit()
            db.close()

    def size(self, rel: str) -> int:
        """The listed size of ``rel`` in bytes. Raises ``FileNotFoundError`` if not listed."""
        try:
            return self.files[rel][0]
        except KeyError:
            raise FileNotFoundError(rel) from None

    def cached(self, rel: str) -> Path | None:
        """``rel``'s path in the cache when it is there complete (its listed size), else None."""
        path = self.root / rel
        try:
            return path if path.stat().st_size == self.size(rel) else None
        except FileNotFoundError:
            return None

    def open(self, rel: str, block_size: int = RANGE_BLOCK, cache_type: str = "readahead"):
        """A seekable binary file of ``rel`` read by range requests of at least
        ``block_size`` bytes (fsspec's buffered file and ``cache_type``), each checked for
        length and retried within :attr:`retry` (``robopipe.formats.v30_reader.retrying_file``).
        Raises ``FileNotFoundError`` if not listed."""
        size = self.size(rel)
        budget = RetryBudget.from_config(self.retry)
        if repo := self.hub_repo:
            f = hub.HubRangeFile(*repo, rel, size, block_size, cache_type)
            return retrying_file(f, f"{self.url}/{rel}", budget)
        fs, root = self._fs()
        options = dict(block_size=block_size, cache_type=cache_type, size=size)
        return open_file(fs, f"{root}/{rel}", budget, **options)

    def readable(self, rel: str):
        """What pyarrow and PyAV open ``rel`` from: its cached path where it is cached, else a
        range-read file (:meth:`open`)."""
        cached = self.cached(rel)
        return str(cached) if cached else self.open(rel)

    def parquet_metadata(self, rel: str):
        """``rel``'s parquet footer (``pyarrow.parquet.FileMetaData``), from the cache or by
        range reads of the footer alone (:func:`read_parquet_footer`)."""
        if rel in self._ahead:
            future = self._ahead.pop(rel)
            self._read_more()
            return future.result()
        return self._footer(rel)

    def read_ahead(self, rels) -> None:
        """Read the footers of the parquet files ``rels`` ahead, :data:`FOOTER_READERS` at
        once and at most :data:`FOOTER_AHEAD` ahead of the next :meth:`parquet_metadata` call
        (which should ask for them in this order): a plan of a remote source waits on one
        round trip per :data:`FOOTER_READERS` files, not per file."""
        if self._readers is None:
            self._readers = ThreadPoolExecutor(FOOTER_READERS)
        self._queue = iter(rels)
        self._read_more()

    def _read_more(self) -> None:
        while self._queue is not None and len(self._ahead) < FOOTER_AHEAD:
            rel = next(self._queue, None)
            if rel is None:
                self._queue = None
                break
            self._ahead[rel] = self._readers.submit(self._footer, rel)

    def _footer(self, rel: str):
        import pyarrow.parquet as pq

        cached = self.cached(rel)
        if cached:
            return pq.read_metadata(cached)
        with self.open(rel, cache_type="none") as f:  # exactly the bytes asked for
            return read_parquet_footer(f, self.size(rel))

    def fetch(self, rels) -> list[Path]:
        """Make each file of ``rels`` complete and verified in the cache (fetching those that
        are not, :data:`FETCH_THREADS` at a time) and return their cached paths, in order.

        Raises:
            DatasetError: a file is not listed, or its fetched bytes do not match the listed
                size or sha256 (the bad file is deleted).
        """
        rels = list(rels)
        for rel in rels:
            if rel not in self.files:
                raise DatasetError(self.name, "file is missing", file=rel)
        with ThreadPoolExecutor(FETCH_THREADS) as pool:
            return list(pool.map(self._fetch_one, rels))

    def _fetch_one(self, rel: str) -> Path:
        from filelock import FileLock

        if cached := self.cached(rel):
            return cached
        lock = self.root / LOCKS / f"{rel}.lock"
        lock.parent.mkdir(parents=True, exist_ok=True)
        with FileLock(lock):
            if cached := self.cached(rel):  # another job fetched it while this one waited
                return cached
            path = self.root / rel
            part = path.with_name(f".{path.name}.part")
            self._download(rel, part)
            self._verify(rel, part)
            os.replace(part, path)
        return path

    def _download(self, rel: str, part: Path) -> None:
        """Append the bytes of ``rel`` that ``part`` lacks to it, a block at a time."""
        part.parent.mkdir(parents=True, exist_ok=True)
        done = part.stat().st_size if part.exists() else 0
        if done > self.size(rel):  # not a prefix of this file
            part.unlink()
            done = 0
        with self.open(rel, DOWNLOAD_BLOCK, "none") as src, open(part, "ab") as dst:
            src.seek(done)
            while block := src.read(DOWNLOAD_BLOCK):
                dst.write(block)

    def _verify(self, rel: str, path: Path) -> None:
        size, sha256 = self.files[rel]
        problem = None
        if path.stat().st_size != size:
            problem = f"fetched {path.stat().st_size} bytes, the listing says {size}"
        elif sha256 and file_sha256(path) != sha256:
            problem = f"fetched bytes do not match the Hub's sha256 {sha256}"
        if problem:
            path.unlink()  # the next attempt starts over
            raise DatasetError(self.name, f"{problem} ({self.url}); run again", file=rel)

    def _fs(self):
        return open_url(self.url, self.storage_options, RetryBudget.from_config(self.retry))


def list_remote(
    name: str,
    cache: str,
    *,
    repo_id: str | None = None,
    revision: str | None = None,
    url: str | None = None,
    storage_options: dict | None = None,
    retry_budget: RetryBudget = DEFAULT_BUDGET,
) -> RemoteSource:
    """List a remote v2.1 dataset: the Hub repo ``repo_id`` at ``revision`` (pinned to the
    commit it names now), or the folder at fsspec ``url`` (``hf://datasets/<repo>@<rev>``
    URLs are read as the Hub repo they name). Reads the listing only, no file; each request
    (and every later range request of the source) is retried within ``retry_budget``.

    Raises:
        DatasetError: the repo, revision or folder does not exist, or it holds no
            ``meta/info.json``.
    """
    if url and url.startswith(HUB_SCHEME):
        repo_id, _, revision = url[len(HUB_SCHEME) :].rstrip("/").partition("@")
        revision = revision or "main"
    budget = retry_budget
    if repo_id:
        where = f"{HUB_SCHEME}{repo_id}@{revision}"
        commit = call(lambda: hub.resolve_commit(repo_id, revision, name=name), where, budget)
        files = call(lambda: hub.list_files(repo_id, commit), where, budget)
        return RemoteSource(
            name, f"{HUB_SCHEME}{repo_id}@{commit}", cache, files, retry=budget.to_config()
        )
    fs, root = open_url(url, storage_options, budget)
    try:
        found = call(lambda: fs.find(root, detail=True), url, budget)
    except FileNotFoundError:
        found = {}
    files = {
        os.path.relpath(path, root): [int(entry["size"]), None]
        for path, entry in found.items()
        if entry.get("type", "file") == "file"
        and os.path.relpath(path, root).split("/")[0] in DATASET_FOLDERS
    }
    if "meta/info.json" not in files:
        raise DatasetError(name, f"no meta/info.json at {url}; check `url`")
    return RemoteSource(
        name, url, cache, files, dict(storage_options or {}), retry=budget.to_config()
    )


class ManifestFiles(Mapping):
    """The ``files`` table of a manifest as a read-only mapping ``{path: [size, sha256]}``,
    looked up in the SQLite file (nothing is loaded: a job's memory does not grow with the
    dataset's file count). Safe to share between threads."""

    def __init__(self, path: str | Path) -> None:
        uri = f"{Path(path).resolve().as_uri()}?mode=ro&immutable=1"
        self._db = sqlite3.connect(uri, uri=True, check_same_thread=False)
        self._lock = threading.Lock()

    def _query(self, sql: str, *args) -> list[tuple]:
        with self._lock:
            return self._db.execute(sql, args).fetchall()

    def __getitem__(self, rel: str) -> list:
        rows = self._query("SELECT size, sha256 FROM files WHERE path = ?", rel)
        if not rows:
            raise KeyError(rel)
        return list(rows[0])

    def __iter__(self) -> Iterator[str]:
        return (row[0] for row in self._query("SELECT path FROM files ORDER BY path"))

    def __len__(self) -> int:
        return self._query("SELECT count(*) FROM files")[0][0]


def load_manifest(path: str | Path) -> RemoteSource:
    """The :class:`RemoteSource` a manifest written by :meth:`RemoteSource.save` holds, its
    files looked up in the manifest as needed (:class:`ManifestFiles`).

    Raises:
        ValueError: the manifest is of another version.
    """
    files = ManifestFiles(path)
    header = {key: json.loads(value) for key, value in files._query("SELECT * FROM source")}
    if header.get("version") != MANIFEST_VERSION:
        raise ValueError(f"{path}: manifest version {header.get('version')}, rerun the plan")
    return RemoteSource(
        header["name"],
        header["url"],
        header["cache"],
        files,
        header["storage_options"] or {},
        header.get("retry") or {},
    )


def is_manifest(root: str | Path) -> bool:
    """Whether a source location names a manifest (a ``.sqlite`` file), not a folder."""
    return str(root).endswith(MANIFEST_SUFFIX)


def _json_rows(header: dict) -> list[tuple[str, str]]:
    return [(key, json.dumps(value)) for key, value in header.items()]


def read_parquet_footer(f, size: int):
    """The ``FileMetaData`` of the parquet file ``f`` (``size`` bytes) from its footer alone:
    two reads, its last 8 bytes, then the footer.

    Parquet ends with the footer, its length (4 bytes, little-endian) and ``PAR1``; pyarrow
    reads metadata from any buffer shaped like that, so only the footer travels (pyarrow's own
    reader fetches at least 64 KiB, the whole of a small file).

    Raises:
        ValueError: the file does not end with a parquet footer.
    """
    import pyarrow as pa
    import pyarrow.parquet as pq

    if size < 12:
        raise ValueError(f"not a parquet file: {size} bytes")
    f.seek(size - 8)
    end = f.read(8)
    if end[-4:] != b"PAR1":
        raise ValueError("not a parquet file: no PAR1 magic at its end")
    length = int.from_bytes(end[:4], "little")
    if length + 12 > size:
        raise ValueError(f"parquet footer length {length} exceeds the file ({size} bytes)")
    f.seek(size - 8 - length)
    footer = f.read(length)
    return pq.read_metadata(pa.BufferReader(b"PAR1" + footer + end))


def file_sha256(path: Path) -> str:
    """SHA-256 hex digest of a file."""
    with open(path, "rb") as f:
        return hashlib.file_digest(f, "sha256").hexdigest()


def remove_cache(cache: str) -> bool:
    """Remove the cache folder ``cache`` (environment variables expanded) on this node;
    True if there was one."""
    root = Path(os.path.expandvars(cache))
    if not root.is_dir():
        return False
    shutil.rmtree(root)
    return True


def fetch_shard_files(source, plan, shard_id: str) -> None:
    """Fetch what shard job ``shard_id`` reads of a remote source: its episodes' parquets, and
    with ``compute_missing_stats`` their mp4s too (the stats of an episode are computed from
    its frames). A local source has them: nothing is done."""
    episodes = [e.source_episode_index for e in plan.shard_episodes(shard_id)]
    paths = [source.data_file(i) for i in episodes]
    if plan.options.compute_missing_stats:
        paths += [source.video_file(i, key) for i in episodes for key in source.video_keys]
    source.fetch(paths)


def fetch_data_file_sources(source, plan, chunk: int, file: int) -> None:
    """Fetch the parquets of the episodes of final data file ``(chunk, file)`` (which its job
    checks row by row against the source)."""
    source.fetch(
        source.data_file(e.source_episode_index) for e in plan.episodes if e.data == (chunk, file)
    )


def fetch_video_file_sources(source, plan, video_key: str, chunk: int, file: int) -> None:
    """Fetch the mp4s of camera ``video_key`` that final video file ``(chunk, file)`` is
    remuxed from."""
    source.fetch(
        source.video_file(e.source_episode_index, video_key)
        for e in plan.episodes
        if e.videos[video_key] == (chunk, file)
    )


def source_root(root: str | Path, name: str) -> tuple[Path, RemoteSource | None]:
    """The folder a v2.1 source's readers open, and its remote (or None): ``root`` itself
    for a local folder; for the manifest of a remote source (a ``.sqlite`` file, written by the
    plan job), its cache folder, with the meta files fetched into it.

    Raises:
        DatasetError: a meta file's download does not verify.
    """
    if not is_manifest(root):
        return Path(root), None
    remote = load_manifest(root)
    remote.fetch(rel for rel in V21_META_FILES if rel in remote.files)
    return remote.root, remote


def load_v21(root: str | Path, name: str, *, template_placeholders: bool = False) -> V21Source:
    """:func:`robopipe.formats.v21_reader.load_source` of a local v2.1 folder or of a remote
    source's manifest (:func:`source_root`).

    Raises:
        DatasetError: as :func:`source_root` and :func:`robopipe.formats.v21_reader.load_source`.
    """
    folder, remote = source_root(root, name)
    return load_source(folder, name, template_placeholders=template_placeholders, remote=remote)
