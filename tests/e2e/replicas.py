"""Replicas of `kubesched run` as real processes, and the checks of what they did: every pod bound
once, no node overcommitted, every bind inside its replica's term, the cache as the API has it.

Shared by the high-availability and the fault-injection tests. Each replica logs JSON: its terms
(`leader_elected` since, `leader_lost` until) and every bind with the wall-clock moment the
request left (`pod_bound` sent_at).
"""

from __future__ import annotations

import asyncio
import bisect
import contextlib
import itertools
import json
import signal
import socket
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import aiohttp
from kubernetes_asyncio.client import ApiClient

from kubesched.kube.client import request
from kubesched.kube.election import parse_micro_time
from kubesched.model.kinds import NON_TERMINAL_PODS
from kubesched.model.objects import node_from_dict, pod_from_dict
from kubesched_dev.fixtures import create_nodes, make_node, make_pod, sum_resources, wait_for

from ..integration.kubesched_process import KubeschedProcess

LEASE_NAMESPACE = "kube-system"
# Short timings keep the default run quick (a 6 s renew deadline still rides out the API server's
# latency while three replicas and the test share two cores); the `slow` variant uses
# kube-scheduler's 15/10/2 s.
FAST = (8.0, 6.0, 1.0)
DEFAULT = (15.0, 10.0, 2.0)
# What a takeover may take beyond the timing rules: requests on a loaded two-core machine.
SLACK = 1.5
SEED_POLICY = Path(__file__).parents[2] / "examples" / "policies" / "seed-policy.json"
NODE_CPU_MILLI = 2100
POD_CPU = "100m"


def election_args(timings: tuple[float, float, float]) -> list[str]:
    lease, renew, retry = timings
    return [
        f"--leader-elect-lease-duration={lease}s",
        f"--leader-elect-renew-deadline={renew}s",
        f"--leader-elect-retry-period={retry}s",
    ]


# ------------------------------------------------------------------------------------ replicas


@dataclass(frozen=True, slots=True)
class Bind:
    pod: str
    node: str
    sent_at: float


@dataclass
class Replica:
    proc: KubeschedProcess
    metrics_port: int
    killed_at: float | None = None
    _events: list[dict[str, Any]] = field(default_factory=list)
    _offset: int = 0

    def events(self) -> list[dict[str, Any]]:
        """The JSON log lines so far (read incrementally)."""
        if not self.proc.log_path.exists():
            return self._events
        with self.proc.log_path.open("rb") as f:
            f.seek(self._offset)
            chunk = f.read()
        complete = chunk[: chunk.rfind(b"\n") + 1]
        self._offset += len(complete)
        for line in complete.splitlines():
            with contextlib.suppress(ValueError):
                event = json.loads(line)
                if isinstance(event, dict):
                    self._events.append(event)
        return self._events

    def named(self, name: str) -> list[dict[str, Any]]:
        return [e for e in self.events() if e.get("event") == name]

    @property
    def identity(self) -> str:
        started = self.named("election_started")
        return str(started[0]["identity"]) if started else ""

    def terms(self) -> list[tuple[float, float]]:
        """(since, until) in wall-clock seconds; a term still open ends now, or when it was killed."""
        terms: list[tuple[float, float]] = []
        since: float | None = None
        for event in self.events():
            if event.get("event") == "leader_elected":
                since = float(event["since"])
            elif event.get("event") == "leader_lost" and since is not None:
                terms.append((since, float(event["until"])))
                since = None
        if since is not None:
            terms.append((since, self.killed_at or time.time()))
        return terms

    def leading(self) -> bool:
        if not self.proc.alive:
            return False
        states = [e["event"] for e in self.events() if e.get("event") in ("leader_elected", "leader_lost")]
        return bool(states) and states[-1] == "leader_elected"

    def binds(self) -> list[Bind]:
        return [Bind(e["pod"], e["node"], float(e["sent_at"])) for e in self.named("pod_bound")]

    def signal(self, sig: signal.Signals) -> float:
        assert self.proc.proc is not None
        at = time.time()
        self.proc.proc.send_signal(sig)
        if sig == signal.SIGKILL:
            self.killed_at = at
            self.proc.proc.wait(10)
        return at

    async def get(self, path: str) -> tuple[int, str]:
        async with (
            aiohttp.ClientSession() as session,
            session.get(f"http://127.0.0.1:{self.metrics_port}{path}") as response,
        ):
            return response.status, await response.text()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def election_story(replicas: Sequence[Replica], since: float) -> str:
    """The survivors' election log lines after `since`, to tell a slow API server from a slow replica."""
    lines = []
    for replica in replicas:
        for event in replica.events():
            if str(event.get("event", "")).startswith(("lease_", "leader_")) and "timestamp" in event:
                stamp = datetime.fromisoformat(str(event["timestamp"]).replace("Z", "+00:00")).timestamp()
                if stamp >= since - 2:
                    lines.append(f"{stamp - since:+7.2f} s {replica.proc.name}: {event}")
    return "\n".join(sorted(lines))


