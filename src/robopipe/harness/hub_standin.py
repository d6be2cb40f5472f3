"""A stand-in for the Hugging Face Hub on 127.0.0.1: dataset repos made of commits, branches
and tags, served at the endpoints ``huggingface_hub`` 2.4 calls.

Reading (``snapshot_download(repo_type="dataset", revision=..., allow_patterns=...)`` and
``HfFileSystem``, ``hf://datasets/<repo>@<revision>/...``: ``ls``, ``info``, ``find``, ``open``
with Range reads):

- ``GET /api/datasets/{repo}[/revision/{revision}]``: repo info, ``sha`` and ``siblings``
  (``HfApi.dataset_info``, hf_api.py:3273).
- ``GET /api/datasets/{repo}/tree/{revision}[/{path}]?recursive=&cursor=``: folder listing,
  paginated with a ``Link: <...>; rel="next"`` header as the Hub does (``_paginate_pages``,
  utils/_pagination.py:26; the Hub's pages hold 1000 entries). LFS files carry an ``lfs``
  entry (``RepoFile``, hf_api.py:711).
- ``POST /api/datasets/{repo}/paths-info/{revision}`` (form field ``paths``): info of paths
  (``HfApi.get_paths_info``, hf_api.py:4331).
- ``HEAD`` / ``GET /datasets/{repo}/resolve/{revision}/{path}``: the file, with ``ETag`` (its
  git blob id; the sha256 of an LFS file, also as ``X-Linked-Etag``), ``X-Repo-Commit``,
  ``Content-Length`` and ``Range`` (206), through
  :class:`robopipe.bench.servers.RangeRequestHandler` (``get_hf_file_metadata``,
  file_download.py:1670).
- ``GET /api/datasets/{repo}/refs`` and ``GET /api/datasets/{repo}/commits/{revision}``
  (``list_repo_refs``, ``list_repo_commits``).

Writing (``create_repo``, ``create_commit`` / ``upload_folder``, ``create_branch``,
``create_tag``, ``delete_tag``):

- ``POST /api/repos/create``: a new repo holds one commit with a ``.gitattributes`` on
  ``main``, as on the Hub; 409 if it exists.
- ``POST /api/validate-yaml``: the dataset card's metadata (always valid here).
- ``POST /api/datasets/{repo}/preupload/{revision}``: ``uploadMode`` per file (``lfs`` for
  binary content, 10 MiB or more, or a path the revision's ``.gitattributes`` sends to LFS;
  else ``regular``) and the file's current ``oid`` (sha256 of an LFS file, else its git blob
  id), from which the client leaves unchanged files out (``_fetch_upload_modes``,
  _commit_api.py:703).
- ``POST /datasets/{repo}.git/info/lfs/objects/batch``: the LFS batch API, ``basic`` transfer;
  an object already stored gets no ``actions``, so the client skips it (``_upload_lfs_files``,
  _commit_api.py:465).
- ``PUT /lfs-upload/{sha256}``: one LFS object; stored only when its sha256 and size match.
- ``POST /api/datasets/{repo}/commit/{revision}[?create_pr=1]``: the ndjson commit
  (``header``, ``file``, ``lfsFile``, ``deletedFile``, ``deletedFolder``; ``parentCommit``
  checked, 412 if stale); with ``create_pr`` the commit goes to a new ``refs/pr/<n>``.
- ``POST`` / ``DELETE /api/datasets/{repo}/branch/{branch}``, ``POST
  /api/datasets/{repo}/tag/{revision}`` (``{"tag": ...}``), ``DELETE
  /api/datasets/{repo}/tag/{tag}``: 409 for an existing name, 404 for a missing one.

Storage buckets (``HfFileSystem``'s ``hf://buckets/<namespace>/<name>/<path>``: ``ls``,
``info``, ``find``, ``open`` with Range reads; ``HfApi.bucket_info``, ``list_bucket_tree``,
``get_bucket_paths_info``), read-only, given as folders (``serve_hub(buckets=...)``):

- ``GET /api/buckets/{bucket}``: ``id``, ``private``, ``createdAt``, ``size``, ``totalFiles``
  (``BucketInfo``, _buckets.py:65; ``HfFileSystem.resolve_path`` asks it once per bucket).
  An unknown bucket is a 404 with ``X-Error-Code: RepoNotFound``, which
  ``hf_raise_for_status`` turns into ``BucketNotFoundError`` on ``/api/buckets/`` URLs.
- ``GET /api/buckets/{bucket}/tree[/{prefix}]?recursive=``: the prefix (one URL-quoted
  segment, ``list_bucket_tree``, hf_api.py:14302) names a folder (its entries) or a file
  (that file); without ``recursive`` the files and folders one level down, with it every
  file below and no folders (``HfFileSystem`` rebuilds them,
  ``_list_bucket_tree_with_folders``); paginated like the repo tree. Entries as
  ``BucketFile`` / ``BucketFolder`` (_buckets.py:197): ``type``, ``path``, ``size``,
  ``xetHash``, ``mtime``, ``uploadedAt``. The Hub matches the prefix lexically (``logs``
  also lists ``logs_old/...``, which the client drops); the stand-in lists only the folder.
- ``POST /api/buckets/{bucket}/paths-info`` (JSON ``{"paths": [...]}``): the entries of
  the files among them (``get_bucket_paths_info``).
- ``HEAD`` / ``GET /buckets/{bucket}/resolve/{path}``: the file, with Range (206)
  (``HfFileSystem.url``, ``HfFileSystemFile._fetch_range``).

A bucket file's ``xetHash`` is its sha256 here (the Hub's is Xet's content hash): the
stand-in serves no Xet, so bucket files are read over ``resolve`` only (``open``,
``cat_file``; not ``get_file``, which downloads through Xet where ``hf_xet`` is installed and
``HF_HUB_DISABLE_XET`` is unset), and writes to buckets (``batch_bucket_files``, which
uploads through Xet) are not served.

The Hub's Xet storage is not served: a client uploading here sets ``HF_HUB_DISABLE_XET=1``
(``client_env`` does), and huggingface_hub then uses the LFS protocol above. With a ``token``,
write requests without ``Authorization: Bearer <token>`` get 401.

A revision is a branch or tag name, ``refs/pr/<n>`` or a commit sha. Errors carry the
``X-Error-Code`` header that ``hf_raise_for_status`` (utils/_http.py:871) turns into
``RepositoryNotFoundError``, ``RevisionNotFoundError`` or ``RemoteEntryNotFoundError``.
Repos given as folders are read once, when the server starts, as plain git blobs (no LFS);
uploaded content lives in a temporary folder (under ``storage_dir`` if given: a tmpfs folder
makes 50,000 uploads much cheaper) removed when the server stops. Tests can make a request
fail (``fail_next``), hold LFS uploads unanswered (``hold_uploads_after``), and count the LFS
objects stored (``uploads``).

Responses go out with ``TCP_NODELAY``: a response is written as headers, then body, and with
Nagle's algorithm the body waited for the client's delayed ACK (about 40 ms on Linux), which
made each request of a many-file push take 40 ms.
"""

