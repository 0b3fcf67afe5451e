#!/usr/bin/env python3
"""hub.py - a loopback stand-in for the Hugging Face hub, for tests/pull.sh.

usage: hub.py ROOT PORTFILE LOGFILE

ROOT/ORG/REPO/... are the repositories. It answers as the hub does:
  GET /api/models/ORG/REPO/tree/REV   the listing: type, path, size, oid, and lfs {oid: SHA-256, size}
                                      for .gguf files (404 and {"error": ...} for no such repository)
  GET /ORG/REPO/resolve/REV/PATH      302 to /cdn/ORG/REPO/PATH, with X-Linked-Etag (the SHA-256,
                                      quoted), X-Linked-Size, X-Repo-Commit; 404 with X-Error-Code
  GET /cdn/ORG/REPO/PATH              the bytes, with Range (206, Content-Range) as a CDN serves them
A repository named gated-* answers 401 unless Authorization is "Bearer secret".
ROOT/.faults (JSON, read on each request) makes it misbehave:
  {"cut_once": {"ORG/REPO/PATH": N}}   the next /cdn answer sends N bytes of the body, then hangs up
  {"slow": {"ORG/REPO/PATH": BPS}}     the body at BPS bytes a second
  {"bad_sha": ["ORG/REPO/PATH"]}       a wrong SHA-256 in the listing and X-Linked-Etag
  {"no_length": ["ORG/REPO/PATH"]}     /cdn answers without Content-Length (the end is the close)
  {"extra": {"ORG/REPO": [PATH, ...]}} paths the listing names that are not there (a hostile listing)
  {"pages": {"ORG/REPO": N}}            the listing in pages of N entries, each with a Link header
                                        (rel="next", the hub's &cursor=) to the next
  {"pages_elsewhere": ["ORG/REPO"]}     ... whose Link names another host
  {"endless": ["ORG/REPO/PATH"]}       /cdn answers without Content-Length, the file then zeros without end
  {"listing_file": {"ORG/REPO": FILE}} the listing's body is FILE's bytes (a hostile listing)
  {"redirect": {"ORG/REPO/PATH": URL}} resolve redirects there instead of to /cdn
A resume's If-Range that is not the file's ETag gets the whole file (200), as HTTP says.
Each request is a line of LOGFILE: METHOD PATH RANGE-or-"-" and "auth" when it carried Authorization.
"""
import hashlib
import json
import os
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

ROOT, PORTFILE, LOGFILE = sys.argv[1], sys.argv[2], sys.argv[3]
lock = threading.Lock()
sha_cache = {}


def faults():
    try:
        with open(os.path.join(ROOT, ".faults")) as f:
            return json.load(f)
    except (OSError, ValueError):
        return {}


def take_cut(key):
    """The cut for key, removed so that it happens once."""
    with lock:
        fl = faults()
        n = fl.get("cut_once", {}).pop(key, None)
        if n is not None:
            with open(os.path.join(ROOT, ".faults"), "w") as f:
                json.dump(fl, f)
        return n


def sha256(path):
    st = os.stat(path)
    k = (path, st.st_size, st.st_mtime_ns)
    if k not in sha_cache:
        h = hashlib.sha256()
        with open(path, "rb") as f:
            for b in iter(lambda: f.read(1 << 20), b""):
                h.update(b)
        sha_cache[k] = h.hexdigest()
    return sha_cache[k]


def published_sha(key, path):
    return "0" * 64 if key in faults().get("bad_sha", []) else sha256(path)


padded = {}


def padding(n):
    """n small GGUF entries (a listing of many files), made once."""
    if n not in padded:
        z = "0" * 64
        padded[n] = [{"type": "file", "oid": z[:40], "size": 1, "path": "p%d-F16.gguf" % i,
                      "lfs": {"oid": z, "size": 1, "pointerSize": 134}} for i in range(n)]
    return padded[n]