def leader_of(replicas: Sequence[Replica]) -> Replica | None:
    leading = [r for r in replicas if r.leading()]
    assert len(leading) <= 1, f"two replicas think they lead: {[r.proc.name for r in leading]}"
    return leading[0] if leading else None


async def new_leader(replicas: Sequence[Replica], after: float, timeout: float) -> tuple[Replica, float]:
    """The replica whose term began after `after`, and when it began."""

    def found() -> tuple[Replica, float] | None:
        for replica in replicas:
            for since, _ in replica.terms():
                if since > after:
                    return replica, since
        return None

    result: tuple[Replica, float] = await wait_for(found, timeout=timeout, interval=0.05)
    return result


def bound_count(replicas: Sequence[Replica]) -> int:
    return sum(len(r.binds()) for r in replicas)


# -------------------------------------------------------------------------------- Lease history


class LeaseHistory:
    """Polls the Lease: every (acquireTime, holder) it ever showed, in wall-clock seconds."""

    def __init__(self, api: ApiClient, name: str) -> None:
        self._api = api
        self._path = f"/apis/coordination.k8s.io/v1/namespaces/{LEASE_NAMESPACE}/leases/{name}"
        self.entries: set[tuple[float, str]] = set()
        self.transitions = 0

    async def poll(self) -> None:
        while True:
            with contextlib.suppress(Exception):
                status, body = await request(self._api, "GET", self._path, timeout=1.0)
                if status == 200:
                    self.record(body["spec"])
            await asyncio.sleep(0.1)

    def record(self, spec: dict[str, Any]) -> None:
        acquired = parse_micro_time(spec.get("acquireTime"))
        if acquired is not None:
            self.entries.add((acquired.timestamp(), spec.get("holderIdentity") or ""))
        self.transitions = max(self.transitions, int(spec.get("leaseTransitions") or 0))

    def holder_at(self, moment: float, extra: Sequence[tuple[float, str]] = ()) -> str:
        timeline = sorted(self.entries | set(extra))
        i = bisect.bisect_right(timeline, (moment, "\uffff")) - 1
        return timeline[i][1] if i >= 0 else ""


# ------------------------------------------------------------------------------------- checks


def logged_acquisitions(replicas: Sequence[Replica]) -> list[tuple[float, str]]:
    """Every term start as the replicas logged it (in case the poller missed a short term)."""
    entries = []
    for replica in replicas:
        for event in replica.named("leader_elected"):
            acquired = parse_micro_time(event["acquire_time"])
            assert acquired is not None
            entries.append((acquired.timestamp(), replica.identity))
    return entries


def check_binds_against_leadership(replicas: Sequence[Replica], history: LeaseHistory) -> None:
    """Every bind left while the Lease named its replica, inside one of that replica's own terms."""
    extra = logged_acquisitions(replicas)
    for replica in replicas:
        terms = replica.terms()
        for bind in replica.binds():
            holder = history.holder_at(bind.sent_at, extra)
            assert holder == replica.identity, (
                f"{replica.proc.name} bound {bind.pod} at {bind.sent_at:.3f} while the Lease named {holder!r}"
            )
            assert any(since <= bind.sent_at <= until for since, until in terms), (
                f"{replica.proc.name} bound {bind.pod} at {bind.sent_at:.3f} outside its terms {terms}"
            )
    terms = sorted((since, until, r.proc.name) for r in replicas for since, until in r.terms())
    for (_, until, first), (since, _, second) in itertools.pairwise(terms):
        assert until <= since, f"{first} still led at {since:.3f} when {second} began"