from __future__ import annotations

import base64
import contextlib
import fnmatch
import hashlib
import itertools
import json
import os
import re
import sys
import tempfile
import threading
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import parse_qs, quote, unquote, urlencode, urlsplit

from robopipe.bench.servers import QuietServer, RangeRequestHandler
from robopipe.layout import DATASET_FOLDERS

REPO = r"(?P<repo>[^/]+/[^/]+)"
API = re.compile(
    rf"^/api/datasets/{REPO}(?:/(?P<op>revision|tree|paths-info|preupload|commit|commits|tag"
    r"|branch)/(?P<rev>[^/]+)(?:/(?P<path>.*))?|/(?P<refs>refs))?$"
)
RESOLVE = re.compile(rf"^/datasets/{REPO}/resolve/(?P<rev>[^/]+)/(?P<path>.+)$")
LFS_BATCH = re.compile(rf"^/datasets/{REPO}\.git/info/lfs/objects/batch$")
LFS_UPLOAD = re.compile(r"^/lfs-upload/(?P<oid>[0-9a-f]{64})$")
BUCKET = r"(?P<bucket>[^/]+/[^/]+)"
BUCKET_API = re.compile(
    rf"^/api/buckets/{BUCKET}(?:/(?P<op>tree|paths-info)(?:/(?P<prefix>[^/]+))?)?$"
)
BUCKET_RESOLVE = re.compile(rf"^/buckets/{BUCKET}/resolve/(?P<path>.+)$")
HUB_PAGE_SIZE = 1000  # entries per page of the Hub's tree endpoint (hf_api.py:4013)
LFS_THRESHOLD = 10 * 1024 * 1024  # the Hub stores files of 10 MiB or more in LFS
# the .gitattributes of a new Hub repo (an excerpt: the LFS patterns of dataset files)
GITATTRIBUTES = "".join(
    f"{pattern} filter=lfs diff=lfs merge=lfs -text\n"
    for pattern in ("*.parquet", "*.mp4", "*.arrow", "*.bin", "*.png", "*.jpg", "*.tar")
)
HELD_UPLOAD_TIMEOUT_S = 120.0


@dataclass
class Blob:
    """One file's bytes (``file``), stored in git (``lfs`` False) or in LFS."""

    file: Path
    lfs: bool = False
    _ids: dict[str, str] = field(default_factory=dict, repr=False)
    _size: int | None = field(default=None, repr=False)

    @property
    def size(self) -> int:
        if self._size is None:
            self._size = self.file.stat().st_size
        return self._size

    def _digests(self) -> dict[str, str]:
        if not self._ids:
            data = self.file.read_bytes()
            self._ids["sha256"] = hashlib.sha256(data).hexdigest()
            self._ids["git"] = _git_blob_id(data)
        return self._ids

    @property
    def sha256(self) -> str:
        return self._digests()["sha256"]

    @property
    def blob_id(self) -> str:
        """The git blob id: of the content, or of the LFS pointer file for an LFS file."""
        return _git_blob_id(self.pointer()) if self.lfs else self._digests()["git"]

    def pointer(self) -> bytes:
        """The LFS pointer file git stores in place of an LFS file."""
        return (
            f"version https://git-lfs.github.com/spec/v1\noid sha256:{self.sha256}\n"
            f"size {self.size}\n"
        ).encode()

    @property
    def oid(self) -> str:
        """What ``preupload`` reports for a file: sha256 for LFS, else the git blob id."""
        return self.sha256 if self.lfs else self.blob_id

    @property
    def etag(self) -> str:
        return self.sha256 if self.lfs else self.blob_id


def _git_blob_id(data: bytes) -> str:
    """Git blob id: sha1 of ``b"blob <size>\\0" + content``."""
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


