"""Leader election decisions on a fake clock, the bind gate, and a term that ends mid-bind."""

from __future__ import annotations

import asyncio
import json
import math
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from structlog.testing import capture_logs

from kubesched.kube.binding import Binder, BindOutcome, BindResult
from kubesched.kube.client import TokenBucket
from kubesched.kube.election import (
    Action,
    ElectionConfig,
    ElectionState,
    LeaderElector,
    LeaseRecord,
    default_identity,
    default_namespace,
    format_micro_time,
    parse_micro_time,
)
from kubesched.kube.events import Recorder
from kubesched.model.objects import Pod, pod_from_dict
from kubesched.policy.compile import default_algorithm
from kubesched.runtime.queue import SchedulingQueue
from kubesched.runtime.scheduler import Scheduler, SchedulerSettings
from kubesched_dev.fixtures import make_node, make_pod, wait_for

ME = "kubesched-a_1111"
OTHER = "kubesched-b_2222"
WALL = datetime(2026, 3, 1, 12, 0, 0, 123456, tzinfo=UTC)


def config(**overrides: float) -> ElectionConfig:
    return ElectionConfig(namespace="kube-system", name="kubesched", identity=ME, **overrides)  # type: ignore[arg-type]


def held_by(holder: str, transitions: int = 0, duration: int = 15) -> LeaseRecord:
    return LeaseRecord(holder, duration, WALL, WALL, transitions)


def leader_at(sent_at: float, now: float | None = None) -> ElectionState:
    """A state that has just won the lease with a write sent at `sent_at`."""
    state = ElectionState(config())
    state.observe(None, "", sent_at)
    record = state.proposal(WALL)
    state.written(record, "1", sent_at, sent_at if now is None else now)
    return state


# ------------------------------------------------------------------------------------- settings


@pytest.mark.parametrize(
    ("lease", "renew", "retry", "problem"),
    [
        (15, 10, 2, None),
        (4, 3, 1, None),
        (10, 10, 2, "--leader-elect-renew-deadline (10s) must be less than --leader-elect-lease-duration"),
        (15, 20, 2, "must be less than --leader-elect-lease-duration (15s)"),
        (15, 10, 9, "must be greater than 1.2 x --leader-elect-retry-period (9s)"),
        (15, 10, 0, "--leader-elect-retry-period must be greater than zero, got 0s"),
        (0, 10, 2, "--leader-elect-lease-duration must be greater than zero"),
        (0.8, 0.5, 0.1, "at least 1s"),
    ],
)
def test_invalid_timings_are_rejected_with_the_flag_names(
    lease: float, renew: float, retry: float, problem: str | None
) -> None:
    problems = config(lease_duration=lease, renew_deadline=renew, retry_period=retry).problems()
    if problem is None:
        assert problems == []
    else:
        assert any(problem in p for p in problems), problems


def test_invalid_lease_names_are_rejected() -> None:
    bad = ElectionConfig(namespace="Kube_System", name="kube sched", identity="")
    problems = " | ".join(bad.problems())
    assert "--leader-elect-resource-namespace 'Kube_System'" in problems
    assert "--leader-elect-resource-name 'kube sched'" in problems
    assert "identity must not be empty" in problems


def test_identity_is_the_pod_name_with_a_random_suffix() -> None:
    first, second = (
        default_identity({"POD_NAME": "kubesched-7d9f"}),
        default_identity({"POD_NAME": "kubesched-7d9f"}),
    )
    assert first.startswith("kubesched-7d9f_") and second.startswith("kubesched-7d9f_")
    assert first != second  # a restarted process is a new candidate
    assert default_namespace({"POD_NAMESPACE": "kubesched"}) == "kubesched"
    assert default_namespace({}) == "kube-system"


# ---------------------------------------------------------------------------------------- record


def test_times_are_written_in_utc_with_microseconds() -> None:
    paris = timezone(timedelta(hours=1))
    assert format_micro_time(datetime(2026, 3, 1, 13, 0, 0, 5, tzinfo=paris)) == "2026-03-01T12:00:00.000005Z"
    assert parse_micro_time("2026-03-01T12:00:00.123456Z") == WALL
    assert parse_micro_time("2026-03-01T12:00:00Z") == WALL.replace(microsecond=0)


def test_record_round_trips_through_a_lease_spec() -> None:
    record = LeaseRecord(ME, 15, WALL, WALL + timedelta(seconds=2), 3)
    spec = record.spec()
    assert spec == {
        "holderIdentity": ME,
        "leaseDurationSeconds": 15,
        "leaseTransitions": 3,
        "acquireTime": "2026-03-01T12:00:00.123456Z",
        "renewTime": "2026-03-01T12:00:02.123456Z",
    }
    assert LeaseRecord.from_lease({"spec": spec}) == record


