"""Binds pause while the API server is unreachable, and a bind never leaves for a node the cache
knows is gone.

A request that gets no reply at all closes the bind gate: the binds already in flight fail (at most
`bind_concurrency` of them), the others wait with their pods still assumed, nothing is posted as
FailedScheduling, and a probe with exponential backoff reopens the gate when the server answers.
"""

from __future__ import annotations

import asyncio
import random
import ssl
from collections import Counter
from collections.abc import Callable
from typing import Any, cast

import aiohttp
import pytest
from structlog.testing import capture_logs

from kubesched.kube import binding
from kubesched.kube.binding import Binder, BindOutcome, BindResult
from kubesched.kube.client import TokenBucket
from kubesched.kube.events import Recorder
from kubesched.model.objects import Pod, pod_from_dict
from kubesched.policy.compile import default_algorithm
from kubesched.runtime.bind_gate import BindGate, ProbeBackoff
from kubesched.runtime.queue import QueueSettings, SchedulingQueue
from kubesched.runtime.scheduler import Scheduler, SchedulerSettings
from kubesched_dev.fixtures import make_node, make_pod, wait_for

NAME = "ks"
QUICK = ProbeBackoff(initial=0.01, maximum=0.04, jitter=0.1)


class Server:
    """The API server as the binds see it: up, or down (every request in flight then gets no reply)."""

    def __init__(self) -> None:
        self.up = True
        self.bound: Counter[str] = Counter()  # pod name -> binds that landed
        self.unanswered = 0  # requests that got no reply
        self.probes = 0
        self.answer_after = 0  # down, it answers again from the probe after this many in all
        self.landing: set[str] = set()  # pods whose next request lands, reply lost
        self.sent_while_down = 0
        self.sent_while_closed = 0  # requests sent while the scheduler's gate was closed
        self.down_after: tuple[int, int] | None = None  # (binds landed, probes unanswered): an outage

    def go_down(self, probes_unanswered: int) -> None:
        self.up = False
        self.answer_after = self.probes + probes_unanswered

    def land(self, name: str) -> None:
        self.bound[name] += 1
        if self.down_after is not None and sum(self.bound.values()) == self.down_after[0]:
            self.go_down(self.down_after[1])


class OutageBinder:
    """Binder.bind's contract: `still_valid` asked once the rate limiter (a few loop turns) lets it go."""

    def __init__(self, server: Server) -> None:
        self.server = server
        self.gate: BindGate | None = None
        self._rng = random.Random(7)

    async def turns(self) -> None:
        """A wait of a few loop turns, some longer than others: the binds do not move in step."""
        for _ in range(self._rng.randint(1, 6)):
            await asyncio.sleep(0)

    async def bind(
        self, pod: Pod, node_name: str, extender: Any = None, *, still_valid: Callable[[], bool]
    ) -> BindResult:
        await self.turns()  # the rate limiter's wait
        if not still_valid():
            return BindResult(BindOutcome.WITHDRAWN, "no longer valid", None)
        if not self.server.up:
            self.server.sent_while_down += 1
        if self.gate is not None and not self.gate.is_open:
            self.server.sent_while_closed += 1
        await self.turns()  # in flight
        if pod.name in self.server.landing:
            self.server.landing.discard(pod.name)
            self.server.land(pod.name)
            self.server.unanswered += 1
            return BindResult(BindOutcome.UNREACHABLE, "ServerDisconnectedError()", 1.0)
        if not self.server.up:
            self.server.unanswered += 1
            return BindResult(BindOutcome.UNREACHABLE, "ClientConnectorError()", 1.0)
        if self.server.bound[pod.name]:
            return BindResult(BindOutcome.CONFLICT, "already assigned", 1.0)
        self.server.land(pod.name)
        return BindResult(BindOutcome.BOUND, "", 1.0)

    async def answers(self) -> bool:
        self.server.probes += 1
        if not self.server.up and self.server.probes > self.server.answer_after:
            self.server.up = True
        return self.server.up


class Recording:
    def __init__(self) -> None:
        self.failed: list[str] = []
        self.scheduled: list[str] = []

    def unschedulable(self, pod: Pod, message: str) -> None:
        self.failed.append(pod.name)

    def event(self, pod: Pod, type_: str, reason: str, message: str) -> None:
        if reason == "Scheduled":
            self.scheduled.append(pod.name)


