"""A stand-in for the Hugging Face Hub on 127.0.0.1: local folders served as *dataset* repos.

Implements the endpoints that ``huggingface_hub`` 2.4 calls for ``snapshot_download(repo_type=
"dataset", revision=..., allow_patterns=...)`` and for ``HfFileSystem`` (``hf://datasets/
<repo>@<revision>/...``: ``ls``, ``info``, ``find``, ``open`` with Range reads):

- ``GET /api/datasets/{repo}/revision/{revision}``: repo info, ``sha`` and ``siblings``
  (``HfApi.dataset_info``, hf_api.py:3273).
- ``GET /api/datasets/{repo}/tree/{revision}[/{path}]?recursive=&cursor=``: folder listing,
  paginated with a ``Link: <...>; rel="next"`` header as the Hub does (``_paginate_pages``,
  utils/_pagination.py:26; the Hub's pages hold 1000 entries).
- ``POST /api/datasets/{repo}/paths-info/{revision}`` (form field ``paths``): info of paths
  (``HfApi.get_paths_info``, hf_api.py:4331).
- ``HEAD`` / ``GET /datasets/{repo}/resolve/{revision}/{path}``: the file, with ``ETag``
  (its git blob id), ``X-Repo-Commit``, ``Content-Length`` and ``Range`` (206), through
  :class:`robopipe.bench.servers.RangeRequestHandler` (``get_hf_file_metadata``,
  file_download.py:1670).

A revision is a branch / tag name or the commit sha the stand-in derives from the folder's
listing (the client re-requests by sha once resolved). Errors are 404s with the
``X-Error-Code`` header that ``hf_raise_for_status`` (utils/_http.py:871) turns into
``RepositoryNotFoundError``, ``RevisionNotFoundError`` or ``RemoteEntryNotFoundError``.
Files are plain git blobs: no LFS and no Xet headers, so the client downloads over HTTP
only. Each folder's file list is read once, when the server starts.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import parse_qs, quote, unquote, urlencode, urlsplit

from robopipe.bench.servers import RangeRequestHandler, _QuietServer

API = re.compile(
    r"^/api/datasets/(?P<repo>[^/]+/[^/]+)/(?P<op>revision|tree|paths-info)/(?P<rev>[^/]+)"
    r"(?:/(?P<path>.*))?$"
)
RESOLVE = re.compile(r"^/datasets/(?P<repo>[^/]+/[^/]+)/resolve/(?P<rev>[^/]+)/(?P<path>.+)$")
HUB_PAGE_SIZE = 1000  # entries per page of the Hub's tree endpoint (hf_api.py:4013)


@dataclass
class Revision:
    """One served revision: the folder's files by repo path, and its commit sha."""

    root: Path
    files: dict[str, Path]
    folders: set[str]
    sha: str
    _blob_ids: dict[str, str] = field(default_factory=dict)

    @classmethod
    def scan(cls, repo_id: str, name: str, root: Path) -> Revision:
        root = Path(root)
        if not root.is_dir():
            raise FileNotFoundError(f"{repo_id}@{name}: {root} is not a folder")
        files = {p.relative_to(root).as_posix(): p for p in sorted(root.rglob("*")) if p.is_file()}
        folders = {parent for path in files for parent in _parents(path)}
        listing = "".join(f"{path}\0{p.stat().st_size}\n" for path, p in files.items())
        sha = hashlib.sha1(f"{repo_id}@{name}\n{listing}".encode()).hexdigest()
        return cls(root, files, folders, sha)

    def blob_id(self, path: str) -> str:
        """Git blob id of a file: sha1 of ``b"blob <size>\\0" + content`` (the Hub's ETag)."""
        if path not in self._blob_ids:
            data = self.files[path].read_bytes()
            self._blob_ids[path] = hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()
        return self._blob_ids[path]

    def entry(self, path: str) -> dict | None:
        """The Hub's JSON entry of a file or folder (``RepoFile`` / ``RepoFolder``), or None."""
        if path in self.files:
            size = self.files[path].stat().st_size
            return {"type": "file", "path": path, "size": size, "oid": self.blob_id(path)}
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


def _parents(path: str) -> list[str]:
    parts = path.split("/")[:-1]
    return ["/".join(parts[: i + 1]) for i in range(len(parts))]


@dataclass(frozen=True)
class Request:
    """One request the stand-in answered: method, raw path with query, status, Range header."""

    method: str
    path: str
    status: int
    range: str | None