async def check_every_pod_bound_once(
    api: ApiClient, namespace: str, count: int, replicas: Sequence[Replica], lost_in_flight: int = 0
) -> dict[str, str]:
    """All pods bound, no node over its allocatable, each bind logged at most once and where it landed."""
    status, body = await request(api, "GET", f"/api/v1/namespaces/{namespace}/pods")
    assert status == 200, body
    placed = {p["metadata"]["name"]: p["spec"].get("nodeName") for p in body["items"]}
    assert len(placed) == count
    assert all(placed.values()), f"{sum(1 for n in placed.values() if not n)} pods left unbound"

    logged = Counter(b.pod for r in replicas for b in r.binds())
    assert max(logged.values()) == 1, [pod for pod, n in logged.items() if n > 1]
    for replica in replicas:
        for bind in replica.binds():
            name = bind.pod.split("/", 1)[1]
            assert placed[name] == bind.node, f"{bind.pod} logged on {bind.node}, bound to {placed[name]}"
    # A killed leader cannot log the binds it had in flight, and a bind cancelled when a term
    # ended may still have landed; nothing else may go unlogged.
    cancelled = sum(len(r.named("bind_cancelled")) for r in replicas)
    unlogged = count - len(logged)
    assert unlogged <= lost_in_flight + cancelled, f"{unlogged} pods bound with no replica logging it"

    status, nodes = await request(api, "GET", "/api/v1/nodes")
    assert status == 200, nodes
    by_node: dict[str, list[Any]] = {}
    for raw in body["items"]:
        by_node.setdefault(raw["spec"]["nodeName"], []).append(pod_from_dict(raw))
    for raw in nodes["items"]:
        node = node_from_dict(raw)
        pods = by_node.get(node.name, [])
        requested = sum_resources(p.requests for p in pods)
        assert requested.milli_cpu <= node.allocatable.milli_cpu, f"{node.name} overcommitted"
        assert requested.memory <= node.allocatable.memory, f"{node.name} overcommitted"
        assert len(pods) <= node.allocatable.allowed_pods, f"{node.name} has too many pods"
    return placed


async def check_endpoints(replicas: Sequence[Replica], leader: Replica, lease: str) -> None:
    for replica in replicas:
        assert await replica.get("/healthz") == (200, "ok")
        assert await replica.get("/readyz") == (200, "ok")
        status, text = await replica.get("/metrics")
        assert status == 200
        expected = 1.0 if replica is leader else 0.0
        assert f'leader_election_master_status{{name="{lease}"}} {expected}' in text, replica.proc.name


# -------------------------------------------------------------------------------------- setup


async def add_nodes(api: ApiClient, prefix: str, count: int) -> None:
    nodes = [make_node(f"{prefix}-n{i:03}", cpu=f"{NODE_CPU_MILLI}m", memory="8Gi") for i in range(count)]
    await create_nodes(api, nodes)


def pods_for(namespace: str, scheduler_name: str, count: int) -> list[dict[str, Any]]:
    return [make_pod(f"p{i:05}", namespace, scheduler_name, cpu=POD_CPU, memory="64Mi") for i in range(count)]


async def wait_all_bound(api: ApiClient, namespace: str, timeout: float) -> None:
    async def unbound() -> bool:
        status, body = await request(
            api,
            "GET",
            f"/api/v1/namespaces/{namespace}/pods",
            query=[("fieldSelector", "spec.nodeName="), ("limit", 1)],
        )
        return status == 200 and not body["items"]

    await wait_for(unbound, timeout=timeout, interval=0.5, message="every pod bound")


# -------------------------------------------------------------------------------------- tests


# ----------------------------------------------------------------------------- cache consistency