def new_scheduler(binder: OutageBinder, recorder: Recording, concurrency: int) -> Scheduler:
    binder.gate = BindGate(binder.answers, QUICK, rng=random.Random(1))
    return Scheduler(
        SchedulerSettings(NAME, batch_size=8, bind_concurrency=concurrency, seed=1),
        default_algorithm(),
        cast(Binder, binder),
        cast(Recorder, recorder),
        queue=SchedulingQueue(QueueSettings(0.01, 0.02, 60.0)),
        gate=binder.gate,
    )


def add_pods(scheduler: Scheduler, count: int, node: str = "n1") -> None:
    scheduler.on_node("ADDED", make_node(node, cpu="64", pods=str(count + 10)))
    for index in range(count):
        scheduler.on_pod("ADDED", make_pod(f"p{index:03}", scheduler_name=NAME, cpu="10m"))


def events(logs: list[dict[str, Any]], name: str) -> list[dict[str, Any]]:
    return [e for e in logs if e["event"] == name]


async def test_an_outage_fails_at_most_the_binds_in_flight_and_every_pod_is_bound_once() -> None:
    concurrency, pods = 8, 120
    server = Server()
    binder, recorder = OutageBinder(server), Recording()
    with capture_logs() as logs:
        scheduler = new_scheduler(binder, recorder, concurrency)
        add_pods(scheduler, pods)
        server.down_after = (20, 6)
        loop = asyncio.create_task(scheduler.run())
        await wait_for(lambda: sum(server.bound.values()) == pods, timeout=10, interval=0.01)
        scheduler.queue.close()
        await asyncio.wait_for(loop, 5)
        await scheduler.drain()
    assert 1 <= server.unanswered <= concurrency  # those on their way when it went
    assert server.sent_while_closed == 0
    assert server.sent_while_down <= server.unanswered
    assert max(server.bound.values()) == 1 and len(server.bound) == pods
    assert recorder.failed == []  # no FailedScheduling for a server that was away
    assert sorted(recorder.scheduled) == sorted(server.bound)
    assert len(events(logs, "bind_unreachable")) == server.unanswered
    assert events(logs, "bind_failed") == []
    (paused,) = events(logs, "api_unreachable")
    (resumed,) = events(logs, "api_reachable")
    assert resumed["probes"] == 7  # six unanswered, the seventh answered
    assert server.unanswered <= resumed["held"] <= concurrency
    assert paused["error"] == "ClientConnectorError()"


async def test_a_bind_waiting_for_the_rate_limiter_when_the_server_goes_is_held_not_sent() -> None:
    server = Server()
    limiter, reply = asyncio.Event(), asyncio.Event()
    sent: list[str] = []

    class Staggered(OutageBinder):
        calls = 0

        async def bind(
            self, pod: Pod, node_name: str, extender: Any = None, *, still_valid: Callable[[], bool]
        ) -> BindResult:
            self.calls += 1
            call = self.calls
            if call == 2:
                await limiter.wait()  # the second bind waits for a token...
            if not still_valid():
                return BindResult(BindOutcome.WITHDRAWN, "no longer valid", None)
            sent.append(pod.name)
            if call == 1:
                await reply.wait()  # ...while the first one's request is on its way
            if not server.up:
                server.unanswered += 1
                return BindResult(BindOutcome.UNREACHABLE, "ServerDisconnectedError()", 1.0)
            server.land(pod.name)
            return BindResult(BindOutcome.BOUND, "", 1.0)

    binder, recorder = Staggered(server), Recording()
    scheduler = new_scheduler(binder, recorder, concurrency=2)
    add_pods(scheduler, 2)
    loop = asyncio.create_task(scheduler.run())
    await wait_for(lambda: binder.calls == 2, timeout=5, interval=0.01)
    server.go_down(probes_unanswered=10_000)
    reply.set()
    gate = binder.gate
    assert gate is not None
    await wait_for(lambda: not gate.is_open, timeout=5, interval=0.01)
    limiter.set()
    await wait_for(lambda: gate.waiting == 2, timeout=5, interval=0.01)
    assert len(sent) == 1  # the second one has its token, and is held all the same
    server.answer_after = server.probes
    await wait_for(lambda: len(server.bound) == 2, timeout=5, interval=0.01)
    scheduler.queue.close()
    await asyncio.wait_for(loop, 5)
    assert sent[0] == sent[1] and len(sent) == 3  # the first sent again, the second sent once
    assert server.unanswered == 1 and recorder.failed == []