@pytest.mark.parametrize(
    "spec",
    [
        None,
        "garbage",
        {"holderIdentity": 7, "leaseDurationSeconds": "15", "leaseTransitions": -1, "renewTime": "yesterday"},
    ],
)
def test_a_lease_edited_into_nonsense_reads_as_empty_fields(spec: object) -> None:
    assert LeaseRecord.from_lease({"spec": spec}) == LeaseRecord()


# ------------------------------------------------------------------------------------- following


def test_no_lease_at_all_is_created_at_once() -> None:
    state = ElectionState(config())
    state.observe(None, "", 100.0)
    assert state.decide(100.0) is Action.CREATE
    record = state.proposal(WALL)
    assert (record.holder, record.transitions, record.lease_duration_seconds) == (ME, 0, 15)
    assert record.acquire_time == record.renew_time == WALL


def test_a_live_lease_is_taken_only_after_a_whole_lease_duration_without_change() -> None:
    state = ElectionState(config())
    state.observe(held_by(OTHER, transitions=4), "10", 100.0)
    assert state.decide(114.9) is Action.WAIT
    state.observe(held_by(OTHER, transitions=4), "10", 114.9)  # the same version again: no renewal
    assert state.decide(115.0) is Action.UPDATE
    record = state.proposal(WALL)
    assert (record.holder, record.transitions, record.acquire_time) == (ME, 5, WALL)


def test_every_renewal_seen_restarts_the_wait() -> None:
    state = ElectionState(config())
    state.observe(held_by(OTHER), "10", 100.0)
    state.observe(held_by(OTHER), "11", 110.0)
    assert state.decide(120.0) is Action.WAIT
    assert state.decide(125.0) is Action.UPDATE


def test_a_holder_asking_for_a_longer_lease_gets_it() -> None:
    state = ElectionState(config())
    state.observe(held_by(OTHER, duration=40), "10", 100.0)
    assert state.decide(139.0) is Action.WAIT
    assert state.decide(140.0) is Action.UPDATE


def test_a_released_lease_is_taken_at_once_and_counts_a_transition() -> None:
    state = ElectionState(config())
    state.observe(LeaseRecord("", 1, WALL, WALL, 6), "12", 100.0)
    assert state.decide(100.0) is Action.UPDATE
    assert state.proposal(WALL).transitions == 7


def test_a_follower_wakes_right_when_the_lease_lapses() -> None:
    state = ElectionState(config())
    state.observe(held_by(OTHER), "10", 100.0)
    assert state.next_attempt(started=113.5, now=113.5, jitter=0.0) == 115.0
    assert state.next_attempt(started=100.0, now=100.0, jitter=1.0) == pytest.approx(102.4)


def test_a_deleted_lease_is_left_to_its_holder_for_a_lease_duration() -> None:
    state = ElectionState(config())
    state.observe(held_by(OTHER, transitions=2), "10", 100.0)
    state.observe(None, "", 101.0)
    assert state.decide(115.9) is Action.WAIT
    assert state.decide(116.0) is Action.CREATE
    assert state.proposal(WALL).transitions == 3


# ---------------------------------------------------------------------------------------- leading


def test_the_leader_binds_until_the_renew_deadline_counted_from_when_its_write_left() -> None:
    state = leader_at(sent_at=100.0, now=103.0)  # the reply took 3 s: the deadline does not move
    assert state.may_bind(109.999)
    assert not state.may_bind(110.0)
    assert state.lapsed(110.0)
    assert state.budget(104.0) == pytest.approx(6.0)


def test_a_followers_round_is_cut_after_two_retry_periods_so_a_hung_read_delays_little() -> None:
    state = ElectionState(config())
    state.observe(held_by(OTHER), "10", 100.0)
    assert state.budget(101.0) == pytest.approx(2 * config().retry_period)


def test_a_renewal_keeps_acquire_time_and_transitions_and_moves_the_deadline() -> None:
    state = ElectionState(config())
    state.observe(held_by(OTHER, transitions=4), "10", 0.0)
    state.written(state.proposal(WALL), "11", 15.0, 15.1)
    later = WALL + timedelta(seconds=2)
    renewal = state.proposal(later)
    assert (renewal.acquire_time, renewal.renew_time, renewal.transitions) == (WALL, later, 5)
    assert not state.written(renewal, "12", 17.0, 17.2)  # not a new term
    assert state.may_bind(26.9) and not state.may_bind(27.0)


def test_the_leader_sees_the_lease_name_someone_else() -> None:
    state = leader_at(100.0)
    state.observe(held_by(OTHER), "99", 101.0)
    assert state.lease_lost()
    state.step_down()
    assert not state.may_bind(101.0)
    assert state.decide(101.0) is Action.WAIT  # and it waits like everyone else


