"""An in-process fake of the HuggingFace Hub HTTP API, for the contract tests (specs/releases.md §9b).

Hooked in with ``huggingface_hub.set_client_factory(lambda: httpx2.Client(transport=httpx2.MockTransport(hub.handler),
follow_redirects=True))``; ``datasets`` shares that client, so one hook covers uploads and ``load_dataset``. Requires
``HF_HUB_DISABLE_XET=1`` (with Xet on, uploads bypass the Python transport) and ``HF_ENDPOINT`` set before
``huggingface_hub`` is imported, hence its own pytest process.

**This is the project's model of the Hub, not the Hub.** It holds one dict of repos, each with content-addressed
commits (a full file tree per commit), branches and tags, and serves the endpoints the client uses:

* ``POST /api/repos/create`` (409 *with* ``url`` when it exists), ``DELETE /api/repos/delete``, ``GET /api/whoami-v2``;
* ``GET /api/datasets/{id}[/revision/{rev}]`` (``sha``, ``siblings``, ``private``), 404 with ``X-Error-Code``
  ``RepoNotFound`` / ``RevisionNotFound``; a private repo is ``RepoNotFound`` without a valid token, as on the Hub;
* ``POST /api/validate-yaml`` (always valid), ``POST …/preupload/{rev}`` (``uploadMode`` lfs for data-like
  extensions or >= 10 MB, and the remote ``oid``: sha256 for LFS, the git-blob sha1 otherwise), the git-LFS
  ``…​.git/info/lfs/objects/batch`` and its ``PUT`` href (checks the sha256 and the size);
* ``POST …/commit/{branch}`` (ndjson ``header``/``file``/``lfsFile``/``deletedFile``/``deletedFolder``; 412 when
  ``parentCommit`` is not the head; an ``lfsFile`` whose object was never uploaded is refused), ``POST …/tag/{rev}``
  and ``…/branch/{name}`` (409 when present), ``GET …/refs``, ``GET …/commits/{rev}``;
* ``GET …/tree/{rev}[/{path}]`` (``recursive``), ``POST …/paths-info/{rev}``,
  ``HEAD/GET /datasets/{id}/resolve/{rev}/{path}`` with ``X-Repo-Commit``, ``ETag`` and ``Range`` -> 206.

Writes need a token listed in ``tokens`` (401 otherwise); reads of public repos need none.

Fault injection: :meth:`FakeHub.fail` queues an HTTP answer (status, headers) for the next requests matching a method
and a path regex; :meth:`FakeHub.on` runs a hook before a matching request (raise ``httpx2.ConnectError`` in it to
simulate a dropped connection, or raise any exception to "kill" the client mid-flow). Every request is logged in
``requests`` as ``(method, path)``.

**Not modelled** (so the contract tests prove nothing about them): quotas and rate limits other than injected ones
(the 128 commits/hour limit, storage quotas, file and folder count limits, size limits), Xet storage and the
streamed multi-commit ``upload_folder`` pipeline, server-side validation (YAML card rules of ``/api/validate-yaml``,
``.gitattributes`` LFS rules, gitignore, file-name rules), token scopes, organisations and permissions (any valid
token may write anywhere), consistency delays (CDN caching, eventual visibility of new commits and tags), pagination,
pull requests and ``create_pr``, multipart LFS uploads, the dataset viewer / Parquet conversion endpoints, commit
authorship and HTML formatting, repo settings updates, and redirects of renamed repos.
"""

from __future__ import annotations

import base64
import dataclasses
import hashlib
import itertools
import json
import re
import threading
from datetime import datetime, timedelta, timezone
from typing import Any, Callable
from urllib.parse import parse_qs, unquote

import httpx2

LFS_EXTENSIONS = (".parquet", ".arrow", ".bin", ".tar", ".gz", ".zip", ".npy", ".npz", ".pt", ".safetensors",
                  ".mp4", ".jpg", ".png")
LFS_MIN_SIZE = 10 * 1024 * 1024