async def test_a_bind_whose_reply_was_lost_is_not_sent_again_once_the_watch_shows_it_bound() -> None:
    server = Server()
    binder, recorder = OutageBinder(server), Recording()
    with capture_logs() as logs:
        scheduler = new_scheduler(binder, recorder, concurrency=2)
        raw = make_pod("lands", scheduler_name=NAME, cpu="10m")
        scheduler.on_node("ADDED", make_node("n1", cpu="4"))
        server.landing.add("lands")
        server.go_down(probes_unanswered=10_000)  # until the test says
        scheduler.on_pod("ADDED", raw)
        loop = asyncio.create_task(scheduler.run())
        await wait_for(lambda: server.unanswered == 1, timeout=5, interval=0.01)
        scheduler.on_pod("MODIFIED", {**raw, "spec": {**raw["spec"], "nodeName": "n1"}})  # the watch
        server.answer_after = server.probes
        await wait_for(lambda: recorder.scheduled, timeout=5, interval=0.01)
        scheduler.queue.close()
        await asyncio.wait_for(loop, 5)
    assert server.bound == {"lands": 1}
    (bound,) = events(logs, "pod_bound")
    assert bound["node"] == "n1" and bound["reply_lost"] is True
    assert recorder.scheduled == ["lands"] and recorder.failed == []
    assert not scheduler.cache.is_assumed(raw["metadata"]["uid"])


@pytest.mark.parametrize("stop", ["drain", "stand_down"])
async def test_stopping_while_paused_forgets_the_held_binds_and_hangs_on_nothing(stop: str) -> None:
    server = Server()
    binder, recorder = OutageBinder(server), Recording()
    scheduler = new_scheduler(binder, recorder, concurrency=4)
    server.go_down(probes_unanswered=10_000)
    add_pods(scheduler, 10)
    loop = asyncio.create_task(scheduler.run())
    await wait_for(lambda: len(scheduler.cache.describe()["assumed"]) == 10, timeout=5, interval=0.01)
    await wait_for(lambda: server.unanswered >= 1, timeout=5, interval=0.01)
    sent = server.sent_while_down
    if stop == "drain":
        await asyncio.wait_for(scheduler.drain(grace=30), 2)  # not the grace: the gate lets them go
    else:
        loop.cancel()
        await asyncio.wait_for(scheduler.stand_down(), 2)
    await asyncio.gather(loop, return_exceptions=True)
    assert server.sent_while_down == sent
    assert scheduler.cache.describe()["assumed"] == []
    assert all(f"p{i:03}" not in server.bound for i in range(10))
    assert len(scheduler.queue) == 10  # back in the queue for the next term
    assert recorder.failed == []
    probes = server.probes
    await asyncio.sleep(5 * QUICK.maximum)
    assert server.probes == probes  # the probe stopped with them


async def test_a_node_deleted_while_a_bind_waits_for_the_rate_limiter_gets_no_bind() -> None:
    server = Server()
    limiter = asyncio.Event()
    waiting: list[str] = []
    sent: list[tuple[str, str]] = []

    class Throttled(OutageBinder):
        async def bind(
            self, pod: Pod, node_name: str, extender: Any = None, *, still_valid: Callable[[], bool]
        ) -> BindResult:
            waiting.append(node_name)
            await limiter.wait()
            if not still_valid():
                return BindResult(BindOutcome.WITHDRAWN, "no longer valid", None)
            sent.append((pod.name, node_name))
            return BindResult(BindOutcome.BOUND, "", 1.0)

    recorder = Recording()
    with capture_logs() as logs:
        scheduler = new_scheduler(Throttled(server), recorder, concurrency=1)
        scheduler.on_node("ADDED", make_node("doomed", cpu="4"))
        scheduler.on_pod("ADDED", make_pod("p", scheduler_name=NAME, cpu="10m"))
        loop = asyncio.create_task(scheduler.run())
        await wait_for(lambda: waiting, timeout=5, interval=0.01)
        scheduler.on_node("DELETED", make_node("doomed", cpu="4"))  # it has its slot, not yet its token
        scheduler.on_node("ADDED", make_node("other", cpu="4"))
        limiter.set()
        await wait_for(lambda: sent, timeout=5, interval=0.01)
        scheduler.queue.close()
        await asyncio.wait_for(loop, 5)
    assert sent == [("p", "other")]
    (gone,) = events(logs, "bind_node_gone")
    assert gone["node"] == "doomed"


# --------------------------------------------------------------------------------- the gate alone