def test_the_leader_recreates_a_deleted_lease_at_once() -> None:
    state = leader_at(100.0)
    state.observe(None, "", 101.0)
    assert state.decide(101.0) is Action.CREATE
    assert state.may_bind(101.0)


def test_a_lapsed_leader_takes_back_its_own_unchanged_lease_without_a_transition() -> None:
    state = leader_at(100.0)
    first = state.record
    assert first is not None
    state.step_down()
    state.observe(first, "1", 111.0)
    assert state.decide(111.0) is Action.UPDATE
    record = state.proposal(WALL + timedelta(seconds=11))
    assert record.transitions == first.transitions
    assert state.written(record, "2", 111.0, 111.1)  # a new term


def test_release_empties_the_holder_and_keeps_the_transitions() -> None:
    state = leader_at(100.0)
    assert state.record is not None
    released = state.release_record(WALL)
    assert released is not None
    assert (released.holder, released.lease_duration_seconds, released.transitions) == ("", 1, 0)
    state.observe(held_by(OTHER), "5", 101.0)
    assert state.release_record(WALL) is None  # not ours to release


@given(
    sent=st.floats(0, 1000),
    in_flight=st.floats(0, 30),
    seen_after=st.floats(0, 30),
    lease=st.floats(1, 60),
    renew_share=st.floats(0.05, 0.95),
)
def test_the_next_leader_starts_after_the_last_one_stopped_binding(
    sent: float, in_flight: float, seen_after: float, lease: float, renew_share: float
) -> None:
    """However slow the write and its reading, the terms are at least lease - renew apart."""
    renew = lease * renew_share
    cfg = ElectionConfig("kube-system", "kubesched", ME, lease, renew, renew / 2)
    old = ElectionState(cfg)
    old.observe(None, "", sent)
    record = old.proposal(WALL)
    old.written(record, "7", sent, sent + in_flight)
    follower = ElectionState(ElectionConfig("kube-system", "kubesched", OTHER, lease, renew, renew / 2))
    seen = sent + in_flight + seen_after  # the write landed, then the follower read it
    follower.observe(record, "7", seen)
    last_bind = old.deadline
    first_take = follower.expires_at()
    assert follower.decide(math.nextafter(first_take, -math.inf)) is Action.WAIT
    assert first_take - last_bind >= lease - renew - 1e-9


# --------------------------------------------------------------------------------- bind gate, term


async def test_the_binder_sends_nothing_once_the_gate_closes() -> None:
    binder = Binder(None, TokenBucket(0, 1), may_bind=lambda: False)  # type: ignore[arg-type]
    pod = pod_from_dict(make_pod("p", "ns"))
    assert await binder.bind(pod, "n1") == BindResult(BindOutcome.NOT_LEADER, "not the leader", None)


class HangingBinder(Binder):
    """Binds that never answer, as when the API server is frozen."""

    def __init__(self) -> None:
        super().__init__(None, TokenBucket(0, 1))  # type: ignore[arg-type]
        self.sent: list[tuple[str, str]] = []

    async def bind(self, pod: Pod, node_name: str, *_: object, **__: object) -> BindResult:
        self.sent.append((pod.name, node_name))
        await asyncio.Event().wait()
        raise AssertionError("unreachable")


async def test_a_term_cut_mid_bind_forgets_its_assumption_and_the_next_term_retries() -> None:
    binder = HangingBinder()
    recorder = Recorder(None, "kubesched", TokenBucket(0, 1))  # type: ignore[arg-type]
    scheduler = Scheduler(SchedulerSettings(seed=1), default_algorithm(), binder, recorder)
    scheduler.on_node(None, make_node("n1", cpu="1"))
    pod = make_pod("p", "ns", cpu="600m")
    pod["metadata"]["creationTimestamp"] = "2026-01-01T00:00:00Z"
    scheduler.on_pod(None, pod)
    uid = pod["metadata"]["uid"]

    async def resync() -> None:
        return None

    term = asyncio.create_task(scheduler.lead(resync))
    await wait_for(lambda: binder.sent, timeout=5)
    assert scheduler.cache.is_assumed(uid)
    term.cancel()
    with pytest.raises(asyncio.CancelledError):
        await term
    assert not scheduler.cache.is_assumed(uid)
    info = scheduler.cache.node_info("n1")
    assert info is not None and not info.pods  # the 600m are free again
    assert uid in scheduler.queue

    second = asyncio.create_task(scheduler.lead(resync))
    await wait_for(lambda: len(binder.sent) == 2, timeout=5)
    assert binder.sent == [("p", "n1"), ("p", "n1")]
    second.cancel()
    with pytest.raises(asyncio.CancelledError):
        await second
    await recorder.close(grace=0)