async def cache_differences(api: ApiClient, replica: Replica) -> list[str]:
    """How the replica's cache (/debug/cache) differs from a fresh listing: nodes, each bound pod's
    node, each node's requested cpu and memory, and assumptions left over."""
    status, text = await replica.get("/debug/cache")
    assert status == 200, text
    cached = json.loads(text)
    code, nodes = await request(api, "GET", "/api/v1/nodes")
    assert code == 200, nodes
    code, pods = await request(
        api, "GET", "/api/v1/pods", query=[("fieldSelector", f"{NON_TERMINAL_PODS},spec.nodeName!=")]
    )
    assert code == 200, pods
    problems = []
    listed_nodes = {n["metadata"]["name"] for n in nodes["items"]}
    if set(cached["nodes"]) != listed_nodes:
        problems.append(f"nodes: cache {sorted(set(cached['nodes']) ^ listed_nodes)} differ from the listing")
    by_node: dict[str, list[Any]] = {}
    for raw in pods["items"]:
        by_node.setdefault(raw["spec"]["nodeName"], []).append(pod_from_dict(raw))
    held = {name: set(entry["pods"]) for name, entry in cached["nodes"].items()}
    held.update({name: set(uids) for name, uids in cached["orphans"].items()})
    for name in by_node.keys() | held.keys():
        listed = by_node.get(name, [])
        if {p.uid for p in listed} != held.get(name, set()):
            problems.append(f"{name}: pods differ ({len(listed)} listed, {len(held.get(name, ()))} cached)")
        entry = cached["nodes"].get(name)
        requested = sum_resources(p.requests for p in listed)
        if entry and (entry["milli_cpu"], entry["memory"]) != (requested.milli_cpu, requested.memory):
            problems.append(
                f"{name}: cache requests {entry['milli_cpu']}m/{entry['memory']}, listing {requested}"
            )
    if cached["assumed"]:
        problems.append(f"{len(cached['assumed'])} pods still assumed")
    return problems


async def check_cache_consistent(api: ApiClient, replica: Replica, timeout: float = 30.0) -> None:
    """The replica's cache agrees with a fresh listing (eventually: the watch may be a moment behind)."""
    problems: list[str] = []

    async def consistent() -> bool:
        problems[:] = await cache_differences(api, replica)
        return not problems

    try:
        await wait_for(consistent, timeout=timeout, interval=0.5)
    except (AssertionError, TimeoutError) as exc:
        raise AssertionError(f"{replica.proc.name}'s cache differs from the API: {problems[:10]}") from exc


# -------------------------------------------------------------------------------------- figures


@dataclass(frozen=True, slots=True)
class FaultFigures:
    """One row of the fault report: printed by the tests (pytest -s) for the reliability note."""

    fault: str
    injections: int
    pods: int
    scheduled: int
    double_bound: int
    overcommitted: int
    recovery: float | None  # seconds from the end of the fault to the next bind

    @property
    def lost(self) -> int:
        return self.pods - self.scheduled

    def print(self) -> None:
        recovery = "-" if self.recovery is None else f"{self.recovery:.2f} s"
        print(
            f"\nFAULT | {self.fault} | injected {self.injections} | pods {self.pods}"
            f" | scheduled {self.scheduled} | lost {self.lost} | double-bound {self.double_bound}"
            f" | overcommitted {self.overcommitted} | recovery {recovery}"
        )


async def placement_figures(
    api: ApiClient, namespace: str, replicas: Sequence[Replica]
) -> tuple[int, int, int]:
    """(pods bound, pods whose bind was logged more than once, nodes over their allocatable)."""
    status, body = await request(api, "GET", f"/api/v1/namespaces/{namespace}/pods")
    assert status == 200, body
    bound = sum(1 for p in body["items"] if p["spec"].get("nodeName"))
    logged = Counter(b.pod for r in replicas for b in r.binds())
    status, nodes = await request(api, "GET", "/api/v1/nodes")
    assert status == 200, nodes
    by_node: dict[str, list[Any]] = {}
    for raw in body["items"]:
        if raw["spec"].get("nodeName"):
            by_node.setdefault(raw["spec"]["nodeName"], []).append(pod_from_dict(raw))
    over = 0
    for raw in nodes["items"]:
        node = node_from_dict(raw)
        requested = sum_resources(p.requests for p in by_node.get(node.name, []))
        over += requested.milli_cpu > node.allocatable.milli_cpu or requested.memory > node.allocatable.memory
    return bound, sum(1 for n in logged.values() if n > 1), over


def first_bind_after(replicas: Sequence[Replica], moment: float) -> float | None:
    """Seconds from `moment` to the first bind that completed after it (None: none did)."""
    later = [stamp for r in replicas for e in r.named("pod_bound") if (stamp := logged_at(e)) > moment]
    return min(later) - moment if later else None


def logged_at(event: dict[str, Any]) -> float:
    """A log line's timestamp as wall-clock seconds."""
    return datetime.fromisoformat(str(event["timestamp"]).replace("Z", "+00:00")).timestamp()