class Hub(BaseHTTPRequestHandler):
    def log_message(self, *a):
        pass

    def send(self, code, body=b"", headers=()):
        self.send_response(code)
        for k, v in headers:
            self.send_header(k, v)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def allowed(self, org_repo):
        if org_repo.split("/")[1].startswith("gated-") and self.headers.get("Authorization") != "Bearer secret":
            self.send(401, b'{"error":"Access to this repository is restricted"}', [("X-Error-Code", "GatedRepo")])
            return False
        return True

    def do_GET(self):
        with lock, open(LOGFILE, "a") as log:
            log.write("%s %s %s%s\n" % (self.command, self.path, self.headers.get("Range", "-"),
                                        " auth" if self.headers.get("Authorization") else ""))
        parts = self.path.split("?")[0].strip("/").split("/")
        if parts[:2] == ["api", "models"] and len(parts) >= 6 and parts[4] == "tree":
            return self.listing("/".join(parts[2:4]))
        if len(parts) >= 5 and parts[2] == "resolve":
            return self.resolve("/".join(parts[:2]), "/".join(parts[4:]))
        if parts[0] == "cdn" and len(parts) >= 4:
            return self.cdn("/".join(parts[1:]))
        self.send(404, b"no route")

    do_HEAD = do_GET

    def listing(self, org_repo):
        top = os.path.join(ROOT, org_repo)
        if not os.path.isdir(top):
            return self.send(404, b'{"error":"Repository not found"}', [("X-Error-Code", "RepoNotFound")])
        if not self.allowed(org_repo):
            return
        raw = faults().get("listing_file", {}).get(org_repo)
        if raw:
            with open(raw, "rb") as f:
                return self.send(200, f.read(), [("Content-Type", "application/json")])
        out = []
        for d, _, names in os.walk(top):
            for n in sorted(names):
                p = os.path.join(d, n)
                rel = os.path.relpath(p, top)
                e = {"type": "file", "oid": hashlib.sha1(rel.encode()).hexdigest(), "size": os.path.getsize(p), "path": rel}
                if n.endswith(".gguf"):
                    e["lfs"] = {"oid": published_sha(org_repo + "/" + rel, p), "size": e["size"], "pointerSize": 134}
                out.append(e)
        pad = faults().get("padding", {}).get(org_repo)  # N: N small GGUF entries before the real files
        if pad:
            out[:0] = padding(pad)
        for rel in faults().get("extra", {}).get(org_repo, []):
            out.append({"type": "file", "oid": "0" * 40, "size": 10, "path": rel, "lfs": {"oid": "0" * 64, "size": 10}})
        self.send(200, *self.page(org_repo, out))

    def page(self, org_repo, out):
        """The body and headers of the page the request's cursor asks for (the whole listing unpaged)."""
        size = faults().get("pages", {}).get(org_repo)
        headers = [("Content-Type", "application/json")]
        if not size:
            return json.dumps(out).encode(), headers
        query = dict(q.split("=", 1) for q in self.path.partition("?")[2].split("&") if "=" in q)
        at = int(query.get("cursor", "0"))
        if at + size < len(out):
            host = "http://elsewhere.invalid" if org_repo in faults().get("pages_elsewhere", []) else \
                "http://127.0.0.1:%d" % self.server.server_address[1]
            nxt = "%s%s&cursor=%d" % (host, self.path.partition("?")[0] + "?recursive=true", at + size)
            headers.append(("Link", '<%s>; rel="next"' % nxt))
        return json.dumps(out[at:at + size]).encode(), headers

    def resolve(self, org_repo, rel):
        p = os.path.join(ROOT, org_repo, rel)
        if not self.allowed(org_repo):
            return
        if not os.path.isfile(p):
            return self.send(404, b"Entry not found", [("X-Error-Code", "EntryNotFound")])
        where = faults().get("redirect", {}).get(org_repo + "/" + rel, "/cdn/%s/%s" % (org_repo, rel))
        self.send(302, b"", [("Location", where), ("X-Repo-Commit", "0123abcd" * 5),
                             ("X-Linked-Etag", '"%s"' % published_sha(org_repo + "/" + rel, p)),
                             ("X-Linked-Size", str(os.path.getsize(p))), ("ETag", '"%s"' % hashlib.sha1(rel.encode()).hexdigest())])

    def cdn(self, key):
        p = os.path.join(ROOT, key)
        if not os.path.isfile(p):
            return self.send(404, b"NoSuchKey")
        size = os.path.getsize(p)
        start, code = 0, 200
        rng = self.headers.get("Range")
        if_range = self.headers.get("If-Range")
        if if_range and if_range != '"%s"' % sha256(p):
            rng = None  # changed since the validator: the whole file
        if rng and rng.startswith("bytes=") and rng.endswith("-"):
            start = int(rng[6:-1])
            if start >= size:
                return self.send(416, b"", [("Content-Range", "bytes */%d" % size)])
            code = 206
        fl = faults()
        self.send_response(code)
        self.send_header("Accept-Ranges", "bytes")
        self.send_header("ETag", '"%s"' % sha256(p))
        if code == 206:
            self.send_header("Content-Range", "bytes %d-%d/%d" % (start, size - 1, size))
        endless = key in fl.get("endless", [])
        if key not in fl.get("no_length", []) and not endless:
            self.send_header("Content-Length", str(size - start))
        self.end_headers()
        cut, bps = take_cut(key), fl.get("slow", {}).get(key)
        sent = 0
        with open(p, "rb") as f:
            f.seek(start)
            while True:
                b = f.read(16384)
                if not b:
                    break
                if cut is not None and sent + len(b) > cut:
                    self.wfile.write(b[: cut - sent])
                    self.wfile.flush()
                    self.close_connection = True
                    return
                try:
                    self.wfile.write(b)
                except OSError:
                    return
                sent += len(b)
                if bps:
                    time.sleep(len(b) / bps)
        while endless:  # the client must stop at the size the hub published
            try:
                self.wfile.write(bytes(65536))
            except OSError:
                return


srv = ThreadingHTTPServer(("127.0.0.1", 0), Hub)
srv.daemon_threads = True
with open(PORTFILE + ".tmp", "w") as f:
    f.write(str(srv.server_address[1]))
os.rename(PORTFILE + ".tmp", PORTFILE)
srv.serve_forever()
