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
from collections.abc import Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from types import TracebackType
from typing import Any


class Extender(BaseHTTPRequestHandler):
    behaviour: dict[str, Any] = {}
    log_path = ""
    api: tuple[str, str, str] | None = None
    lock = threading.Lock()

    def log_message(self, format: str, *args: Any) -> None:
        pass  # quiet: the test reads --log

    def do_POST(self) -> None:
        verb = self.path.rstrip("/").rsplit("/", 1)[-1]
        body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)) or b"null")
        if self.log_path:
            with self.lock, open(self.log_path, "a", encoding="utf-8") as log:
                log.write(json.dumps({"verb": verb, "body": body}) + "\n")
        config = self.behaviour.get(verb) or {}
        time.sleep(float(config.get("delay", 0)))
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


class ExtenderProcess:
    """Runs this script as a child process; `url` is its address once started."""

    def __init__(self, behaviour: dict[str, Any], log: Path, extra: Sequence[str] = ()) -> None:
        self.behaviour = behaviour
        self.log = log
        self.extra = list(extra)
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
        self.url = f"http://127.0.0.1:{int(line.split()[1])}/scheduler"
        return self

    def __exit__(self, *exc: object | TracebackType) -> None:
        if self.proc is not None:
            self.proc.terminate()
            self.proc.wait(10)

    def requests(self) -> list[dict[str, Any]]:
        """Every request received so far: {"verb": ..., "body": ...}."""
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
    args = parser.parse_args()
    Extender.behaviour = json.loads(args.behaviour)
    Extender.log_path = args.log
    if args.api_server:
        Extender.api = (args.api_server, args.token, args.ca_file)
    server = ThreadingHTTPServer(("127.0.0.1", args.port), Extender)
    server.daemon_threads = True
    print(f"PORT {server.server_address[1]}", flush=True)
    with contextlib.suppress(KeyboardInterrupt):
        server.serve_forever()
    sys.exit(0)


if __name__ == "__main__":
    main()
