"""A stand-in for huggingface.co on 127.0.0.1, small enough to read, for tests that must not touch the network.

It answers the requests huggingface_hub 2.4.0 makes to open a model (read from its file_download.py
and hf_api.py): GET /api/models/{repo}/revision/{rev}?blobs=true (the file list with sizes and the
commit), then HEAD and GET /{repo}/resolve/{rev}/{filename} (X-Repo-Commit, ETag and Content-Length
on the HEAD; the bytes, or a range of them, on the GET). Errors carry the X-Error-Code header the
library reads to tell a missing repo, a gated one and a missing file apart. Every request is logged;
`cut` makes the server drop a file's connection midway, as a failing network does.
"""

from __future__ import annotations

import hashlib
import json
import re
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import unquote, urlsplit

INFO = re.compile(r"/api/models/(?P<repo>[^/]+(?:/[^/]+)?)/revision/(?P<rev>[^/]+)")
RESOLVE = re.compile(r"/(?P<repo>[^/]+(?:/[^/]+)?)/resolve/(?P<rev>[^/]+)/(?P<file>.+)")


class FakeHub:
    """Serves `repos` (repo id -> file name -> bytes) until stopped; use as a context manager."""

    def __init__(self, repos: dict[str, dict[str, bytes]]):
        self.repos = repos
        self.log: list[tuple[str, str]] = []  # (method, path) of every request, in order
        self.cut: dict[str, int] = {}  # file name -> bytes sent before the connection drops (its resume: 503)
        self.ignore_range = False  # with `cut`: answer a resume with the whole file again, cut again
        self.gated: set[str] = set()
        self._server: ThreadingHTTPServer | None = None

    @staticmethod
    def commit(repo_id: str) -> str:
        return hashlib.sha1(repo_id.encode()).hexdigest()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def downloaded(self) -> list[str]:
        """The file names fetched with GET, in order."""
        return [unquote(path.rsplit("/resolve/", 1)[1].split("/", 1)[1]) for method, path in self.log
                if method == "GET" and "/resolve/" in path]

    def __enter__(self) -> FakeHub:
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
        self._server.hub = self
        self._server.daemon_threads = True
        threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop()

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None


class _Handler(BaseHTTPRequestHandler):
    def log_message(self, *args) -> None:  # quiet: the hub keeps its own log
        pass

    def do_HEAD(self) -> None:
        self._answer(body=False)

    def do_GET(self) -> None:
        self._answer(body=True)

    def _answer(self, body: bool) -> None:
        hub: FakeHub = self.server.hub
        hub.log.append((self.command, self.path))
        path = unquote(urlsplit(self.path).path)
        if m := INFO.fullmatch(path):
            return self._info(hub, m["repo"])
        if m := RESOLVE.fullmatch(path):
            return self._file(hub, m["repo"], m["file"], body)
        self._error(404, "NotFound")

    def _info(self, hub: FakeHub, repo_id: str) -> None:
        if repo_id not in hub.repos:
            return self._error(404, "RepoNotFound")
        files = hub.repos[repo_id]
        self._send(200, json.dumps({
            "id": repo_id, "sha": hub.commit(repo_id), "private": False,
            "gated": "manual" if repo_id in hub.gated else False,
            "siblings": [{"rfilename": name, "size": len(data)} for name, data in files.items()],
        }).encode(), {"Content-Type": "application/json"})

    def _file(self, hub: FakeHub, repo_id: str, name: str, body: bool) -> None:
        if repo_id not in hub.repos:
            return self._error(404, "RepoNotFound")
        if repo_id in hub.gated:
            return self._error(401, "GatedRepo")
        commit = {"X-Repo-Commit": hub.commit(repo_id)}
        data = hub.repos[repo_id].get(name)
        if data is None:
            return self._error(404, "EntryNotFound", commit)
        headers = {**commit, "ETag": f'"{hashlib.sha256(data).hexdigest()}"', "Accept-Ranges": "bytes"}
        start = int(m[1]) if (m := re.fullmatch(r"bytes=(\d+)-", self.headers.get("Range", ""))) else 0
        if body and name in hub.cut and start and not hub.ignore_range:
            return self._error(503, "Unavailable")  # the resume fails too: the download gives up
        if not body or hub.ignore_range or not start:
            return self._send(200, data if body else b"", {**headers, "Content-Length": str(len(data))},
                              cut=hub.cut.get(name) if body else None)
        self._send(206, data[start:], {**headers, "Content-Range": f"bytes {start}-{len(data) - 1}/{len(data)}"})

    def _error(self, status: int, code: str, headers: dict | None = None) -> None:
        self._send(status, code.encode(), {**(headers or {}), "X-Error-Code": code, "X-Error-Message": code})

    def _send(self, status: int, data: bytes, headers: dict, cut: int | None = None) -> None:
        self.send_response(status)
        headers.setdefault("Content-Length", str(len(data)))
        for key, value in headers.items():
            self.send_header(key, value)
        self.end_headers()
        self.wfile.write(data if cut is None else data[:cut])  # cut: fewer bytes than promised, then close
        self.close_connection = True
