"""The PodGroup status writer against a fake API server: what it patches, when, and what it does on
404, refusals and outages."""

from __future__ import annotations

import asyncio
from typing import Any

import aiohttp
import pytest
from prometheus_client import REGISTRY
from structlog.testing import capture_logs

from kubesched.kube.client import MERGE_PATCH
from kubesched.kube.status_writer import StatusWriter, pod_group_status_writer, status_path
from kubesched.model.kinds import POD_GROUPS
from kubesched_dev.fixtures import wait_for

PATH = "/apis/scheduling.x-k8s.io/v1alpha1/namespaces/ns/podgroups/gang/status"


class FakeServer:
    """Records PATCH requests; answers `answer[path]` (default 200), or refuses connections while `down`."""

    def __init__(self) -> None:
        self.patches: list[tuple[str, Any]] = []  # (path, status patch) as received
        self.attempts = 0
        self.answer: dict[str, int] = {}
        self.down = False
        self.gate = asyncio.Event()
        self.gate.set()

    async def send(self, method: str, path: str, body: Any, content_type: str) -> tuple[int, Any]:
        assert (method, content_type) == ("PATCH", MERGE_PATCH)
        self.attempts += 1
        await self.gate.wait()
        if self.down:
            raise aiohttp.ClientConnectorError(None, OSError(111, "Connection refused"))  # type: ignore[arg-type]
        code = self.answer.get(path, 200)
        if code >= 300:
            return code, f"refused with {code}"
        self.patches.append((path, body["status"]))
        return code, body

    def written(self, path: str = PATH) -> list[Any]:
        return [status for p, status in self.patches if p == path]


def status(phase: str = "Pending", scheduled: int = 0, **more: Any) -> dict[str, Any]:
    return {"phase": phase, "scheduled": scheduled, "running": 0, "succeeded": 0, "failed": 0, **more}


def counted(result: str) -> float:
    return REGISTRY.get_sample_value("kubesched_podgroup_status_writes_total", {"result": result}) or 0.0


def writer(server: FakeServer, **options: Any) -> StatusWriter:
    return pod_group_status_writer(None, send=server.send, **options)  # type: ignore[arg-type]


def test_the_status_path_is_the_status_subresource_of_the_group() -> None:
    assert status_path(POD_GROUPS, "ns/gang") == PATH


async def test_a_status_is_written_once_and_only_its_latest_version() -> None:
    server = FakeServer()
    statuses = writer(server)
    before = counted("written")
    statuses.set("ns/gang", status("Pending"))
    statuses.set("ns/gang", status("Scheduling", 3))
    await statuses.flush()
    assert server.written() == [status("Scheduling", 3)]
    assert counted("written") - before == 1
    # The same status again, even as a fresh object with tuples for lists: nothing to write.
    statuses.set("ns/gang", status("Scheduling", 3))
    await statuses.flush()
    await statuses.flush()
    assert server.attempts == 1
    assert statuses.pending == []
    statuses.set("ns/gang", status("Running", 3))
    await statuses.flush()
    assert server.written() == [status("Scheduling", 3), status("Running", 3)]


async def test_lists_compare_by_value_whatever_sequence_type_they_come_in() -> None:
    server = FakeServer()
    statuses = writer(server)
    condition = {"type": "Scheduled", "status": "True", "reason": "Placed"}
    statuses.set("ns/gang", status(conditions=[condition]))
    await statuses.flush()
    statuses.set("ns/gang", status(conditions=(dict(condition),)))
    await statuses.flush()
    assert server.attempts == 1


async def test_a_field_the_status_no_longer_has_is_removed_with_null() -> None:
    """A JSON merge patch (RFC 7386) keeps the fields it does not name."""
    server = FakeServer()
    statuses = writer(server)
    statuses.set("ns/gang", status("Running", occupiedBy="ns/job"))
    await statuses.flush()
    statuses.set("ns/gang", status("Running"))
    await statuses.flush()
    assert server.written()[-1] == {**status("Running"), "occupiedBy": None}


async def test_what_the_server_kept_is_not_read_back() -> None:
    """scheduler-plugins' CRD prunes `scheduled` and `conditions`: the reply lacks them, and the
    writer must not take that for a difference to write again."""

    async def pruning(method: str, path: str, body: Any, content_type: str) -> tuple[int, Any]:
        sent.append(body)
        kept = {k: v for k, v in body["status"].items() if k not in ("scheduled", "conditions")}
        return 200, {"status": kept}

    sent: list[Any] = []
    statuses = pod_group_status_writer(None, send=pruning)  # type: ignore[arg-type]
    statuses.set("ns/gang", status("Scheduling", 2, conditions=[{"type": "Scheduled", "status": "True"}]))
    for _ in range(3):
        await statuses.flush()
        statuses.set("ns/gang", status("Scheduling", 2, conditions=[{"type": "Scheduled", "status": "True"}]))
    assert len(sent) == 1