@dataclass
class Commit:
    """One commit: its files by repo path, its sha, parent and message."""

    sha: str
    files: dict[str, Blob]
    parent: str | None = None
    title: str = "initial commit"
    message: str = ""
    date: str = field(default_factory=lambda: time.strftime("%Y-%m-%dT%H:%M:%S.000Z"))
    folders: set[str] = field(init=False)

    def __post_init__(self):
        self.folders = {parent for path in self.files for parent in _parents(path)}

    def entry(self, path: str) -> dict | None:
        """The Hub's JSON entry of a file or folder (``RepoFile`` / ``RepoFolder``), or None."""
        if path in self.files:
            blob = self.files[path]
            entry = {"type": "file", "path": path, "size": blob.size, "oid": blob.blob_id}
            if blob.lfs:
                lfs = {"oid": blob.sha256, "size": blob.size, "pointerSize": len(blob.pointer())}
                entry["lfs"] = lfs
            return entry
        if path in self.folders:
            tree_id = hashlib.sha1(f"{self.sha}:{path}".encode()).hexdigest()
            return {"type": "directory", "path": path, "oid": tree_id}
        return None

    def listing(self, folder: str, recursive: bool) -> list[str] | None:
        """Paths below ``folder`` ("" for the root), folders included; None if not a folder."""
        if folder and folder not in self.folders:
            return None
        prefix = f"{folder}/" if folder else ""
        below = sorted(p for p in self.folders | set(self.files) if p.startswith(prefix))
        if recursive:
            return below
        return [p for p in below if "/" not in p[len(prefix) :]]

    def lfs_patterns(self) -> list[str]:
        """The patterns this commit's ``.gitattributes`` sends to LFS."""
        if ".gitattributes" not in self.files:
            return []
        lines = self.files[".gitattributes"].file.read_text().splitlines()
        return [line.split()[0] for line in lines if "filter=lfs" in line.split()[1:]]


def _iso(seconds: float) -> str:
    """A time as the Hub writes it: ``2026-11-25T18:00:00.000Z``."""
    return time.strftime("%Y-%m-%dT%H:%M:%S.000Z", time.gmtime(seconds))


@dataclass
class Bucket:
    """A storage bucket: files by path (no history, no refs), read-only here."""

    files: dict[str, Blob]
    private: bool = False
    created: str = field(default_factory=lambda: _iso(time.time()))
    folders: set[str] = field(init=False)

    def __post_init__(self):
        self.folders = {parent for path in self.files for parent in _parents(path)}

    def info(self, bucket_id: str) -> dict:
        """The Hub's ``BucketInfo`` JSON."""
        size = sum(blob.size for blob in self.files.values())
        info = {"id": bucket_id, "private": self.private, "createdAt": self.created}
        return {**info, "size": size, "totalFiles": len(self.files)}

    def entry(self, path: str) -> dict | None:
        """The Hub's ``BucketFile`` / ``BucketFolder`` JSON of a path, or None."""
        if path in self.files:
            blob = self.files[path]
            mtime = _iso(blob.file.stat().st_mtime)
            return {
                "type": "file",
                "path": path,
                "size": blob.size,
                "xetHash": blob.sha256,
                "mtime": mtime,
                "uploadedAt": mtime,
            }
        if path in self.folders:
            return {"type": "directory", "path": path, "uploadedAt": self.created}
        return None

    def listing(self, prefix: str, recursive: bool) -> list[str]:
        """Paths ``tree`` lists for ``prefix`` (a folder, a file, or "" for the root): files
        and folders one level down, or every file below if ``recursive``; [] if none."""
        if prefix in self.files:
            return [prefix]
        if prefix and prefix not in self.folders:
            return []
        below = f"{prefix}/" if prefix else ""
        if recursive:
            return sorted(p for p in self.files if p.startswith(below))
        entries = self.folders | set(self.files)
        return sorted(p for p in entries if p.startswith(below) and "/" not in p[len(below) :])


def _parents(path: str) -> list[str]:
    parts = path.split("/")[:-1]
    return ["/".join(parts[: i + 1]) for i in range(len(parts))]


@dataclass
class Repo:
    """A dataset repo: its commits by sha and its refs (name -> commit sha)."""

    commits: dict[str, Commit] = field(default_factory=dict)
    branches: dict[str, str] = field(default_factory=dict)
    tags: dict[str, str] = field(default_factory=dict)
    pulls: list[str] = field(default_factory=list)  # refs/pr/<n + 1> -> commit sha
    private: bool = False

    def resolve(self, name: str) -> Commit | None:
        """The commit a branch, tag, ``refs/pr/<n>`` or commit sha names, or None."""
        if match := re.fullmatch(r"refs/pr/(\d+)", name):
            n = int(match[1])
            return self.commits[self.pulls[n - 1]] if 0 < n <= len(self.pulls) else None
        sha = self.branches.get(name) or self.tags.get(name) or name
        return self.commits.get(sha)

    def add_commit(
        self, parent: Commit | None, files: dict[str, Blob], title: str, message: str = ""
    ) -> Commit:
        """A new commit on top of ``parent`` (not yet on any ref)."""
        listing = "".join(f"{p}\0{b.blob_id}\n" for p, b in sorted(files.items()))
        seed = f"{parent.sha if parent else ''}\n{len(self.commits)}\n{title}\n{listing}"
        sha = hashlib.sha1(seed.encode()).hexdigest()
        commit = Commit(sha, files, parent and parent.sha, title, message)
        self.commits[commit.sha] = commit
        return commit