class HubRequestHandler(RangeRequestHandler):
    """Routes the Hub's API and resolve URLs; everything else is a 404."""

    server: HubServer

    def do_GET(self):
        self._route()

    def do_HEAD(self):
        self._route()

    def do_POST(self):
        self._route()

    def log_request(self, code="-", size="-"):
        with self.server.lock:
            self.server.requests.append(
                Request(self.command, self.path, int(code), self.headers.get("Range"))
            )

    def _route(self):
        self._extra_headers = {}
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        url = urlsplit(self.path)
        if match := RESOLVE.match(url.path):
            if self.command in ("GET", "HEAD"):
                return self._resolve(match)
        elif match := API.match(url.path):
            op = (match["op"], self.command)
            if op in {("revision", "GET"), ("tree", "GET"), ("paths-info", "POST")}:
                return self._api(match, parse_qs(url.query), parse_qs(body.decode()))
        self._error(404, None, f"no such endpoint: {self.command} {url.path}")

    def _revision(self, match) -> Revision | None:
        """The served revision named in the URL, or None after answering 404."""
        repo_id, name = unquote(match["repo"]), unquote(match["rev"])
        revisions = self.server.repos.get(repo_id)
        if revisions is None:
            self._error(404, "RepoNotFound", f"Repository not found: {repo_id}")
            return None
        for revision_name, revision in revisions.items():
            if name in (revision_name, revision.sha):
                return revision
        self._error(404, "RevisionNotFound", f"Invalid rev id: {name}")
        return None

    def _api(self, match, query: dict, form: dict):
        revision = self._revision(match)
        if revision is None:
            return
        repo_id = unquote(match["repo"])
        if match["op"] == "revision":
            siblings = [{"rfilename": path} for path in revision.files]
            return self._json(
                {"id": repo_id, "sha": revision.sha, "private": False, "siblings": siblings}
            )
        if match["op"] == "paths-info":
            entries = [revision.entry(path.strip("/")) for path in form.get("paths", [])]
            return self._json([e for e in entries if e is not None])
        folder = unquote(match["path"] or "").strip("/")
        recursive = query.get("recursive", ["false"])[0].lower() == "true"
        paths = revision.listing(folder, recursive)
        if paths is None:
            return self._error(404, "EntryNotFound", f"{folder} does not exist", revision.sha)
        start = int(query.get("cursor", ["0"])[0])
        end = start + self.server.page_size
        headers = {}
        if end < len(paths):
            next_query = urlencode({**{k: v[0] for k, v in query.items()}, "cursor": end})
            next_url = f"http://{self.headers['Host']}{urlsplit(self.path).path}?{next_query}"
            headers["Link"] = f'<{next_url}>; rel="next"'
        self._json([revision.entry(p) for p in paths[start:end]], headers)

    def _resolve(self, match):
        revision = self._revision(match)
        if revision is None:
            return
        path = unquote(match["path"])
        if path not in revision.files:
            return self._error(404, "EntryNotFound", f"{path} does not exist", revision.sha)
        self._file = str(revision.files[path])
        self._extra_headers = {"ETag": f'"{revision.blob_id(path)}"', "X-Repo-Commit": revision.sha}
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


class HubServer(_QuietServer):
    """The threaded HTTP server; ``repos`` maps repo id -> revision name -> :class:`Revision`."""

    def __init__(self, repos: dict[str, dict[str, Revision]], page_size: int):
        super().__init__(("127.0.0.1", 0), HubRequestHandler)
        self.repos = repos
        self.page_size = page_size
        self.requests: list[Request] = []
        self.lock = threading.Lock()


@dataclass
class HubStandin:
    """A running stand-in: its ``endpoint`` URL and the ``requests`` it has answered."""

    server: HubServer

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    @property
    def requests(self) -> list[Request]:
        with self.server.lock:
            return list(self.server.requests)

    def sha(self, repo_id: str, revision: str) -> str:
        """The commit sha that ``revision`` of ``repo_id`` resolves to."""
        return self.server.repos[repo_id][revision].sha

    def url(self, repo_id: str, revision: str, path: str = "") -> str:
        """``hf://datasets/<repo_id>@<revision>/<path>`` (HfFileSystem's URL of a path)."""
        return f"hf://datasets/{repo_id}@{quote(revision, safe='')}/{path}".rstrip("/")

    def client_env(self, hf_home: str | Path) -> dict[str, str]:
        """This process's environment for a ``huggingface_hub`` client talking to the
        stand-in: ``HF_ENDPOINT``, online, no telemetry, ``HF_HOME`` = ``hf_home``, no token.
        ``huggingface_hub`` reads these when it is imported, so they are for subprocesses."""
        env = {k: v for k, v in os.environ.items() if k not in ("HF_TOKEN", "HF_HUB_CACHE")}
        env.update(
            HF_ENDPOINT=self.endpoint,
            HF_HUB_OFFLINE="0",
            HF_HUB_DISABLE_TELEMETRY="1",
            HF_HOME=str(hf_home),
            HF_HUB_DISABLE_PROGRESS_BARS="1",
        )
        return env


@contextlib.contextmanager
def serve_hub(
    repos: dict[str, dict[str, str | Path]], *, page_size: int = HUB_PAGE_SIZE
) -> Iterator[HubStandin]:
    """Serve ``repos`` ({repo id: {revision name: folder}}) as Hub dataset repos on
    ``http://127.0.0.1:<free port>``; stop the server on exit.

    ``page_size``: entries per page of the tree listing (smaller pages exercise pagination).
    """
    scanned = {
        repo_id: {name: Revision.scan(repo_id, name, root) for name, root in revisions.items()}
        for repo_id, revisions in repos.items()
    }
    server = HubServer(scanned, page_size)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield HubStandin(server)
    finally:
        server.shutdown()
        server.server_close()
        thread.join()