async def test_shutdown_takes_no_more_pods_and_leaves_them_to_the_next_leader() -> None:
    queue = SchedulingQueue()
    queue.add(pod_from_dict(make_pod("left-for-the-next-leader", "ns")))
    queue.close()
    assert await queue.pop_batch(10) == []


# ------------------------------------------------------------------------- the elector, on a fake API


class FakeResponse:
    def __init__(self, status: int, body: Any = None, lines: AsyncIterator[bytes] | None = None) -> None:
        self.status = status
        self._body = body
        self.content = lines

    async def text(self) -> str:
        return "" if self._body is None else json.dumps(self._body)

    def release(self) -> None:
        pass


class FakeLeases:
    """One Lease served as the API server would: optimistic concurrency, and a watch of its changes.

    The first `failing_watches` watches are answered 503."""

    configuration = None

    def __init__(self, failing_watches: int = 0) -> None:
        self.lease: dict[str, Any] | None = None
        self.version = 0
        self.failing_watches = failing_watches
        self.watches: list[asyncio.Queue[bytes]] = []

    async def call_api(self, path: str, method: str, **kwargs: Any) -> FakeResponse:
        if ("watch", "true") in (kwargs.get("query_params") or []):
            if self.failing_watches:
                self.failing_watches -= 1
                return FakeResponse(503, {"message": "the API server is starting"})
            queue: asyncio.Queue[bytes] = asyncio.Queue()
            self.watches.append(queue)
            if self.lease is not None:
                queue.put_nowait(json.dumps({"type": "ADDED", "object": self.lease}).encode())
            return FakeResponse(200, lines=self._stream(queue))
        if method == "GET":
            return FakeResponse(404, {}) if self.lease is None else FakeResponse(200, self.lease)
        body = dict(kwargs["body"])
        current = self.lease["metadata"]["resourceVersion"] if self.lease else None
        if (method == "POST") != (self.lease is None) or body["metadata"].get(
            "resourceVersion", current
        ) != current:
            return FakeResponse(409, {"message": "conflict"})
        self.write(body["spec"])
        return FakeResponse(200, self.lease)

    def write(self, spec: dict[str, Any]) -> None:
        """A write of the Lease (ours, or someone else's behind the electors' backs)."""
        self.version += 1
        metadata = {"name": "kubesched", "namespace": "kube-system", "resourceVersion": str(self.version)}
        self.lease = {"metadata": metadata, "spec": spec}
        for queue in self.watches:
            queue.put_nowait(json.dumps({"type": "MODIFIED", "object": self.lease}).encode())

    async def _stream(self, queue: asyncio.Queue[bytes]) -> AsyncIterator[bytes]:
        while True:
            yield await queue.get()


async def idle() -> None:
    await asyncio.Event().wait()


def slow_config(identity: str) -> ElectionConfig:
    """Rounds so far apart that only the watch can explain a takeover within the test."""
    return ElectionConfig("kube-system", "kubesched", identity, 600.0, 400.0, 300.0)


async def test_a_release_is_logged_as_a_choice_and_any_other_end_of_term_as_a_warning() -> None:
    leases = FakeLeases()
    with capture_logs() as logs:
        for ending in ("release", "cancel"):
            elector = LeaderElector(leases, config())  # type: ignore[arg-type]
            running = asyncio.create_task(elector.run(idle))
            await wait_for(elector.is_leader, timeout=5)
            if ending == "release":
                await elector.release()
            else:
                running.cancel()
            await asyncio.gather(running, return_exceptions=True)
    lost = [(e["log_level"], e["reason"]) for e in logs if e["event"] == "leader_lost"]
    assert lost == [("info", "released"), ("warning", "election stopped")]


async def test_a_follower_takes_a_released_lease_when_the_watch_shows_it_not_at_its_next_poll() -> None:
    # The first watches are refused: each elector watches again, with backoff, and says so once.
    leases = FakeLeases(failing_watches=4)
    leader = LeaderElector(leases, slow_config(ME))  # type: ignore[arg-type]
    follower = LeaderElector(leases, slow_config(OTHER))  # type: ignore[arg-type]
    with capture_logs() as logs:
        tasks = [asyncio.create_task(leader.run(idle))]
        await wait_for(leader.is_leader, timeout=5)
        tasks.append(asyncio.create_task(follower.run(idle)))
        await wait_for(lambda: follower.leader == ME and len(leases.watches) == 2, timeout=10)
        await leader.release()
        await wait_for(follower.is_leader, timeout=5)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
    assert leases.lease is not None
    assert (leases.lease["spec"]["holderIdentity"], leases.lease["spec"]["leaseTransitions"]) == (OTHER, 1)
    failed = [e for e in logs if e["event"] == "lease_watch_failed"]
    assert failed and all("503" in e["error"] for e in failed), failed
    assert len(failed) == len({e["identity"] for e in failed}), failed  # one line per elector's streak
