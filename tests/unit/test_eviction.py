"""A preemption victim is marked DisruptionTarget before it is deleted, as kube-scheduler 1.32's
prepareCandidate does (pkg/scheduler/framework/preemption/preemption.go): a strategic merge patch
of its status with DisruptionTarget=True, reason PreemptionByScheduler, message "<preemptor's
scheduler name>: preempting to accommodate a higher priority pod"; a patch that fails is logged
and that victim is not deleted."""

from __future__ import annotations

from typing import Any, NamedTuple, cast

import pytest
from prometheus_client import REGISTRY
from structlog.testing import capture_logs

from kubesched.kube import eviction
from kubesched.kube.client import STRATEGIC_MERGE_PATCH, TokenBucket
from kubesched.kube.events import Recorder
from kubesched.kube.eviction import Evictor
from kubesched.model.objects import Pod, pod_from_dict
from kubesched_dev.fixtures import make_pod

AT = "2032-01-02T03:04:05Z"
MARK = "PATCH /api/v1/namespaces/ns/pods/low/status"
DELETE = "DELETE /api/v1/namespaces/ns/pods/low"
NOMINATE = "PATCH /api/v1/namespaces/ns/pods/high/status"


class Sent(NamedTuple):
    method: str
    path: str
    body: Any
    content_type: str

    def __str__(self) -> str:
        return f"{self.method} {self.path}"


class FakeRecorder:
    def __init__(self) -> None:
        self.events: list[tuple[str, str, str]] = []

    def event(self, pod: Pod, type_: str, reason: str, message: str) -> None:
        self.events.append((pod.name, reason, message))


class Server:
    """Answers each request by its method and path (200 unless told), and keeps what was sent."""

    def __init__(self, answers: dict[str, int | Exception] | None = None) -> None:
        self.answers = answers or {}
        self.sent: list[Sent] = []

    async def request(
        self, api: Any, method: str, path: str, body: Any = None, *, content_type: str = "", **_: Any
    ) -> tuple[int, Any]:
        self.sent.append(Sent(method, path, body, content_type))
        answer = self.answers.get(f"{method} {path}", 200)
        if isinstance(answer, Exception):
            raise answer
        return answer, {} if answer < 300 else f"status {answer}"


def victim() -> Pod:
    raw = make_pod("low", "ns", "default-scheduler", cpu="2", priority=1, node_name="n1")
    raw["metadata"]["uid"] = "uid-low"
    return pod_from_dict(raw)


def preemptor() -> Pod:
    return pod_from_dict(make_pod("high", "ns", "big-profile", cpu="2", priority=100))


@pytest.fixture
def server(monkeypatch: pytest.MonkeyPatch) -> Server:
    made = Server()
    monkeypatch.setattr(eviction, "request", made.request)
    monkeypatch.setattr(eviction, "now_rfc3339", lambda: AT)
    return made


async def preempt(server: Server, *, may_act: Any = None, rule: tuple[str, str] = ("", "")) -> FakeRecorder:
    """One preemption carried out to the end: the victim evicted, then the preemptor nominated."""
    recorder = FakeRecorder()
    evictor = Evictor(cast(Any, None), TokenBucket(0, 0), cast(Recorder, recorder), may_act=may_act)
    evictor.evict(victim(), preemptor(), "n1", *rule)
    evictor.nominate(preemptor(), "n1")
    await evictor.close()
    return recorder