def _scan(root: Path, lfs: tuple[str, ...] = ()) -> dict[str, Blob]:
    """The files of ``root`` by repo path; those whose name matches a pattern of ``lfs`` are
    LFS files."""
    root = Path(root)
    if not root.is_dir():
        raise FileNotFoundError(f"{root} is not a folder")
    return {
        p.relative_to(root).as_posix(): Blob(p, lfs=any(fnmatch.fnmatch(p.name, x) for x in lfs))
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


def _repo_from_folders(
    repo_id: str, revisions: dict[str, str | Path], lfs: tuple[str, ...] = ()
) -> Repo:
    """A repo whose refs name folders: ``main`` and other names not starting with ``v`` and a
    digit are branches, ``v2.1``-like names tags; one commit per distinct folder. Files whose
    name matches a pattern of ``lfs`` are LFS files."""
    repo = Repo()
    by_folder: dict[Path, Commit] = {}
    for name, root in revisions.items():
        folder = Path(root).resolve()
        if folder not in by_folder:
            files = _scan(folder, lfs)
            listing = "".join(f"{path}\0{b.size}\n" for path, b in files.items())
            sha = hashlib.sha1(f"{repo_id}@{name}\n{listing}".encode()).hexdigest()
            by_folder[folder] = repo.commits[sha] = Commit(sha, files)
        refs = repo.tags if re.match(r"v\d", name) else repo.branches
        refs[name] = by_folder[folder].sha
    return repo


@dataclass(frozen=True)
class Request:
    """One request the stand-in answered: method, raw path with query, status, Range header,
    and whether it carried an ``Authorization`` header."""

    method: str
    path: str
    status: int
    range: str | None
    authorized: bool = False


class HubRequestHandler(RangeRequestHandler):
    """Routes the Hub's API, resolve and LFS URLs; everything else is a 404."""

    server: HubServer
    # TCP_NODELAY: a response's headers and body are two writes; with Nagle's algorithm the
    # body waits for the client's delayed ACK (40 ms on Linux), a stall per request
    disable_nagle_algorithm = True

    def do_GET(self):
        self._route()

    def do_HEAD(self):
        self._route()

    def do_POST(self):
        self._route()

    def do_PUT(self):
        self._route()

    def do_DELETE(self):
        self._route()

    def log_request(self, code="-", size="-"):
        with self.server.lock:
            self.server.requests.append(
                Request(
                    self.command,
                    self.path,
                    int(code),
                    self.headers.get("Range"),
                    "Authorization" in self.headers,
                )
            )

    def _route(self):
        self._extra_headers = {}
        url = urlsplit(self.path)
        if (match := LFS_UPLOAD.match(url.path)) and self.command == "PUT":
            return self._lfs_upload(match["oid"])
        body = self._body()
        if self._fail(url.path):
            return self._error(503, None, "Service Unavailable (injected by the test)")
        if self.command in ("POST", "PUT", "DELETE") and not self._authorized(url.path):
            return self._error(401, None, "Invalid credentials in Authorization header")
        if match := RESOLVE.match(url.path):
            if self.command in ("GET", "HEAD"):
                return self._resolve(match)
        elif match := LFS_BATCH.match(url.path):
            if self.command == "POST":
                return self._lfs_batch(match, json.loads(body))
        elif url.path == "/api/repos/create" and self.command == "POST":
            return self._create_repo(json.loads(body))
        elif url.path == "/api/validate-yaml" and self.command == "POST":
            return self._json({"errors": [], "warnings": []})
        elif match := BUCKET_RESOLVE.match(url.path):
            if self.command in ("GET", "HEAD"):
                return self._bucket_resolve(match)
        elif match := BUCKET_API.match(url.path):
            return self._bucket_api(match, parse_qs(url.query), body)
        elif match := API.match(url.path):
            return self._api(match, parse_qs(url.query), body)
        self._error(404, None, f"no such endpoint: {self.command} {url.path}")

    def _body(self) -> bytes:
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            chunks = []
            while size := int(self.rfile.readline().split(b";")[0], 16):
                chunks.append(self.rfile.read(size))
                self.rfile.readline()
            self.rfile.readline()
            return b"".join(chunks)
        return self.rfile.read(int(self.headers.get("Content-Length") or 0))

    def _fail(self, path: str) -> bool:
        """Whether to answer 503 (``HubStandin.fail_next``)."""
        with self.server.lock:
            for i, (method, part) in enumerate(self.server.failures):
                if method == self.command and part in path:
                    del self.server.failures[i]
                    return True
        return False

    def _authorized(self, path: str) -> bool:
        token = self.server.token
        exempt = path == "/api/validate-yaml" or "/paths-info/" in path
        return token is None or exempt or self.headers.get("Authorization") == f"Bearer {token}"

    def _repo(self, match) -> Repo | None:
        """The repo named in the URL, or None after answering 404."""
        repo_id = unquote(match["repo"])
        repo = self.server.repos.get(repo_id)
        if repo is None:
            self._error(404, "RepoNotFound", f"Repository not found: {repo_id}")
        return repo

    def _commit(self, repo: Repo, name: str) -> Commit | None:
        """The commit a revision names, or None after answering 404."""
        commit = repo.resolve(unquote(name))
        if commit is None:
            self._error(404, "RevisionNotFound", f"Invalid rev id: {unquote(name)}")
        return commit

    def _api(self, match, query: dict, body: bytes):
        repo = self._repo(match)
        if repo is None:
            return
        op, command = match["op"] or ("refs" if match["refs"] else "revision"), self.command
        repo_id = unquote(match["repo"])
        with self.server.lock:
            if (op, command) == ("refs", "GET"):
                return self._refs(repo)
            if (op, command) in {("tag", "DELETE"), ("branch", "DELETE")}:
                refs = repo.tags if op == "tag" else repo.branches
                if refs.pop(unquote(match["rev"]), None) is None:
                    return self._error(404, "RevisionNotFound", f"Invalid rev id: {match['rev']}")
                return self._json({})
            if (op, command) == ("branch", "POST"):
                return self._create_branch(repo, unquote(match["rev"]), json.loads(body or "{}"))
            commit = self._commit(repo, match["rev"] or "main")
            if commit is None:
                return
            if (op, command) == ("revision", "GET"):
                siblings = [{"rfilename": path} for path in commit.files]
                info = {"id": repo_id, "sha": commit.sha, "private": repo.private}
                return self._json({**info, "siblings": siblings})
            if (op, command) == ("paths-info", "POST"):
                paths = parse_qs(body.decode()).get("paths", [])
                entries = [commit.entry(path.strip("/")) for path in paths]
                return self._json([e for e in entries if e is not None])
            if (op, command) == ("tree", "GET"):
                return self._tree(commit, unquote(match["path"] or "").strip("/"), query)
            if (op, command) == ("commits", "GET"):
                return self._json(self._history(repo, commit))
            if (op, command) == ("preupload", "POST"):
                return self._preupload(commit, json.loads(body))
            if (op, command) == ("commit", "POST"):
                return self._create_commit(repo, repo_id, match["rev"], commit, query, body)
            if (op, command) == ("tag", "POST"):
                tag = json.loads(body)["tag"]
                if tag in repo.tags:
                    return self._error(409, None, f"Tag {tag} already exists")
                repo.tags[tag] = commit.sha
                return self._json({})
        self._error(404, None, f"no such endpoint: {self.command} {self.path}")

    def _tree(self, commit: Commit, folder: str, query: dict):
        recursive = query.get("recursive", ["false"])[0].lower() == "true"
        paths = commit.listing(folder, recursive)
        if paths is None:
            return self._error(404, "EntryNotFound", f"{folder} does not exist", commit.sha)
        self._page([commit.entry(p) for p in paths], query)

    def _page(self, entries: list[dict], query: dict):
        """One page of a listing, with a ``Link: <...>; rel="next"`` header if more follow
        (``cursor`` in the query: the first entry's position)."""
        start = int(query.get("cursor", ["0"])[0])
        end = start + self.server.page_size
        headers = {}
        if end < len(entries):
            next_query = urlencode({**{k: v[0] for k, v in query.items()}, "cursor": end})
            next_url = f"http://{self.headers['Host']}{urlsplit(self.path).path}?{next_query}"
            headers["Link"] = f'<{next_url}>; rel="next"'
        self._json(entries[start:end], headers)

    def _bucket(self, match) -> Bucket | None:
        """The bucket named in the URL, or None after answering 404."""
        bucket = self.server.buckets.get(unquote(match["bucket"]))
        if bucket is None:
            self._error(404, "RepoNotFound", f"Bucket not found: {unquote(match['bucket'])}")
        return bucket

    def _bucket_api(self, match, query: dict, body: bytes):
        bucket = self._bucket(match)
        if bucket is None:
            return
        op, command = match["op"], self.command
        if op is None and command == "GET":
            return self._json(bucket.info(unquote(match["bucket"])))
        if op == "tree" and command == "GET":
            recursive = query.get("recursive", ["false"])[0].lower() == "true"
            paths = bucket.listing(unquote(match["prefix"] or "").strip("/"), recursive)
            return self._page([bucket.entry(p) for p in paths], query)
        if op == "paths-info" and command == "POST" and not match["prefix"]:
            paths = [p.strip("/") for p in json.loads(body)["paths"]]
            return self._json([bucket.entry(p) for p in paths if p in bucket.files])
        self._error(404, None, f"no such endpoint: {self.command} {self.path}")

    def _bucket_resolve(self, match):
        bucket = self._bucket(match)
        if bucket is None:
            return
        path = unquote(match["path"])
        if path not in bucket.files:
            return self._error(404, "EntryNotFound", f"{path} does not exist")
        blob = bucket.files[path]
        self._file = str(blob.file)
        self._extra_headers = {"ETag": f'"{blob.sha256}"'}
        if self.command == "GET":
            super().do_GET()
        else:
            super().do_HEAD()

    def _refs(self, repo: Repo):
        def refs(names: dict[str, str], kind: str) -> list[dict]:
            return [
                {"name": n, "ref": f"refs/{kind}/{n}", "targetCommit": sha}
                for n, sha in names.items()
            ]

        pulls = {str(n): sha for n, sha in enumerate(repo.pulls, 1)}
        return self._json(
            {
                "branches": refs(repo.branches, "heads"),
                "tags": refs(repo.tags, "tags"),
                "converts": [],
                "pullRequests": refs(pulls, "pr"),
            }
        )

    def _history(self, repo: Repo, commit: Commit) -> list[dict]:
        history = []
        while commit is not None:
            history.append(
                {
                    "id": commit.sha,
                    "title": commit.title,
                    "message": commit.message,
                    "authors": [{"user": "standin"}],
                    "date": commit.date,
                }
            )
            commit = repo.commits.get(commit.parent) if commit.parent else None
        return history

    def _create_repo(self, payload: dict):
        repo_id = f"{payload['organization']}/{payload['name']}"
        url = f"{self.server.endpoint}/datasets/{repo_id}"
        with self.server.lock:
            if repo_id in self.server.repos:
                return self._json(
                    {"error": "You already created this dataset repo", "url": url}, {}, 409
                )
            repo = Repo(private=payload.get("visibility") == "private")
            attributes = self.server.store_git_blob(GITATTRIBUTES.encode())
            repo.branches["main"] = repo.add_commit(
                None, {".gitattributes": attributes}, "initial commit"
            ).sha
            self.server.repos[repo_id] = repo
        self._json({"url": url, "name": repo_id})

    def _create_branch(self, repo: Repo, branch: str, payload: dict):
        if branch in repo.branches:
            return self._error(409, None, f"Branch {branch} already exists")
        start = self._commit(repo, quote(payload.get("startingPoint") or "main", safe=""))
        if start is not None:
            repo.branches[branch] = start.sha
            self._json({})

    def _preupload(self, commit: Commit, payload: dict):
        patterns = commit.lfs_patterns()
        files = []
        for item in payload["files"]:
            path = item["path"]
            binary = b"\0" in base64.b64decode(item["sample"])
            matched = any(fnmatch.fnmatch(path.rsplit("/", 1)[-1], p) for p in patterns)
            lfs = binary or matched or item["size"] >= LFS_THRESHOLD
            blob = commit.files.get(path)
            files.append(
                {
                    "path": path,
                    "uploadMode": "lfs" if lfs else "regular",
                    "shouldIgnore": False,
                    "oid": blob.oid if blob else None,
                }
            )
        self._json({"files": files})

    def _lfs_batch(self, match, payload: dict):
        if self._repo(match) is None:
            return
        objects = []
        for obj in payload["objects"]:
            entry = {"oid": obj["oid"], "size": obj["size"]}
            if not self.server.lfs_path(obj["oid"]).exists():
                href = f"{self.server.endpoint}/lfs-upload/{obj['oid']}"
                entry["actions"] = {"upload": {"href": href}}
            objects.append(entry)
        self._json({"transfer": "basic", "objects": objects})

    def _lfs_upload(self, oid: str):
        """Store one LFS object, unless uploads are held (then wait, and store nothing)."""
        server = self.server
        with server.lock:
            held = server.uploads_left is not None and server.uploads_left <= 0
            if not held and server.uploads_left is not None:
                server.uploads_left -= 1
        if held:  # the test kills the client meanwhile: this upload never completes
            server.released.wait(HELD_UPLOAD_TIMEOUT_S)
            self.close_connection = True
            return
        data = self._body()
        if hashlib.sha256(data).hexdigest() != oid:
            return self._error(400, None, f"content does not match sha256 {oid}")
        server.store(server.lfs_path(oid), data)
        with server.lock:
            server.uploaded.append(oid)
        self._json({})

    def _create_commit(self, repo, repo_id, rev, commit: Commit, query: dict, body: bytes):
        lines = [json.loads(line) for line in body.splitlines() if line.strip()]
        header = next(line["value"] for line in lines if line["key"] == "header")
        parent = header.get("parentCommit")
        if parent and not commit.sha.startswith(parent):
            return self._error(412, None, f"parent commit {parent} is not the head {commit.sha}")
        files = dict(commit.files)
        for line in lines:
            key, value = line["key"], line["value"]
            path = value.get("path", "")
            if key == "file":
                files[path] = self.server.store_git_blob(base64.b64decode(value["content"]))
            elif key == "lfsFile":
                stored = self.server.lfs_path(value["oid"])
                if not stored.exists():
                    return self._error(422, None, f"LFS object {value['oid']} was not uploaded")
                files[path] = Blob(stored, lfs=True)
            elif key == "deletedFile":
                if files.pop(path, None) is None:
                    return self._error(404, "EntryNotFound", "A file with this name doesn't exist")
            elif key == "deletedFolder":
                files = {p: b for p, b in files.items() if not p.startswith(path.rstrip("/") + "/")}
        new = repo.add_commit(commit, files, header["summary"], header.get("description", ""))
        answer = {"commitUrl": f"{self.server.endpoint}/datasets/{repo_id}/commit/{new.sha}"}
        answer["commitOid"] = new.sha
        revision = unquote(rev)
        if query.get("create_pr", ["0"])[0] == "1":
            repo.pulls.append(new.sha)
            answer["pullRequestUrl"] = (
                f"{self.server.endpoint}/datasets/{repo_id}/discussions/{len(repo.pulls)}"
            )
        elif match := re.fullmatch(r"refs/pr/(\d+)", revision):
            repo.pulls[int(match[1]) - 1] = new.sha
        elif revision in repo.branches:
            repo.branches[revision] = new.sha
        else:
            return self._error(400, None, f"{revision} is not a branch")
        self._json(answer)

    def _resolve(self, match):
        repo = self._repo(match)
        if repo is None:
            return
        with self.server.lock:
            commit = self._commit(repo, match["rev"])
        if commit is None:
            return
        path = unquote(match["path"])
        if path not in commit.files:
            return self._error(404, "EntryNotFound", f"{path} does not exist", commit.sha)
        blob = commit.files[path]
        self._file = str(blob.file)
        self._extra_headers = {"ETag": f'"{blob.etag}"', "X-Repo-Commit": commit.sha}
        if blob.lfs:
            self._extra_headers.update(
                {"X-Linked-Etag": f'"{blob.sha256}"', "X-Linked-Size": str(blob.size)}
            )
        if self.command == "GET":
            super().do_GET()
        else:
            super().do_HEAD()

    def translate_path(self, path):
        return self._file

    def end_headers(self):
        for key, value in self._extra_headers.items():
            self.send_header(key, value)
        super().end_headers()

    def _json(self, obj, headers: dict | None = None, status: int = 200):
        data = json.dumps(obj).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for key, value in (headers or {}).items():
            self.send_header(key, value)
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(data)

    def _error(self, status: int, code: str | None, message: str, commit: str | None = None):
        headers = {"X-Error-Message": message}
        if code:
            headers["X-Error-Code"] = code
        if commit:
            headers["X-Repo-Commit"] = commit
        self._json({"error": message}, headers, status)


class HubServer(QuietServer):
    """The threaded HTTP server: ``repos`` and ``buckets`` by id, uploaded blobs under
    ``storage``."""

    def __init__(
        self,
        repos: dict[str, Repo],
        page_size: int,
        storage: Path,
        token: str | None,
        buckets: dict[str, Bucket] | None = None,
        port: int = 0,
    ):
        super().__init__(("127.0.0.1", port), HubRequestHandler)
        self.repos = repos
        self.buckets = buckets or {}
        self.page_size = page_size
        self.storage = storage
        self.token = token
        self.requests: list[Request] = []
        self.uploaded: list[str] = []  # sha256 of each LFS object stored, in order
        self.lock = threading.RLock()
        self.failures: list[tuple[str, str]] = []  # (method, path part) to answer 503 once
        self.uploads_left: int | None = None  # LFS uploads to accept before holding the rest
        self.released = threading.Event()
        self._names = itertools.count()

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"

    def lfs_path(self, oid: str) -> Path:
        return self.storage / "lfs" / oid

    def store(self, path: Path, data: bytes) -> None:
        """Write ``data`` to ``path`` through a temporary name (concurrent uploads)."""
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.{next(self._names)}")
        tmp.write_bytes(data)
        os.replace(tmp, path)

    def store_git_blob(self, data: bytes) -> Blob:
        path = self.storage / "git" / _git_blob_id(data)
        self.store(path, data)
        return Blob(path)


class HubAddress:
    """What a client needs of a running stand-in: its ``endpoint`` and the URLs of its paths."""

    endpoint: str

    def url(self, repo_id: str, revision: str, path: str = "") -> str:
        """``hf://datasets/<repo_id>@<revision>/<path>`` (HfFileSystem's URL of a path)."""
        return f"hf://datasets/{repo_id}@{quote(revision, safe='')}/{path}".rstrip("/")

    def bucket_url(self, bucket_id: str, path: str = "") -> str:
        """``hf://buckets/<bucket_id>/<path>`` (HfFileSystem's URL of a bucket path)."""
        return f"hf://buckets/{bucket_id}/{path}".rstrip("/")

    def client_env(self, hf_home: str | Path, token: str | None = None) -> dict[str, str]:
        """This process's environment for a ``huggingface_hub`` client talking to the
        stand-in: ``HF_ENDPOINT``, online, no telemetry, no Xet, ``HF_HOME`` = ``hf_home``,
        ``HF_TOKEN`` = ``token`` (none by default). ``huggingface_hub`` reads these when it
        is imported, so they are for subprocesses."""
        env = {k: v for k, v in os.environ.items() if k not in ("HF_TOKEN", "HF_HUB_CACHE")}
        env.update(
            HF_ENDPOINT=self.endpoint,
            HF_HUB_OFFLINE="0",
            HF_HUB_DISABLE_TELEMETRY="1",
            HF_HUB_DISABLE_XET="1",
            HF_HOME=str(hf_home),
            HF_HUB_DISABLE_PROGRESS_BARS="1",
        )
        if token:
            env["HF_TOKEN"] = token
        return env


@dataclass
class HubStandin(HubAddress):
    """A running stand-in in this process: its ``endpoint`` URL, its ``repos`` and the
    ``requests`` it has answered."""

    server: HubServer

    @property
    def endpoint(self) -> str:
        return self.server.endpoint

    @property
    def requests(self) -> list[Request]:
        with self.server.lock:
            return list(self.server.requests)

    def repo(self, repo_id: str) -> Repo:
        return self.server.repos[repo_id]

    def sha(self, repo_id: str, revision: str) -> str:
        """The commit sha that ``revision`` of ``repo_id`` resolves to."""
        with self.server.lock:
            return self.server.repos[repo_id].resolve(revision).sha

    def tree(self, repo_id: str, revision: str) -> dict[str, str]:
        """Every file of a revision by path, with the SHA-256 of its bytes (as the tests'
        ``file_tree`` gives for a folder)."""
        with self.server.lock:
            files = dict(self.server.repos[repo_id].resolve(revision).files)
        return {path: blob.sha256 for path, blob in sorted(files.items())}

    def served_bytes(self, requests: Iterable[Request]) -> int:
        """Bytes of file content that the ``GET /datasets/.../resolve/...`` requests among
        ``requests`` returned: a Range's length, else the whole file's size at the request's
        revision."""
        total = 0
        for request in requests:
            match = RESOLVE.match(urlsplit(request.path).path)
            if request.method != "GET" or not match:
                continue
            if request.range:
                first, last = map(int, re.fullmatch(r"bytes=(\d+)-(\d+)", request.range).groups())
                total += last + 1 - first
            else:
                commit = self.repo(match["repo"]).resolve(unquote(match["rev"]))
                total += commit.files[unquote(match["path"])].size
        return total

    def uploads(self) -> list[str]:
        """The sha256 of every LFS object stored (each upload, repeats included), in order."""
        with self.server.lock:
            return list(self.server.uploaded)

    def upload_count(self) -> int:
        """``len(uploads())``, cheaply (for polling)."""
        with self.server.lock:
            return len(self.server.uploaded)

    def fail_next(self, method: str, path_part: str) -> None:
        """Answer the next ``method`` request whose path contains ``path_part`` with a 503."""
        with self.server.lock:
            self.server.failures.append((method, path_part))

    def hold_uploads_after(self, count: int) -> None:
        """Store the next ``count`` LFS uploads, then hold every further one unanswered until
        :meth:`release` (it is then dropped, as if the client had gone)."""
        with self.server.lock:
            self.server.uploads_left = count
            self.server.released.clear()

    def release(self) -> None:
        """Drop the held uploads and accept uploads again."""
        with self.server.lock:
            self.server.uploads_left = None
        self.server.released.set()


@dataclass
class HubProcess(HubAddress):
    """A stand-in running as a child process (:func:`serve_hub_process`)."""

    endpoint: str


def dataset_files(root: Path) -> list[Path]:
    """The files of the dataset in folder ``root`` that a reader's bytes are measured against:
    those under ``meta/``, ``data/`` and ``videos/`` (``DATASET_FOLDERS``), nothing else."""
    return [p for f in DATASET_FOLDERS for p in (Path(root) / f).rglob("*") if p.is_file()]


@contextlib.contextmanager
def serve_folder_to_this_process(root: Path, revision: str) -> Iterator[HubStandin]:
    """Serve the dataset folder ``root`` as repo ``local/ds`` at ``revision`` (its parquets and
    mp4s as LFS files, as the Hub keeps them) and point this process's ``huggingface_hub`` at
    it (``os.environ``, with a temporary ``HF_HOME``); the environment is restored on exit.
    ``huggingface_hub`` reads the environment when it is imported, so import it, and what
    imports it, inside the block. For scripts that measure what a reader of
    ``hf://datasets/local/ds@<revision>`` requests (:attr:`HubStandin.requests`)."""
    saved = dict(os.environ)
    with (
        tempfile.TemporaryDirectory() as tmp,
        serve_hub({"local/ds": {revision: root}}, lfs=("*.parquet", "*.mp4")) as hub,
    ):
        os.environ.update(hub.client_env(Path(tmp) / "hf_home"))
        try:
            yield hub
        finally:
            os.environ.clear()
            os.environ.update(saved)


@contextlib.contextmanager
def serve_hub(
    repos: dict[str, dict[str, str | Path]],
    *,
    buckets: dict[str, str | Path] | None = None,
    page_size: int = HUB_PAGE_SIZE,
    token: str | None = None,
    storage_dir: str | Path | None = None,
    lfs: tuple[str, ...] = (),
    port: int = 0,
) -> Iterator[HubStandin]:
    """Serve ``repos`` ({repo id: {revision name: folder}}) as Hub dataset repos, and
    ``buckets`` ({bucket id: folder}) as storage buckets, on ``http://127.0.0.1:<port>`` (a
    free port by default) from a thread of this process; stop the server on exit.

    ``main`` and other names are branches, names like ``v2.1`` tags; the same folder under
    two names is one commit. ``page_size``: entries per page of the tree listing (smaller
    pages exercise pagination). ``token``: the token writes must carry (none needed if None).
    ``storage_dir``: where the uploaded content's temporary folder goes (default: the system's
    temporary folder). ``lfs``: name patterns (``*.mp4``) of the files served as LFS files
    (their tree entry carries the sha256 as ``lfs.oid``, as the Hub's does); the others, and
    all by default, as plain git blobs.
    """
    scanned = {repo_id: _repo_from_folders(repo_id, revs, lfs) for repo_id, revs in repos.items()}
    stored = {name: Bucket(_scan(Path(root).resolve())) for name, root in (buckets or {}).items()}
    with tempfile.TemporaryDirectory(prefix="hub-standin-", dir=storage_dir) as storage:
        server = HubServer(scanned, page_size, Path(storage), token, stored, port)
        thread = threading.Thread(target=server.serve_forever, daemon=True)
        thread.start()
        try:
            yield HubStandin(server)
        finally:
            server.released.set()
            server.shutdown()
            server.server_close()
            thread.join()


@contextlib.contextmanager
def serve_hub_process(
    repos: dict[str, dict[str, str | Path]], *, buckets: dict[str, str | Path] | None = None
) -> Iterator[HubProcess]:
    """:func:`serve_hub` in a child process (``python -m robopipe.harness.hub_standin``), listed in
    ``robopipe.bench.measure.SERVER_PIDS`` so that a benchmark's CPU count leaves it out, as
    it would a remote Hub's; yield its address.

    Raises:
        RuntimeError: the server did not start (its stderr is quoted).
    """
    from robopipe.bench.servers import serve_process

    spec = json.dumps(
        {
            "repos": {r: {n: str(f) for n, f in revs.items()} for r, revs in repos.items()},
            "buckets": {b: str(f) for b, f in (buckets or {}).items()},
        }
    )
    with serve_process(
        "the Hub stand-in",
        lambda port: [sys.executable, "-m", __name__, "--port", str(port), spec],
    ) as endpoint:
        yield HubProcess(endpoint)


def main(argv: list[str] | None = None) -> None:
    """``python -m robopipe.harness.hub_standin --port PORT SPEC``: serve SPEC (JSON
    ``{"repos": {id: {revision: folder}}, "buckets": {id: folder}}``) on 127.0.0.1:PORT until
    SIGTERM."""
    import argparse
    import signal

    parser = argparse.ArgumentParser(description=main.__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("spec")
    args = parser.parse_args(argv)
    spec = json.loads(args.spec)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    with serve_hub(spec["repos"], buckets=spec.get("buckets"), port=args.port):
        stop.wait()


if __name__ == "__main__":
    main()