def git_blob_sha1(data: bytes) -> str:
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


@dataclasses.dataclass(frozen=True)
class Blob:
    data: bytes
    lfs: bool

    @property
    def sha256(self) -> str:
        return hashlib.sha256(self.data).hexdigest()

    @property
    def oid(self) -> str:
        """The git oid the Hub reports: of the pointer file for LFS, of the content otherwise."""
        if self.lfs:
            pointer = f"version https://git-lfs.github.com/spec/v1\noid sha256:{self.sha256}\nsize {len(self.data)}\n"
            return git_blob_sha1(pointer.encode())
        return git_blob_sha1(self.data)

    def entry(self, path: str) -> dict[str, Any]:
        e: dict[str, Any] = {"type": "file", "oid": self.oid, "size": len(self.data), "path": path}
        if self.lfs:
            e["lfs"] = {"oid": self.sha256, "size": len(self.data), "pointerSize": 130}
        return e


@dataclasses.dataclass
class Commit:
    oid: str
    parent: str | None
    files: dict[str, Blob]
    title: str
    date: datetime


@dataclasses.dataclass
class Repo:
    repo_id: str
    private: bool
    commits: dict[str, Commit] = dataclasses.field(default_factory=dict)
    branches: dict[str, str] = dataclasses.field(default_factory=dict)
    tags: dict[str, str] = dataclasses.field(default_factory=dict)
    lfs: dict[str, bytes] = dataclasses.field(default_factory=dict)

    def resolve(self, rev: str) -> Commit | None:
        if rev in self.branches:
            return self.commits[self.branches[rev]]
        if rev in self.tags:
            return self.commits[self.tags[rev]]
        if len(rev) >= 7:
            hits = [c for oid, c in self.commits.items() if oid.startswith(rev)]
            if len(hits) == 1:
                return hits[0]
        return None


@dataclasses.dataclass
class _Fault:
    method: str
    path: re.Pattern
    status: int
    headers: dict[str, str]
    body: dict[str, Any]
    times: int


@dataclasses.dataclass
class _Hook:
    method: str
    path: re.Pattern
    fn: Callable[[httpx2.Request], None]
    times: int


def _json(status: int, obj: Any, headers: dict[str, str] | None = None) -> httpx2.Response:
    return httpx2.Response(status, json=obj, headers=headers or {})


def _error(status: int, message: str, code: str | None = None, **extra: Any) -> httpx2.Response:
    headers = {"X-Error-Message": message}
    if code:
        headers["X-Error-Code"] = code
    return _json(status, {"error": message, **extra}, headers)


