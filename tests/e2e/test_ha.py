"""High availability with real `kubesched run` processes sharing one scheduler name and one Lease.

What is checked is what a user could check: the pods in the API (each bound once, no node
overcommitted), the Lease as it changed over time (polled), and each replica's JSON log, where it
records its terms (`leader_elected` since, `leader_lost` until) and every bind with the wall-clock
moment the request left (`pod_bound` sent_at). A bind is legitimate only if the Lease named its
replica at that moment.
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
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import aiohttp
import pytest
import pytest_asyncio
from kubernetes_asyncio.client import ApiClient

from kubesched.devcluster import LocalControlPlane
from kubesched.election import JITTER, parse_micro_time
from kubesched.kube import request
from kubesched.model.objects import node_from_dict, pod_from_dict
from kubesched.model.resources import sum_resources
from kubesched.testing import create_nodes, create_pods, make_node, make_pod, wait_for

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


@pytest.fixture
def start_replicas(
    control_plane: LocalControlPlane, tmp_path: Path
) -> Iterator[Callable[..., list[Replica]]]:
    started: list[Replica] = []

    def start(count: int, scheduler_name: str, args: Sequence[str]) -> list[Replica]:
        group = []
        for i in range(count):
            port = free_port()
            proc = KubeschedProcess(
                control_plane.kubeconfig,
                scheduler_name,
                tmp_path,
                ["--policy-config-file", str(SEED_POLICY), *args, "--metrics-port", str(port)],
                name=f"{scheduler_name}-r{i}",
            )
            group.append(Replica(proc.start(), port))
        started.extend(group)
        return group

    yield start
    for replica in started:  # all at once, then wait for each
        if replica.proc.alive and replica.proc.proc is not None:
            replica.proc.proc.send_signal(signal.SIGTERM)
    for replica in started:
        replica.proc.stop()


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


@pytest_asyncio.fixture
async def lease_history(api: ApiClient, scheduler_name: str) -> AsyncIterator[LeaseHistory]:
    history = LeaseHistory(api, scheduler_name)
    task = asyncio.create_task(history.poll())
    yield history
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)
    await request(
        api, "DELETE", f"/apis/coordination.k8s.io/v1/namespaces/{LEASE_NAMESPACE}/leases/{scheduler_name}"
    )


@pytest.fixture
def scheduler_name(namespace: str) -> str:
    """The scheduler name of this test, which is also its Lease's name."""
    return f"ks-{namespace}"


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


async def failover_run(
    api: ApiClient,
    namespace: str,
    scheduler_name: str,
    start_replicas: Callable[..., list[Replica]],
    history: LeaseHistory,
    timings: tuple[float, float, float],
) -> None:
    lease, _, retry = timings
    pod_count, node_count = 2000, 100
    await add_nodes(api, namespace, node_count)
    replicas = start_replicas(3, scheduler_name, election_args(timings))
    first = await wait_for(lambda: leader_of(replicas), timeout=60, message="a leader")
    await wait_for(lambda: all(r.named("cache_synced") for r in replicas), timeout=60)
    await check_endpoints(replicas, first, scheduler_name)

    creating = asyncio.create_task(create_pods(api, pods_for(namespace, scheduler_name, pod_count)))
    await wait_for(lambda: len(first.binds()) >= 500, timeout=120, message="500 pods bound")
    assert [r for r in replicas if r.binds()] == [first], "only the leader binds"

    killed_at = first.signal(signal.SIGKILL)
    before_kill = len(first.binds())
    survivors = [r for r in replicas if r is not first]
    # A lease duration after the survivors last saw a renewal, and within a retry period of that;
    # one of their reads may hang for its whole round budget (two retry periods) before it is cut.
    bound = lease + retry * (1 + JITTER) + 2 * retry + SLACK
    second, since = await new_leader(survivors, killed_at, timeout=bound + 5)
    failover = since - killed_at
    print(
        f"\nSIGKILL failover: {failover:.2f} s (lease {lease} s, retry {retry} s); {before_kill} bound before"
    )
    assert failover <= bound, election_story(survivors, killed_at)

    await wait_for(lambda: bound_count(replicas) >= 1400, timeout=180, message="1,400 pods bound")
    termed_at = second.signal(signal.SIGTERM)
    _, since = await new_leader([r for r in survivors if r is not second], termed_at, timeout=30)
    released = second.named("lease_released")
    assert released, "the leader released its lease on SIGTERM"
    released_at = datetime.fromisoformat(released[0]["timestamp"].replace("Z", "+00:00")).timestamp()
    handover = since - released_at
    print(
        f"SIGTERM hand-over: {handover:.2f} s after the release, {since - termed_at:.2f} s after the signal "
        f"(retry {retry} s)"
    )
    assert handover <= retry * (1 + JITTER) + 2 * retry + SLACK, election_story(survivors, termed_at)
    assert second.proc.proc is not None and second.proc.proc.wait(30) == 0

    await creating
    await wait_all_bound(api, namespace, timeout=240)
    await asyncio.sleep(0.5)  # the last pod_bound lines reach the logs
    lost = 64  # --bind-concurrency: the binds a killed leader may have had in flight
    await check_every_pod_bound_once(api, namespace, pod_count, replicas, lost)
    check_binds_against_leadership(replicas, history)
    # leaseTransitions counts the changes of holder (a replica taking back its own Lease is none).
    holders = [identity for _, identity in sorted((s, r.identity) for r in replicas for s, _ in r.terms())]
    assert history.transitions == sum(1 for a, b in itertools.pairwise(holders) if a != b) >= 2
    by_leader = sorted(replicas, key=lambda r: min((since for since, _ in r.terms()), default=float("inf")))
    print(f"binds by the first, second and third leader: {[len(r.binds()) for r in by_leader]}")