async def test_the_probe_backs_off_doubling_to_its_maximum_with_a_little_jitter() -> None:
    slept: list[float] = []
    answers = iter([False] * 8 + [True])

    async def probe() -> bool:
        return next(answers)

    async def sleep(seconds: float) -> None:
        slept.append(seconds)
        await asyncio.sleep(0)

    gate = BindGate(probe, ProbeBackoff(initial=0.25, maximum=5.0, jitter=0.1), sleep=sleep)
    gate.close("ClientConnectorError()")
    assert not gate.is_open
    await asyncio.wait_for(gate.wait_open(), 5)
    assert gate.probes == 9 and gate.pauses == 1
    bases = [0.25, 0.5, 1.0, 2.0, 4.0, 5.0, 5.0, 5.0, 5.0]
    assert all(base <= s <= base * 1.1 for base, s in zip(bases, slept, strict=True)), slept
    assert len(set(slept[-4:])) == 4  # jittered: replicas that lost the server together do not probe in step


async def test_a_probe_that_raises_opens_the_gate_rather_than_keeping_it_shut() -> None:
    async def probe() -> bool:
        raise RuntimeError("bug")

    gate = BindGate(probe, QUICK)
    gate.close("TimeoutError()")
    await asyncio.wait_for(gate.wait_open(), 5)
    assert gate.is_open


# ------------------------------------------------------------------------------ what is unreachable


@pytest.mark.parametrize(
    ("reply", "outcome"),
    [
        (ConnectionRefusedError(111, "Connection refused"), BindOutcome.UNREACHABLE),
        (ConnectionResetError(104, "Connection reset by peer"), BindOutcome.UNREACHABLE),
        (aiohttp.ServerDisconnectedError(), BindOutcome.UNREACHABLE),
        (aiohttp.ClientPayloadError("Response payload is not completed"), BindOutcome.UNREACHABLE),
        (ssl.SSLError(1, "record layer failure"), BindOutcome.UNREACHABLE),
        (TimeoutError(), BindOutcome.UNREACHABLE),
        (aiohttp.ServerTimeoutError(), BindOutcome.UNREACHABLE),
        (aiohttp.InvalidURL("nowhere"), BindOutcome.FAILED),
        ((503, "the server is currently unable to handle the request"), BindOutcome.FAILED),
        ((500, "etcdserver: request timed out"), BindOutcome.FAILED),
        ((504, "Timeout: request did not complete within requested timeout"), BindOutcome.FAILED),
        ((409, "pod p is already assigned to node n1"), BindOutcome.CONFLICT),
        ((201, {}), BindOutcome.BOUND),
    ],
)
async def test_only_a_request_with_no_reply_is_unreachable(
    monkeypatch: pytest.MonkeyPatch, reply: BaseException | tuple[int, Any], outcome: BindOutcome
) -> None:
    async def request(*_: object, **__: object) -> tuple[int, Any]:
        if isinstance(reply, BaseException):
            raise reply
        return reply

    monkeypatch.setattr(binding, "request", request)
    binder = Binder(None, TokenBucket(0, 1))  # type: ignore[arg-type]
    result = await binder.bind(pod_from_dict(make_pod("p", "ns")), "n1")
    assert result.outcome is outcome
    assert result.sent_at is not None


@pytest.mark.parametrize(
    ("reply", "answers"),
    [
        ((200, "ok"), True),
        ((403, "forbidden"), True),  # up; the binds' own replies decide
        ((500, "[-]etcd failed: reason withheld"), False),  # up, not ready
        (ConnectionRefusedError(111, "Connection refused"), False),
        (TimeoutError(), False),
    ],
)
async def test_the_probe_counts_a_ready_server_as_back(
    monkeypatch: pytest.MonkeyPatch, reply: BaseException | tuple[int, Any], answers: bool
) -> None:
    async def request(*_: object, **__: object) -> tuple[int, Any]:
        if isinstance(reply, BaseException):
            raise reply
        return reply

    monkeypatch.setattr(binding, "request", request)
    assert await Binder(None, TokenBucket(0, 1)).answers() is answers  # type: ignore[arg-type]


async def test_a_withdrawn_bind_sends_nothing() -> None:
    binder = Binder(None, TokenBucket(0, 1))  # type: ignore[arg-type]  # a request would fail on None
    result = await binder.bind(pod_from_dict(make_pod("p", "ns")), "n1", still_valid=lambda: False)
    assert result == BindResult(BindOutcome.WITHDRAWN, "no longer valid", None)
