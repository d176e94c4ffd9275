"""A scheduler extender for the tests: a real HTTP server speaking kube-scheduler's extender wire
format, run as its own process (`python tests/extender_server.py --behaviour '{...}'`).

It prints `PORT <n>` once listening, and appends every request it receives to --log as one JSON
line ({"verb": ..., "body": ...}). The behaviour (JSON) says, per verb, what to answer:

  {"filter": {"reject": {"node": "reason"}, "error": "", "status": 200, "delay": 0.0},
   "prioritize": {"scores": {"node": 10}, "status": 200, "delay": 0.0},
   "bind": {"error": "", "status": 200},
   "preempt": {"drop": ["node"], "max_victims": 1, "status": 200, "delay": 0.0}}

Rejected nodes go to FailedNodes; the others are returned as NodeNames (nodeCacheCapable
requests) or as the Nodes list. The preempt verb answers every candidate node but the dropped
ones, each with its victims' UIDs (the first `max_victims` of them, when set). With
--api-server/--token/--ca-file, the bind verb really binds the pod through the API server's
binding subresource.

A key "<segment>/<verb>" sets the behaviour of the verb under a URL prefix ending in that segment
only (`http://127.0.0.1:PORT/<segment>`), so that one process can serve many cases. Any verb can
misbehave instead of answering, for the fault tests:

  {"reply": <JSON>}           answer this JSON value (of any shape) with status 200
  {"raw": "text"}             answer these bytes, whatever they are
  {"body_bytes": n}           stream n bytes of blanks, with no Content-Length
  {"announce_bytes": n}       announce a Content-Length of n, send two bytes, then wait
  {"hang": true}              read the request, never answer
  {"stall_body": true}        send the headers and the start of the body, then wait
  {"drip": seconds}           send the headers, then one byte every so many seconds, forever
  {"close": true}             close the connection without a word

Those that wait or drip log {"gone": verb} once the client has closed the connection
(ExtenderProcess.gone()).

With --tls-cert/--tls-key it serves HTTPS (`make_tls` makes a CA and a certificate for
127.0.0.1 and localhost). With --keep-alive SECONDS it speaks HTTP/1.1 and keeps connections
open between requests, closing those idle for that long.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import ssl
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from types import TracebackType
from typing import Any

_MISBEHAVIOURS = frozenset(
    {"reply", "raw", "body_bytes", "announce_bytes", "hang", "stall_body", "drip", "close"}
)


class Extender(BaseHTTPRequestHandler):
    behaviour: dict[str, Any] = {}
    log_path = ""
    api: tuple[str, str, str] | None = None
    lock = threading.Lock()

    def log_message(self, format: str, *args: Any) -> None:
        pass  # quiet: the test reads --log

    def handle(self) -> None:
        # A client that gives up mid-way (or fails the TLS handshake) is part of the tests.
        with contextlib.suppress(OSError):
            super().handle()

    def do_POST(self) -> None:
        case, verb = ["", *self.path.rstrip("/").split("/")][-2:]
        body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)) or b"null")
        self._log({"verb": verb, "body": body})
        config = self.behaviour.get(f"{case}/{verb}") or self.behaviour.get(verb) or {}
        time.sleep(float(config.get("delay", 0)))
        if self._misbehave(config):
            return
        status = int(config.get("status", 200))
        if status != 200:
            self._reply(status, {"error": "configured failure"})
            return
        if verb == "filter":
            self._reply(200, self._filter(body, config))
        elif verb == "prioritize":
            self._reply(200, self._prioritize(body, config))
        elif verb == "bind":
            self._reply(200, self._bind(body, config))
        elif verb == "preempt":
            self._reply(200, self._preempt(body, config))
        else:
            self._reply(404, {"error": f"unknown verb {verb}"})

    def _misbehave(self, config: dict[str, Any]) -> bool:
        """Answer as a broken extender would, when `config` says so; False: answer properly."""
        if not _MISBEHAVIOURS.intersection(config):
            return False
        self.close_connection = True  # even with --keep-alive
        if "reply" in config:
            self._reply(200, config["reply"])
        elif "raw" in config:
            self._headers(len(config["raw"].encode()))
            self.wfile.write(config["raw"].encode())
        elif config.get("body_bytes"):
            self._headers(None)
            left = int(config["body_bytes"])
            while left > 0:
                self.wfile.write(b" " * min(left, 65536))
                left -= 65536
        elif config.get("announce_bytes"):
            self._headers(int(config["announce_bytes"]))
            self.wfile.write(b"{}")
            self._wait_for_client()
        elif config.get("hang"):
            self._wait_for_client()
        elif config.get("stall_body"):
            self._headers(1000)
            self.wfile.write(b'{"NodeNames": [')
            self._wait_for_client()
        elif config.get("drip"):
            self._headers(None)
            try:
                while True:
                    self.wfile.write(b" ")
                    time.sleep(float(config["drip"]))
            except OSError:
                self._log({"gone": self._verb()})
        # "close": nothing written
        return True

    def _headers(self, length: int | None) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        if length is not None:
            self.send_header("Content-Length", str(length))
        self.end_headers()

    def _wait_for_client(self) -> None:
        """Until the client closes the connection (or a minute passes); then logs {"gone": verb}."""
        self.connection.settimeout(60)
        self.rfile.read(1)
        self._log({"gone": self._verb()})

    def _verb(self) -> str:
        return self.path.rstrip("/").rsplit("/", 1)[-1]

    def _log(self, entry: dict[str, Any]) -> None:
        if self.log_path:
            with self.lock, open(self.log_path, "a", encoding="utf-8") as log:
                log.write(json.dumps(entry) + "\n")

    def _names(self, body: dict[str, Any]) -> list[str]:
        if body.get("NodeNames") is not None:
            return list(body["NodeNames"])
        return [n["metadata"]["name"] for n in (body.get("Nodes") or {}).get("items") or []]

    def _filter(self, body: dict[str, Any], config: dict[str, Any]) -> dict[str, Any]:
        if config.get("error"):
            return {"Error": config["error"]}
        reject: dict[str, str] = config.get("reject") or {}
        names = self._names(body)
        kept = [n for n in names if n not in reject]
        failed = {n: reject[n] for n in names if n in reject}
        if body.get("NodeNames") is not None:
            return {"NodeNames": kept, "FailedNodes": failed, "Error": ""}
        items = [n for n in (body.get("Nodes") or {}).get("items") or [] if n["metadata"]["name"] in kept]
        return {"Nodes": {"items": items}, "FailedNodes": failed, "Error": ""}

    def _prioritize(self, body: dict[str, Any], config: dict[str, Any]) -> list[dict[str, Any]]:
        scores: dict[str, int] = config.get("scores") or {}
        return [{"Host": n, "Score": scores.get(n, 0)} for n in self._names(body)]

    def _preempt(self, body: dict[str, Any], config: dict[str, Any]) -> dict[str, Any]:
        # NodeNameToMetaVictims (nodeCacheCapable) carries UIDs, NodeNameToVictims whole pods.
        meta = body.get("NodeNameToMetaVictims")
        candidates = meta if meta is not None else body.get("NodeNameToVictims") or {}
        drop = set(config.get("drop") or ())
        limit = config.get("max_victims")
        answer: dict[str, Any] = {}
        for node, victims in candidates.items():
            if node in drop:
                continue
            pods = victims.get("Pods") or []
            uids = [p["UID"] if meta is not None else p["metadata"]["uid"] for p in pods]
            if limit is not None:
                uids = uids[: int(limit)]
            answer[node] = {"Pods": [{"UID": u} for u in uids], "NumPDBViolations": 0}
        return {"NodeNameToMetaVictims": answer}

    def _bind(self, body: dict[str, Any], config: dict[str, Any]) -> dict[str, Any]:
        if config.get("error"):
            return {"Error": config["error"]}
        if self.api is not None:
            server, token, ca_file = self.api
            binding = {
                "apiVersion": "v1",
                "kind": "Binding",
                "metadata": {
                    "name": body["PodName"],
                    "namespace": body["PodNamespace"],
                    "uid": body["PodUID"],
                },
                "target": {"apiVersion": "v1", "kind": "Node", "name": body["Node"]},
            }
            request = urllib.request.Request(
                f"{server}/api/v1/namespaces/{body['PodNamespace']}/pods/{body['PodName']}/binding",
                data=json.dumps(binding).encode(),
                headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"},
                method="POST",
            )
            try:
                urllib.request.urlopen(
                    request, context=ssl.create_default_context(cafile=ca_file), timeout=10
                )
            except Exception as exc:  # the scheduler shows the extender's error
                return {"Error": f"binding failed: {exc}"}
        return {"Error": ""}

    def _reply(self, status: int, payload: Any) -> None:
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request: Any, client_address: Any) -> None:
        pass  # a failed TLS handshake, a client gone: expected in the fault tests


@dataclass(frozen=True, slots=True)
class TLSFiles:
    """A CA, and a serving certificate it signed for 127.0.0.1 and localhost, with its key."""

    ca: Path
    cert: Path
    key: Path


def make_tls(directory: Path) -> TLSFiles:
    """Make a CA and a serving certificate in `directory` with the openssl CLI (EC keys: instant)."""
    directory.mkdir(parents=True, exist_ok=True)
    files = TLSFiles(directory / "ca.crt", directory / "server.crt", directory / "server.key")
    ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]
    ca_key, csr, ext = directory / "ca.key", directory / "server.csr", directory / "server.ext"
    ext.write_text(
        "basicConstraints = critical,CA:FALSE\nkeyUsage = critical,digitalSignature\n"
        "extendedKeyUsage = serverAuth\nsubjectKeyIdentifier = hash\n"
        "authorityKeyIdentifier = keyid,issuer\nsubjectAltName = IP:127.0.0.1,DNS:localhost\n"
    )
    ca_subject = ["-subj", "/CN=extender-test-ca", "-days", "2"]
    _openssl("req", "-x509", *ec, *ca_subject, "-keyout", ca_key, "-out", files.ca)
    _openssl("req", "-new", *ec, "-subj", "/CN=extender", "-keyout", files.key, "-out", csr)
    _openssl(
        "x509", "-req", "-in", csr, "-CA", files.ca, "-CAkey", ca_key, "-CAcreateserial", "-days", "2",
        "-extfile", ext, "-out", files.cert,
    )  # fmt: skip
    return files


def _openssl(*args: str | Path) -> None:
    result = subprocess.run(["openssl", *map(str, args)], capture_output=True, text=True, check=False)
    if result.returncode != 0:
        raise RuntimeError(f"openssl {args[0]} failed: {result.stderr.strip()}")


class ExtenderProcess:
    """Runs this script as a child process; `url` is its address once started."""

    def __init__(
        self, behaviour: dict[str, Any], log: Path, extra: Sequence[str] = (), *, tls: TLSFiles | None = None
    ) -> None:
        self.behaviour = behaviour
        self.log = log
        self.extra = list(extra)
        if tls is not None:
            self.extra += ["--tls-cert", str(tls.cert), "--tls-key", str(tls.key)]
        self.scheme = "https" if tls is not None else "http"
        self.proc: subprocess.Popen[str] | None = None
        self.url = ""

    def __enter__(self) -> ExtenderProcess:
        command = [
            sys.executable,
            __file__,
            "--behaviour",
            json.dumps(self.behaviour),
            "--log",
            str(self.log),
        ]
        self.proc = subprocess.Popen([*command, *self.extra], stdout=subprocess.PIPE, text=True)
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        if not line.startswith("PORT "):
            raise RuntimeError(f"extender did not start: {line!r}")
        self.url = f"{self.scheme}://127.0.0.1:{int(line.split()[1])}/scheduler"
        return self

    def __exit__(self, *exc: object | TracebackType) -> None:
        if self.proc is not None:
            self.proc.terminate()
            self.proc.wait(10)

    def requests(self) -> list[dict[str, Any]]:
        """Every request received so far: {"verb": ..., "body": ...}."""
        return [entry for entry in self._entries() if "verb" in entry]

    def gone(self) -> list[str]:
        """The verbs of the calls whose client closed the connection while the server held it."""
        return [entry["gone"] for entry in self._entries() if "gone" in entry]

    def _entries(self) -> list[dict[str, Any]]:
        if not self.log.exists():
            return []
        return [json.loads(line) for line in self.log.read_text().splitlines() if line]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--behaviour", default="{}")
    parser.add_argument("--log", default="")
    parser.add_argument("--api-server", default="")
    parser.add_argument("--token", default="")
    parser.add_argument("--ca-file", default="")
    parser.add_argument("--tls-cert", default="")
    parser.add_argument("--tls-key", default="")
    parser.add_argument(
        "--keep-alive", type=float, default=0.0, help="HTTP/1.1, idle connections closed after"
    )
    args = parser.parse_args()
    Extender.behaviour = json.loads(args.behaviour)
    Extender.log_path = args.log
    if args.api_server:
        Extender.api = (args.api_server, args.token, args.ca_file)
    if args.keep_alive:
        Extender.protocol_version = "HTTP/1.1"
        Extender.timeout = args.keep_alive
    server = _Server(("127.0.0.1", args.port), Extender)
    if args.tls_cert:
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(args.tls_cert, args.tls_key)
        # The handshake happens in the handler's thread, on its first read: a client that never
        # completes one cannot block the accepting loop.
        server.socket = context.wrap_socket(server.socket, server_side=True, do_handshake_on_connect=False)
    print(f"PORT {server.server_address[1]}", flush=True)
    with contextlib.suppress(KeyboardInterrupt):
        server.serve_forever()
    sys.exit(0)


if __name__ == "__main__":
    main()


@contextlib.contextmanager
def extender_processes(directory: Path) -> Iterator[Callable[[dict[str, Any]], ExtenderProcess]]:
    """A starter of extender processes, each logging under `directory`; all stopped on exit."""
    started: list[ExtenderProcess] = []

    def start(behaviour: dict[str, Any]) -> ExtenderProcess:
        process = ExtenderProcess(behaviour, directory / f"extender-{len(started)}.log").__enter__()
        started.append(process)
        return process

    try:
        yield start
    finally:
        for process in started:
            process.__exit__(None, None, None)
