"""The null binder: binds every pending pod of one schedulerName round-robin across nodes, no algorithm.

It lists the pending pods, then watches for new ones, and binds them with up to `--concurrency`
requests in flight over one connection pool: the most binds per second this API server takes,
the ceiling any scheduler could reach here. Binds go out on a bare aiohttp session (the generated
client's call_api costs about twice the CPU per request). Runs until SIGTERM.

    python bench/nullbinder.py --kubeconfig K --scheduler-name S [--concurrency 64]
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import signal
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import aiohttp
from kubebench.kubeapi import ApiError, list_items, new_client, raw_session, watch_events
from kubernetes_asyncio import client

from kubesched.kube.client import TokenBucket

RETRIES = 5


class NullBinder:
    def __init__(
        self, api: client.ApiClient, session: aiohttp.ClientSession, nodes: list[str], limiter: TokenBucket
    ) -> None:
        self.api = api
        self.session = session
        self.server = str(api.configuration.host).rstrip("/")
        self.targets = itertools.cycle(nodes)
        self.limiter = limiter
        self.queue: asyncio.Queue[tuple[str, str]] = asyncio.Queue()
        self.seen: set[tuple[str, str]] = set()
        self.bound = 0
        self.failed = 0

    def offer(self, pod: dict[str, Any]) -> None:
        if pod["spec"].get("nodeName"):
            return
        key = (pod["metadata"]["namespace"], pod["metadata"]["name"])
        if key not in self.seen:
            self.seen.add(key)
            self.queue.put_nowait(key)

    async def worker(self) -> None:
        while True:
            namespace, name = await self.queue.get()
            await self.bind(namespace, name)

    async def bind(self, namespace: str, name: str) -> None:
        body = {
            "apiVersion": "v1",
            "kind": "Binding",
            "metadata": {"name": name, "namespace": namespace},
            "target": {"apiVersion": "v1", "kind": "Node", "name": next(self.targets)},
        }
        url = f"{self.server}/api/v1/namespaces/{namespace}/pods/{name}/binding"
        data = json.dumps(body).encode()
        for attempt in range(RETRIES):
            await self.limiter.acquire()
            try:
                # The lightest client at hand: this measures the API server, not a client library.
                async with self.session.post(url, data=data) as response:
                    status, reply = response.status, await response.text()
            except (aiohttp.ClientError, OSError, TimeoutError) as e:
                status, reply = 0, repr(e)
            if status in (200, 201):
                self.bound += 1
                return
            if status in (404, 409):  # gone, or bound already: nothing left to do
                return
            if attempt == RETRIES - 1:
                self.failed += 1
                print(f"bind {namespace}/{name} failed: {status} {reply}", file=sys.stderr, flush=True)
                return
            await asyncio.sleep(0.1 * (attempt + 1))


async def watch_pending(binder: NullBinder, selector: str) -> None:
    """List the pending pods, then follow new ones; a re-list after the watch expires (410) or breaks."""
    while True:
        pods, version = await list_items(binder.api, "/api/v1/pods", [("fieldSelector", selector)])
        for pod in pods:
            binder.offer(pod)
        try:
            while True:
                async for event in watch_events(
                    binder.api, "/api/v1/pods", version, [("fieldSelector", selector)], 300
                ):
                    kind, obj = event.get("type"), event.get("object") or {}
                    if kind == "ERROR":
                        raise ApiError("watch", int(obj.get("code") or 0), obj.get("message"))
                    version = obj.get("metadata", {}).get("resourceVersion") or version
                    if kind == "ADDED":
                        binder.offer(obj)
        except (ApiError, aiohttp.ClientError, OSError, TimeoutError, ValueError) as e:
            print(f"watch restarts after: {e!r}", file=sys.stderr, flush=True)
            await asyncio.sleep(0.2)


async def main(args: argparse.Namespace) -> None:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    api = await new_client(args.kubeconfig, pool=8)
    session = raw_session(api.configuration, args.concurrency + 8)
    async with api, session:
        nodes, _ = await list_items(api, "/api/v1/nodes")
        names = [n["metadata"]["name"] for n in nodes]
        if not names:
            print("no nodes", file=sys.stderr)
            sys.exit(2)
        binder = NullBinder(api, session, names, TokenBucket(args.kube_api_qps, args.kube_api_burst))
        selector = f"spec.schedulerName={args.scheduler_name},spec.nodeName="
        tasks: list[asyncio.Task[object]] = [
            asyncio.create_task(binder.worker()) for _ in range(args.concurrency)
        ]
        tasks.append(asyncio.create_task(watch_pending(binder, selector)))
        stopping: asyncio.Task[object] = asyncio.create_task(stop.wait())
        done, _ = await asyncio.wait([*tasks, stopping], return_when=asyncio.FIRST_COMPLETED)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        for task in done - {stopping}:
            error = task.exception()
            if error is not None:
                raise error
        print(f"bound {binder.bound}, failed {binder.failed}", file=sys.stderr, flush=True)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--kubeconfig", required=True)
    parser.add_argument("--scheduler-name", required=True)
    parser.add_argument("--concurrency", type=int, default=64, help="binds in flight at once")
    parser.add_argument("--kube-api-qps", type=float, default=0.0, help="client-side limit (0: none)")
    parser.add_argument("--kube-api-burst", type=int, default=100)
    return parser.parse_args(argv)


if __name__ == "__main__":
    asyncio.run(main(parse_args()))