async def test_a_group_gone_is_forgotten_and_a_new_one_of_the_same_name_is_written() -> None:
    server = FakeServer()
    statuses = writer(server)
    before = counted("gone")
    server.answer[PATH] = 404
    statuses.set("ns/gang", status())
    await statuses.flush()
    assert counted("gone") - before == 1
    await statuses.flush()
    assert server.attempts == 1  # forgotten: not tried again
    del server.answer[PATH]
    statuses.set("ns/gang", status())  # created again
    await statuses.flush()
    assert server.written() == [status()]


async def test_a_refused_status_is_logged_and_retried_after_the_delay_not_each_round() -> None:
    server = FakeServer()
    statuses = writer(server, retry_delays=(0.3, 1.0))
    before = counted("failed")
    server.answer[PATH] = 422
    statuses.set("ns/gang", status("Bogus"))
    with capture_logs() as logs:
        await statuses.flush()
        await statuses.flush()
        statuses.set("ns/gang", status("Pending"))  # a newer status waits for the retry too
        await statuses.flush()
    assert server.attempts == 1
    assert counted("failed") - before == 1
    (warning,) = [entry for entry in logs if entry["event"] == "podgroup_status_failed"]
    assert (warning["log_level"], warning["key"], warning["status"]) == ("warning", "ns/gang", 422)
    assert warning["error"] == "refused with 422" and warning["patch"]["phase"] == "Bogus"
    del server.answer[PATH]

    async def written() -> list[Any]:
        await statuses.flush()
        return server.written()

    assert await wait_for(written, timeout=10, interval=0.05) == [status("Pending")]


async def test_while_the_server_is_unreachable_one_line_says_so_and_one_probe_goes_per_round() -> None:
    server = FakeServer()
    statuses = writer(server)
    server.down = True
    for i in range(5):
        statuses.set(f"ns/gang-{i}", status())
    with capture_logs() as logs:
        await statuses.flush()
        attempts = server.attempts  # the patches of the first round, at most one per group
        await statuses.flush()
        await statuses.flush()
        assert server.attempts - attempts == 2, server.attempts
        server.down = False
        await statuses.flush()
    events = [(entry["event"], entry["log_level"]) for entry in logs]
    assert events == [("podgroup_status_api_unreachable", "info"), ("podgroup_status_api_reachable", "info")]
    assert sorted(path for path, _ in server.patches) == sorted(
        status_path(POD_GROUPS, f"ns/gang-{i}") for i in range(5)
    )
    assert statuses.pending == []


async def test_a_status_set_while_its_patch_is_in_flight_is_written_next() -> None:
    server = FakeServer()
    statuses = writer(server)
    statuses.set("ns/gang", status("Pending"))
    server.gate.clear()
    flush = asyncio.create_task(statuses.flush())
    await wait_for(lambda: server.attempts == 1)
    statuses.set("ns/gang", status("Scheduling", 4))
    server.gate.set()
    await flush
    assert statuses.pending == ["ns/gang"]
    await statuses.flush()
    assert server.written() == [status("Pending"), status("Scheduling", 4)]


async def test_a_group_forgotten_while_its_patch_is_in_flight_stays_forgotten() -> None:
    server = FakeServer()
    statuses = writer(server)
    statuses.set("ns/gang", status())
    server.gate.clear()
    flush = asyncio.create_task(statuses.flush())
    await wait_for(lambda: server.attempts == 1)
    statuses.forget("ns/gang")
    server.gate.set()
    await flush
    await statuses.flush()
    assert server.attempts == 1 and statuses.pending == []
    statuses.set("ns/gang", status())  # a new group of that name: its status is written
    await statuses.flush()
    assert server.attempts == 2


async def test_run_writes_every_interval_and_a_cancelled_patch_is_sent_again() -> None:
    server = FakeServer()
    statuses = writer(server, interval=0.01)
    server.gate.clear()
    runner = asyncio.create_task(statuses.run())
    statuses.set("ns/gang", status("Pending"))
    await wait_for(lambda: server.attempts == 1, timeout=10)
    runner.cancel()
    with pytest.raises(asyncio.CancelledError):
        await runner
    assert statuses.pending == ["ns/gang"]
    server.gate.set()
    runner = asyncio.create_task(statuses.run())
    try:
        await wait_for(lambda: server.written() == [status("Pending")], timeout=10)
    finally:
        await statuses.close()
        await asyncio.wait_for(runner, 10)  # close() ends run()


async def test_close_writes_what_is_pending_and_takes_no_more() -> None:
    server = FakeServer()
    statuses = writer(server, interval=3600)
    statuses.set("ns/gang", status("Running", 2))
    await statuses.close()
    assert server.written() == [status("Running", 2)]
    statuses.set("ns/gang", status("Finished", 0))
    await statuses.flush()
    assert server.attempts == 1