@pytest.mark.timeout(420)
async def test_three_replicas_one_binds_and_fails_over_on_sigkill_and_sigterm(
    api: ApiClient,
    namespace: str,
    scheduler_name: str,
    start_replicas: Callable[..., list[Replica]],
    lease_history: LeaseHistory,
) -> None:
    await failover_run(api, namespace, scheduler_name, start_replicas, lease_history, FAST)


@pytest.mark.slow
@pytest.mark.timeout(600)
async def test_failover_with_kube_scheduler_default_timings(
    api: ApiClient,
    namespace: str,
    scheduler_name: str,
    start_replicas: Callable[..., list[Replica]],
    lease_history: LeaseHistory,
) -> None:
    await failover_run(api, namespace, scheduler_name, start_replicas, lease_history, DEFAULT)


@pytest.mark.timeout(300)
async def test_a_frozen_api_server_stops_the_leader_before_anyone_else_binds(
    api: ApiClient,
    namespace: str,
    scheduler_name: str,
    control_plane: LocalControlPlane,
    start_replicas: Callable[..., list[Replica]],
    lease_history: LeaseHistory,
) -> None:
    lease, renew, retry = FAST
    pod_count = 500
    await add_nodes(api, namespace, 25)
    replicas = start_replicas(2, scheduler_name, election_args(FAST))
    first = await wait_for(lambda: leader_of(replicas), timeout=60, message="a leader")
    await wait_for(lambda: all(r.named("cache_synced") for r in replicas), timeout=60)
    creating = asyncio.create_task(create_pods(api, pods_for(namespace, scheduler_name, pod_count)))
    await wait_for(lambda: len(first.binds()) >= 100, timeout=120, message="100 pods bound")

    apiserver = control_plane.apiserver
    assert apiserver is not None
    paused_at = time.time()
    apiserver.send(signal.SIGSTOP)
    try:
        await asyncio.sleep(lease + 2 * retry)  # past the renew deadline, and past the lease too
    finally:
        apiserver.send(signal.SIGCONT)
    resumed_at = time.time()

    await creating
    await wait_all_bound(api, namespace, timeout=180)
    await asyncio.sleep(0.5)
    lost = [e for e in first.named("leader_lost") if float(e["until"]) > paused_at]
    assert lost and lost[0]["reason"] == "renew deadline passed without a renewal", lost
    stopped = float(lost[0]["until"])
    print(
        f"\nAPI server frozen {resumed_at - paused_at:.1f} s: the leader stopped binding "
        f"{stopped - paused_at:.2f} s into it (renew deadline {renew} s)"
    )
    assert stopped <= paused_at + renew + 0.05
    late = [b for r in replicas for b in r.binds() if stopped < b.sent_at < resumed_at]
    assert late == [], "nothing is sent while no replica may bind"
    await check_every_pod_bound_once(api, namespace, pod_count, replicas)
    check_binds_against_leadership(replicas, history=lease_history)
    after = [(r.proc.name, since) for r in replicas for since, _ in r.terms() if since > paused_at]
    print(
        f"leader before the freeze: {first.proc.name}; after it: "
        f"{[(n, round(s - resumed_at, 2)) for n, s in after]} (s after resuming)"
    )