class FakeHub:
    """See the module docstring. ``tokens``: the tokens the fake accepts."""

    def __init__(self, tokens: tuple[str, ...] = ("hf_fake",), user: str = "fake-user") -> None:
        self.tokens = set(tokens)
        self.user = user
        self.repos: dict[str, Repo] = {}
        self.requests: list[tuple[str, str]] = []
        self._faults: list[_Fault] = []
        self._hooks: list[_Hook] = []
        self._lock = threading.RLock()
        self._counter = itertools.count(1)
        self._clock = datetime(2025, 1, 1, tzinfo=timezone.utc)

    # ------------------------------------------------------------------ test API
    def fail(self, method: str, path_regex: str, status: int, *, times: int = 1,
             headers: dict[str, str] | None = None, body: dict[str, Any] | None = None) -> None:
        """Answer the next ``times`` requests matching ``method`` and ``path_regex`` with ``status``."""
        self._faults.append(_Fault(method.upper(), re.compile(path_regex), status, headers or {},
                                   body or {"error": f"injected {status}"}, times))

    def on(self, method: str, path_regex: str, fn: Callable[[httpx2.Request], None], *, times: int = 1) -> None:
        """Call ``fn(request)`` before serving the next ``times`` matching requests (it may raise)."""
        self._hooks.append(_Hook(method.upper(), re.compile(path_regex), fn, times))

    def count(self, method: str, path_regex: str) -> int:
        rx = re.compile(path_regex)
        return sum(1 for m, p in self.requests if m == method.upper() and rx.search(p))

    def commit_count(self, repo_id: str) -> int:
        """Commits in the repo, the initial one included."""
        return len(self.repos[repo_id].commits)

    def files_at(self, repo_id: str, rev: str) -> dict[str, bytes]:
        c = self.repos[repo_id].resolve(rev)
        assert c is not None, f"no revision {rev} in {repo_id}"
        return {p: b.data for p, b in c.files.items()}

    def commit_files(self, repo_id: str, files: dict[str, bytes], title: str = "external commit",
                     branch: str = "main") -> str:
        """Commit ``files`` (added or replaced) straight into the repo, as another client would."""
        repo = self.repos[repo_id]
        head = repo.commits[repo.branches[branch]]
        tree = dict(head.files)
        tree.update({p: Blob(d, self._is_lfs(p, len(d))) for p, d in files.items()})
        return self._new_commit(repo, branch, tree, title)

    # ------------------------------------------------------------------ internals
    def _now(self) -> datetime:
        self._clock += timedelta(minutes=1)
        return self._clock

    def _new_commit(self, repo: Repo, branch: str, tree: dict[str, Blob], title: str) -> str:
        parent = repo.branches.get(branch)
        h = hashlib.sha1(f"{repo.repo_id}\0{parent}\0{title}\0{next(self._counter)}".encode())
        for p in sorted(tree):
            h.update(f"{p}\0{tree[p].oid}\0".encode())
        oid = h.hexdigest()
        repo.commits[oid] = Commit(oid, parent, tree, title, self._now())
        repo.branches[branch] = oid
        return oid

    @staticmethod
    def _is_lfs(path: str, size: int) -> bool:
        return path.lower().endswith(LFS_EXTENSIONS) or size >= LFS_MIN_SIZE

    def _token(self, request: httpx2.Request) -> str | None:
        auth = request.headers.get("authorization", "")
        return auth[7:] if auth.lower().startswith("bearer ") else None

    def _authorized(self, request: httpx2.Request) -> bool:
        return self._token(request) in self.tokens

    def _read_repo(self, request: httpx2.Request, repo_id: str) -> Repo | httpx2.Response:
        repo = self.repos.get(repo_id)
        if repo is None or (repo.private and not self._authorized(request)):
            return _error(404, f"Repository Not Found for url: {request.url}.", "RepoNotFound")
        tok = self._token(request)
        if tok is not None and tok not in self.tokens:
            return _error(401, "Invalid credentials in Authorization header")
        return repo

    def _write_repo(self, request: httpx2.Request, repo_id: str) -> Repo | httpx2.Response:
        if not self._authorized(request):
            return _error(401, "Invalid credentials in Authorization header")
        repo = self.repos.get(repo_id)
        if repo is None:
            return _error(404, f"Repository Not Found for url: {request.url}.", "RepoNotFound")
        return repo

    # ------------------------------------------------------------------ the transport handler
    def handler(self, request: httpx2.Request) -> httpx2.Response:
        path = request.url.path
        method = request.method.upper()
        with self._lock:
            self.requests.append((method, path))
            for hook in self._hooks:
                if hook.times > 0 and hook.method == method and hook.path.search(path):
                    hook.times -= 1
                    hook.fn(request)  # may raise
            for f in self._faults:
                if f.times > 0 and f.method == method and f.path.search(path):
                    f.times -= 1
                    return _json(f.status, f.body, f.headers)
            return self._route(request, method, path)

    def _route(self, request: httpx2.Request, method: str, path: str) -> httpx2.Response:
        raw = request.url.raw_path.decode().split("?", 1)[0]
        parts = [unquote(p) for p in raw.strip("/").split("/")]
        if path == "/api/whoami-v2":
            if not self._authorized(request):
                return _error(401, "Invalid user token.")
            return _json(200, {"type": "user", "name": self.user, "orgs": [],
                               "auth": {"type": "access_token", "accessToken": {"role": "write"}}})
        if path == "/api/repos/create" and method == "POST":
            return self._create_repo(request)
        if path == "/api/repos/delete" and method == "DELETE":
            return self._delete_repo(request)
        if path == "/api/validate-yaml" and method == "POST":
            return _json(200, {"errors": [], "warnings": []})
        if parts[:1] == ["__lfs"] and method == "PUT":
            return self._lfs_put(request, "/".join(parts[1:-1]), parts[-1])
        if len(parts) >= 4 and parts[:2] == ["api", "datasets"]:
            repo_id, rest = f"{parts[2]}/{parts[3]}", parts[4:]
            return self._api(request, method, repo_id, rest)
        if len(parts) >= 3 and parts[0] == "datasets":
            if parts[2].endswith(".git") and parts[3:] == ["info", "lfs", "objects", "batch"]:
                return self._lfs_batch(request, f"{parts[1]}/{parts[2][:-4]}")
            if len(parts) >= 6 and parts[3] == "resolve":
                return self._resolve(request, method, f"{parts[1]}/{parts[2]}", parts[4], "/".join(parts[5:]))
        return _error(404, f"fake hub: no route for {method} {path}")

    def _create_repo(self, request: httpx2.Request) -> httpx2.Response:
        if not self._authorized(request):
            return _error(401, "Invalid credentials in Authorization header")
        body = json.loads(request.content or b"{}")
        if body.get("type") != "dataset":
            return _error(400, "the fake hub only models dataset repos")
        repo_id = f"{body.get('organization') or self.user}/{body['name']}"
        url = f"{request.url.scheme}://{request.url.host}/datasets/{repo_id}"
        if repo_id in self.repos:
            return _error(409, "You already created this dataset repo", url=url)
        repo = Repo(repo_id, private=body.get("visibility") == "private")
        self.repos[repo_id] = repo
        self._new_commit(repo, "main", {".gitattributes": Blob(b"*.parquet filter=lfs diff=lfs merge=lfs -text\n",
                                                               False)}, "initial commit")
        return _json(200, {"url": url, "name": repo_id})

    def _delete_repo(self, request: httpx2.Request) -> httpx2.Response:
        if not self._authorized(request):
            return _error(401, "Invalid credentials in Authorization header")
        body = json.loads(request.content or b"{}")
        repo_id = f"{body.get('organization') or self.user}/{body['name']}"
        if self.repos.pop(repo_id, None) is None:
            return _error(404, "Repository Not Found", "RepoNotFound")
        return _json(200, {})

    def _api(self, request: httpx2.Request, method: str, repo_id: str, rest: list[str]) -> httpx2.Response:
        writes = {"preupload", "commit", "tag", "branch"}
        repo = (self._write_repo if rest[:1] and rest[0] in writes and method == "POST" else self._read_repo)(
            request, repo_id)
        if isinstance(repo, httpx2.Response):
            return repo
        if not rest or rest[0] == "revision":
            rev = rest[1] if len(rest) > 1 else "main"
            c = repo.resolve(rev)
            if c is None:
                return _error(404, f"Invalid rev id: {rev}", "RevisionNotFound")
            return _json(200, {"id": repo_id, "sha": c.oid, "private": repo.private, "disabled": False,
                               "gated": False, "lastModified": c.date.isoformat().replace("+00:00", "Z"),
                               "tags": [], "downloads": 0, "likes": 0, "author": repo_id.split("/")[0],
                               "siblings": [{"rfilename": p} for p in sorted(c.files)]})
        op, args = rest[0], rest[1:]
        if op == "refs":
            def ref(kind: str, name: str, oid: str) -> dict[str, str]:
                return {"name": name, "ref": f"refs/{kind}/{name}", "targetCommit": oid}
            return _json(200, {"branches": [ref("heads", n, o) for n, o in sorted(repo.branches.items())],
                               "tags": [ref("tags", n, o) for n, o in sorted(repo.tags.items())],
                               "converts": [], "pullRequests": []})
        c = repo.resolve(args[0]) if args else None
        if op in {"tree", "paths-info", "commits", "tag", "branch"} and c is None:
            return _error(404, f"Invalid rev id: {args[0] if args else ''}", "RevisionNotFound")
        if op == "preupload" and method == "POST":
            return self._preupload(request, repo, args[0])
        if op == "commit" and method == "POST":
            return self._commit(request, repo, args[0])
        if op == "tag" and method == "POST":
            tag = json.loads(request.content)["tag"]
            if tag in repo.tags or tag in repo.branches:
                return _error(409, f"Tag {tag} already exists")
            repo.tags[tag] = c.oid
            return _json(200, {})
        if op == "branch" and method == "POST":
            name = args[0]
            return _error(409, "branches are not modelled") if name in repo.branches else _json(200, {})
        if op == "commits" and method == "GET":
            out = []
            while c is not None:
                out.append({"id": c.oid, "title": c.title, "message": "", "authors": [{"user": self.user}],
                            "date": c.date.isoformat().replace("+00:00", "Z")})
                c = repo.commits.get(c.parent) if c.parent else None
            return _json(200, out)
        if op == "tree" and method == "GET":
            prefix = "/".join(args[1:]).strip("/")
            recursive = request.url.params.get("recursive", "false").lower() in ("1", "true")
            return _json(200, self._tree(c, prefix, recursive))
        if op == "paths-info" and method == "POST":
            form = parse_qs(request.content.decode())
            out = []
            for p in form.get("paths", []):
                p = p.strip("/")
                if p in c.files:
                    out.append(c.files[p].entry(p))
                elif any(f.startswith(p + "/") for f in c.files):
                    out.append(self._dir_entry(p))
            return _json(200, out)
        return _error(404, f"fake hub: no route for {method} {request.url.path}")

    @staticmethod
    def _dir_entry(path: str) -> dict[str, Any]:
        return {"type": "directory", "oid": hashlib.sha1(path.encode()).hexdigest(), "size": 0, "path": path}

    def _tree(self, c: Commit, prefix: str, recursive: bool) -> list[dict[str, Any]]:
        base = prefix + "/" if prefix else ""
        out: dict[str, dict[str, Any]] = {}
        for p, blob in sorted(c.files.items()):
            if not p.startswith(base):
                continue
            rel = p[len(base):].split("/")
            for depth in range(1, len(rel)):
                d = base + "/".join(rel[:depth])
                if recursive or depth == 1:
                    out.setdefault(d, self._dir_entry(d))
                if not recursive:
                    break
            if recursive or len(rel) == 1:
                out[p] = blob.entry(p)
        return list(out.values())

    def _preupload(self, request: httpx2.Request, repo: Repo, rev: str) -> httpx2.Response:
        c = repo.resolve(rev)
        files = []
        for f in json.loads(request.content)["files"]:
            lfs = self._is_lfs(f["path"], f["size"])
            remote = c.files.get(f["path"]) if c else None
            oid = None
            if remote is not None:
                oid = remote.sha256 if remote.lfs else git_blob_sha1(remote.data)
            files.append({"path": f["path"], "uploadMode": "lfs" if lfs else "regular", "shouldIgnore": False,
                          "oid": oid})
        return _json(200, {"files": files, "commitOid": c.oid if c else None})

    def _lfs_batch(self, request: httpx2.Request, repo_id: str) -> httpx2.Response:
        repo = self._write_repo(request, repo_id)
        if isinstance(repo, httpx2.Response):
            return repo
        base = f"{request.url.scheme}://{request.url.host}"
        objects = []
        for o in json.loads(request.content)["objects"]:
            obj: dict[str, Any] = {"oid": o["oid"], "size": o["size"]}
            if o["oid"] not in repo.lfs:
                obj["actions"] = {"upload": {"href": f"{base}/__lfs/{repo_id}/{o['oid']}", "header": {}}}
            objects.append(obj)
        return _json(200, {"transfer": "basic", "objects": objects})

    def _lfs_put(self, request: httpx2.Request, repo_id: str, oid: str) -> httpx2.Response:
        repo = self.repos.get(repo_id)
        if repo is None:
            return _error(404, "no such repo")
        data = request.read()
        if hashlib.sha256(data).hexdigest() != oid:
            return _error(400, "sha256 mismatch")
        repo.lfs[oid] = data
        return httpx2.Response(200)

    def _commit(self, request: httpx2.Request, repo: Repo, branch: str) -> httpx2.Response:
        if branch not in repo.branches:
            return _error(404, f"Invalid rev id: {branch}", "RevisionNotFound")
        lines = [json.loads(line) for line in request.read().decode().splitlines() if line.strip()]
        header = next(item["value"] for item in lines if item["key"] == "header")
        head = repo.branches[branch]
        parent = header.get("parentCommit")
        if parent is not None and not head.startswith(parent):
            return _error(412, f"A commit has happened since. Please refresh and try again. ({parent} != {head})")
        tree = dict(repo.commits[head].files)
        for item in lines:
            key, v = item["key"], item["value"]
            if key == "file":
                data = base64.b64decode(v["content"])
                tree[v["path"]] = Blob(data, False)
            elif key == "lfsFile":
                if v["oid"] not in repo.lfs:
                    return _error(422, f"LFS object {v['oid']} of {v['path']} was never uploaded")
                tree[v["path"]] = Blob(repo.lfs[v["oid"]], True)
            elif key == "deletedFile":
                if v["path"] not in tree:
                    return _error(404, "A file with this name doesn't exist", "EntryNotFound")
                del tree[v["path"]]
            elif key == "deletedFolder":
                base = v["path"].rstrip("/") + "/"
                for p in [p for p in tree if p.startswith(base)]:
                    del tree[p]
        oid = self._new_commit(repo, branch, tree, header.get("summary", ""))
        url = f"{request.url.scheme}://{request.url.host}/datasets/{repo.repo_id}/commit/{oid}"
        return _json(200, {"commitUrl": url, "commitOid": oid, "pullRequestUrl": None, "success": True})

    def _resolve(self, request: httpx2.Request, method: str, repo_id: str, rev: str, path: str) -> httpx2.Response:
        repo = self._read_repo(request, repo_id)
        if isinstance(repo, httpx2.Response):
            return repo
        c = repo.resolve(rev)
        if c is None:
            return _error(404, f"Invalid rev id: {rev}", "RevisionNotFound")
        blob = c.files.get(path)
        if blob is None:
            return _error(404, f"Entry not found: {path}", "EntryNotFound")
        etag = f'"{blob.sha256 if blob.lfs else blob.oid}"'
        headers = {"X-Repo-Commit": c.oid, "ETag": etag, "Accept-Ranges": "bytes"}
        if blob.lfs:
            headers["X-Linked-Etag"] = etag
            headers["X-Linked-Size"] = str(len(blob.data))
        data = blob.data
        status = 200
        rng = request.headers.get("range")
        if rng:
            m = re.fullmatch(r"bytes=(\d*)-(\d*)", rng.strip())
            if m:
                size = len(data)
                if m[1] == "":
                    start, end = max(0, size - int(m[2])), size - 1
                else:
                    start = int(m[1])
                    end = min(int(m[2]), size - 1) if m[2] else size - 1
                if start >= size:
                    return httpx2.Response(416, headers={"Content-Range": f"bytes */{size}"})
                headers["Content-Range"] = f"bytes {start}-{end}/{size}"
                data, status = data[start:end + 1], 206
        headers["Content-Length"] = str(len(data))
        if method == "HEAD":
            return httpx2.Response(status, headers=headers)
        return httpx2.Response(status, headers=headers, content=data)
