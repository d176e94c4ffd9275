"""PolicyController without an API server: profiles swapped on every replica, status written by the leader."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any, cast

import pytest
from kubernetes_asyncio.client import ApiClient

from kubesched.algorithm.generic import Algorithm
from kubesched.kube.binding import Binder
from kubesched.kube.events import Recorder
from kubesched.policy import controller as policy_controller
from kubesched.policy import store as policy_store
from kubesched.policy.compile import compile_policy, default_algorithm
from kubesched.policy.controller import PolicyController, PolicyStatusWriter
from kubesched.policy.store import PolicyStore
from kubesched.runtime.scheduler import Scheduler, SchedulerSettings

OWN = "own"
MOST = {"priorities": [{"name": "MostRequestedPriority", "weight": 1}]}


class FakeWriter(PolicyStatusWriter):
    """Records the patches; the stored status is the patch applied to nothing (enough here)."""

    def __init__(self) -> None:
        super().__init__(cast(ApiClient, None), self.leading)
        self.leader = True
        self.fail = False
        self.written: list[tuple[str, Mapping[str, Any]]] = []

    def leading(self) -> bool:
        return self.leader

    async def write(self, name: str, patch: Mapping[str, Any]) -> Mapping[str, Any] | None:
        if not self.is_leader():
            return None
        if self.fail:
            raise RuntimeError("503 the API server is away")
        self.written.append((name, patch))
        return patch


def policy(name: str, spec: Mapping[str, Any], generation: int = 1) -> dict[str, Any]:
    meta = {
        "name": name,
        "uid": f"uid-{name}",
        "generation": generation,
        "creationTimestamp": "2024-01-01T00:00:00Z",
    }
    return {"metadata": meta, "spec": dict(spec)}


def new_controller() -> tuple[PolicyController, Scheduler, FakeWriter]:
    scheduler = Scheduler(
        SchedulerSettings(OWN), default_algorithm(), cast(Binder, None), cast(Recorder, None)
    )
    writer = FakeWriter()
    return (
        PolicyController(PolicyStore(OWN), scheduler, writer, clock=lambda: "2024-01-01T00:00:00Z"),
        scheduler,
        writer,
    )


async def test_events_swap_profiles_and_deletion_falls_back_to_the_base_algorithm() -> None:
    controller, scheduler, _ = new_controller()
    base = scheduler.profiles[OWN]
    await controller.on_event("ADDED", policy("p", MOST))
    await controller.on_event("ADDED", policy("batch", {"schedulerName": "batch", **MOST}))
    assert set(scheduler.profiles) == {OWN, "batch"}
    assert [w.priority.name for w in scheduler.profiles[OWN].priorities] == ["MostRequestedPriority"]
    await controller.on_event("DELETED", policy("p", MOST))
    await controller.on_event("DELETED", policy("batch", {}))
    assert dict(scheduler.profiles) == {OWN: base}


async def test_a_follower_compiles_but_writes_nothing_until_it_leads() -> None:
    controller, scheduler, writer = new_controller()
    writer.leader = False
    await controller.on_event("ADDED", policy("p", MOST))
    assert OWN in scheduler.profiles and scheduler.profiles[OWN] is not scheduler.base_algorithm
    assert writer.written == []
    writer.leader = True
    await controller.sync_statuses()  # what a new leader does on winning
    assert [name for name, _ in writer.written] == ["p"]
    await controller.sync_statuses()
    assert len(writer.written) == 1  # in step with what the API server holds


async def test_a_failed_status_write_is_retried(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(policy_controller, "STATUS_RETRY_SECONDS", 0.01)
    controller, _, writer = new_controller()
    writer.fail = True
    await controller.on_event("ADDED", policy("p", MOST))
    assert writer.written == []
    writer.fail = False
    for _ in range(100):
        if writer.written:
            break
        await asyncio.sleep(0.01)
    assert [name for name, _ in writer.written] == ["p"]
    await controller.close()


async def test_policies_are_compiled_off_the_event_loop(monkeypatch: pytest.MonkeyPatch) -> None:
    # A large policy takes a while to compile; the event loop owns the cache, the queue and the lease.
    on_loop: list[bool] = []

    def compile_and_note(*args: Any, **kwargs: Any) -> Algorithm:
        try:
            asyncio.get_running_loop()
            on_loop.append(True)
        except RuntimeError:
            on_loop.append(False)
        return compile_policy(*args, **kwargs)

    monkeypatch.setattr(policy_store, "compile_policy", compile_and_note)
    controller, _, _ = new_controller()
    typo = {"priorities": [{"name": "Typo", "weight": 1}]}
    await controller.on_event("ADDED", policy("p", MOST))
    await controller.on_event("MODIFIED", policy("p", typo, 2))
    # A replica that starts now finds generation 1 in force through status.acceptedSpec.
    status = controller.store.desired_status("p", "2024-01-01T00:00:00Z")
    fresh, fresh_scheduler, _ = new_controller()
    await fresh.on_event("ADDED", {**policy("p", typo, 2), "status": status})
    assert on_loop == [False, False, False, False]
    assert [w.priority.name for w in fresh_scheduler.profiles[OWN].priorities] == ["MostRequestedPriority"]


async def test_failed_status_writes_are_retried_with_backoff(monkeypatch: pytest.MonkeyPatch) -> None:
    controller, _, writer = new_controller()
    loop = asyncio.get_running_loop()
    delays: list[float] = []

    def call_soon_instead(delay: float, callback: Any, *args: Any) -> asyncio.TimerHandle:
        delays.append(delay)
        return loop.call_at(loop.time(), callback, *args)

    monkeypatch.setattr(loop, "call_later", call_soon_instead)
    writer.fail = True
    await controller.on_event("ADDED", policy("p", MOST))
    await wait_until(lambda: len(delays) >= 8)
    first = policy_controller.STATUS_RETRY_SECONDS
    top = policy_controller.STATUS_RETRY_MAX_SECONDS
    assert delays[:8] == [min(first * 2**i, top) for i in range(8)]
    assert top >= 60 * first
    writer.fail = False
    await wait_until(lambda: writer.written)
    # A success starts the backoff again from the first delay.
    writer.fail = True
    delays.clear()
    await controller.on_event("MODIFIED", policy("p", {}, 2))
    await wait_until(lambda: delays)
    assert delays[0] == first
    await controller.close()


async def wait_until(condition: Any) -> None:
    for _ in range(1000):
        if condition():
            return
        await asyncio.sleep(0)
    raise AssertionError("condition never met")