async def test_the_victim_is_marked_disruption_target_and_then_deleted(server: Server) -> None:
    recorder = await preempt(server)
    assert [str(s) for s in server.sent] == [MARK, DELETE, NOMINATE]
    mark = server.sent[0]
    assert mark.content_type == STRATEGIC_MERGE_PATCH  # keyed on `type`: the kubelet's conditions stay
    assert mark.body == {
        "metadata": {"uid": "uid-low"},  # that very pod, not a new one of the same name
        "status": {
            "conditions": [
                {
                    "type": "DisruptionTarget",
                    "status": "True",
                    "reason": "PreemptionByScheduler",
                    "message": "big-profile: preempting to accommodate a higher priority pod",
                    "lastProbeTime": None,
                    "lastTransitionTime": AT,
                }
            ]
        },
    }
    assert server.sent[1].body["preconditions"] == {"uid": "uid-low"}
    assert recorder.events == [("low", "Preempted", "Preempted by ns/high on node n1")]


def reclaimed(rule: str) -> float:
    return REGISTRY.get_sample_value("kubesched_quota_reclaim_evictions_total", {"rule": rule}) or 0.0


async def test_a_victim_of_quota_reclaim_is_told_the_rule_and_counted(server: Server) -> None:
    before = reclaimed("reclaim")
    why = "ElasticQuota other/eq over its min, reclaimed by ns/eq within its min"
    recorder = await preempt(server, rule=("reclaim", why))
    assert recorder.events == [("low", "Preempted", f"Preempted by ns/high on node n1: {why}")]
    assert reclaimed("reclaim") == before + 1


async def test_a_quota_victim_whose_delete_fails_is_not_counted(server: Server) -> None:
    server.answers[DELETE] = 500
    before = reclaimed("own_quota")
    await preempt(server, rule=("own_quota", "lower priority in ElasticQuota ns/eq"))
    assert reclaimed("own_quota") == before


class MarkCase(NamedTuple):
    name: str
    answer: int | Exception
    logged: bool  # a warning "preemption_condition_failed"


MARK_CASES = [
    # Gone before it was marked: evicted, as a 404 on the delete; nothing to tell.
    MarkCase("victim already gone", 404, logged=False),
    MarkCase("server error", 500, logged=True),
    MarkCase("forbidden", 403, logged=True),
    # The uid is immutable: a new pod of the same name refuses the mark and stays.
    MarkCase("a new pod of the same name", 422, logged=True),
    MarkCase("server unreachable", OSError("connection refused"), logged=True),
]


@pytest.mark.parametrize("case", MARK_CASES, ids=[c.name for c in MARK_CASES])
async def test_a_victim_whose_mark_fails_is_not_deleted(server: Server, case: MarkCase) -> None:
    """As 1.32: no delete, no Preempted event, the error logged. The nomination is still written,
    as after a failed delete: the next cycle sees what the watches report."""
    server.answers[MARK] = case.answer
    with capture_logs() as logs:
        recorder = await preempt(server)
    assert [str(s) for s in server.sent] == [MARK, NOMINATE]
    assert recorder.events == []
    failures = [e for e in logs if e["event"] == "preemption_condition_failed"]
    assert [(e["pod"], e["preemptor"]) for e in failures] == ([("ns/low", "ns/high")] if case.logged else [])


async def test_a_failed_delete_after_the_mark_sends_no_event(server: Server) -> None:
    server.answers[DELETE] = 500
    with capture_logs() as logs:
        recorder = await preempt(server)
    assert [str(s) for s in server.sent] == [MARK, DELETE, NOMINATE]
    assert recorder.events == []
    assert [e["event"] for e in logs if e["log_level"] == "warning"] == ["preemption_delete_failed"]


async def test_a_term_that_ends_while_the_mark_is_written_deletes_nothing(server: Server) -> None:
    """Only the leader deletes: leadership is asked again between the mark and the delete."""
    asked: list[bool] = []

    def may_act() -> bool:
        # Leader when the eviction and the nomination are handed over, not after the mark went out.
        leader = not any(s.method == "PATCH" and s.path.endswith("/low/status") for s in server.sent)
        asked.append(leader)
        return leader

    recorder = await preempt(server, may_act=may_act)
    assert [str(s) for s in server.sent] == [MARK, NOMINATE]
    assert asked == [True, True, False]
    assert recorder.events == []
