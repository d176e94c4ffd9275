"""Pods that use a field kubesched does not implement are refused, never placed as if the field were
absent: dynamic resource allocation (`spec.resourceClaims`, kube-scheduler 1.32
`pkg/scheduler/framework/plugins/dynamicresources/dynamicresources.go`), pod-level resources
(`spec.resources`, 1.32 `noderesources/fit.go` with PodLevelResources) and generic ephemeral volumes
(1.32 `volumebinding/volume_binding.go`). The FailedScheduling message, the condition, `explain` and
`simulate` name the field; preemption is not tried, since no eviction could help.

The pods are shaped as a 1.32 API server sends them; a 1.20 API server drops these fields.
"""

from __future__ import annotations

import asyncio
import json
import random
from dataclasses import replace
from pathlib import Path
from typing import Any, cast

import pytest
from click.testing import CliRunner

from kubesched.algorithm.batch import schedule_batch
from kubesched.algorithm.generic import FitError
from kubesched.algorithm.preemption import PreemptionOutcome
from kubesched.cli import main
from kubesched.kube.binding import Binder, BindOutcome, BindResult
from kubesched.kube.events import Recorder
from kubesched.model.objects import Pod, pod_from_dict
from kubesched.policy.compile import default_algorithm
from kubesched.runtime.queue import QueueSettings, SchedulingQueue
from kubesched.runtime.scheduler import Scheduler, SchedulerSettings
from kubesched.tools.explain import explain, render_table
from kubesched.tools.simulate import simulate
from kubesched.tools.snapshot import ClusterState, save
from kubesched_dev.fixtures import make_node, make_pod, model_node, model_pod, node_info, snapshot, wait_for

DRA = "spec.resourceClaims (dynamic resource allocation)"
DRA_CONTAINER = "spec.containers[*].resources.claims (dynamic resource allocation)"
POD_LEVEL = "spec.resources (pod-level resources)"
EPHEMERAL = "spec.volumes[*].ephemeral (generic ephemeral volumes)"


def with_spec(name: str, priority: int = 0, **spec: Any) -> dict[str, Any]:
    """A pending pod of ours (make_pod's shape) with `spec` fields added as 1.32 serves them."""
    raw = make_pod(name, cpu="100m", memory="64Mi", priority=priority or None)
    raw["spec"].update(spec)
    return raw


def claiming(name: str, priority: int = 0) -> dict[str, Any]:
    """A pod with a ResourceClaim from a template, used by its container (DRA, 1.32's API shape)."""
    raw = with_spec(
        name, priority, resourceClaims=[{"name": "gpu", "resourceClaimTemplateName": "single-gpu"}]
    )
    raw["spec"]["containers"][0]["resources"]["claims"] = [{"name": "gpu"}]
    return raw


POD_LEVEL_RESOURCES = {"requests": {"cpu": "1", "memory": "100Mi"}, "limits": {"cpu": "1", "memory": "100Mi"}}
EPHEMERAL_VOLUME = {
    "name": "scratch",
    "ephemeral": {
        "volumeClaimTemplate": {
            "spec": {
                "accessModes": ["ReadWriteOnce"],
                "storageClassName": "fast",
                "resources": {"requests": {"storage": "1Gi"}},
            }
        }
    },
}
SIDECAR = {"name": "proxy", "image": "envoy", "restartPolicy": "Always"}


@pytest.mark.parametrize(
    ("name", "raw", "refused"),
    [
        ("a plain pod", with_spec("plain"), ()),
        ("a DRA claim used by a container", claiming("dra"), (DRA, DRA_CONTAINER)),
        (
            "a claim by name",
            with_spec("named", resourceClaims=[{"name": "c", "resourceClaimName": "shared"}]),
            (DRA,),
        ),
        ("pod-level resources", with_spec("pod-level", resources=POD_LEVEL_RESOURCES), (POD_LEVEL,)),
        ("a generic ephemeral volume", with_spec("ephemeral", volumes=[EPHEMERAL_VOLUME]), (EPHEMERAL,)),
        # Implemented, or not scheduled by in 1.32: never refused.
        (
            "os, hostUsers, a sidecar, gates",
            with_spec(
                "modern",
                os={"name": "linux"},
                hostUsers=False,
                initContainers=[SIDECAR],
                schedulingGates=[{"name": "g"}],
            ),
            (),
        ),
        ("empty lists and objects", with_spec("empty", resourceClaims=[], resources={}, volumes=[]), ()),
    ],
)
def test_the_refused_fields_a_pod_uses(name: str, raw: dict[str, Any], refused: tuple[str, ...]) -> None:
    pod = pod_from_dict(raw)
    assert pod.unsupported == refused, name
    assert pod.parse_error is None


NODES = [model_node(f"n{i}", cpu="4", memory="8Gi") for i in range(5)]


@pytest.mark.parametrize("vectorised", [True, False])
def test_the_default_policy_fails_every_node_with_one_message_naming_the_field(vectorised: bool) -> None:
    algorithm = replace(default_algorithm(), vectorised=vectorised)
    cluster = snapshot(*NODES)
    with pytest.raises(FitError) as failed:
        algorithm.schedule(pod_from_dict(claiming("dra")), cluster, random.Random(1))
    assert failed.value.summary() == (
        f"0/5 nodes are available: pod has {DRA} and {DRA_CONTAINER}, which kubesched does not implement."
    )
    with pytest.raises(FitError) as failed:
        algorithm.schedule(
            pod_from_dict(with_spec("p", resources=POD_LEVEL_RESOURCES)), cluster, random.Random(1)
        )
    assert (
        str(failed.value)
        == f"0/5 nodes are available: pod has {POD_LEVEL}, which kubesched does not implement."
    )
    # The same pod without the field goes anywhere.
    assert algorithm.schedule(pod_from_dict(with_spec("p")), cluster, random.Random(1)).node_name


def test_no_preemption_is_tried_for_a_refused_pod() -> None:
    victims = [model_pod(f"low-{i}", cpu="3500m", node_name=f"n{i}") for i in range(5)]
    cluster = snapshot(*(node_info(node, [victim]) for node, victim in zip(NODES, victims, strict=True)))
    refused = pod_from_dict(with_spec("urgent", priority=1000, resources=POD_LEVEL_RESOURCES))
    profiles = {refused.scheduler_name: default_algorithm()}
    outcomes, _ = schedule_batch(profiles, [refused], cluster, random.Random(1), 0)
    assert isinstance(outcomes[0], FitError) and not isinstance(outcomes[0], PreemptionOutcome)
    assert POD_LEVEL in str(outcomes[0])
    # The same pod without the field does preempt: the victims were there to take.
    big = pod_from_dict(make_pod("big", cpu="3", priority=1000))
    (outcome,), _ = schedule_batch(profiles, [big], cluster, random.Random(1), 0)
    assert isinstance(outcome, PreemptionOutcome) and outcome.preemption.victims


def test_explain_names_the_refused_fields() -> None:
    result = explain(default_algorithm(), pod_from_dict(claiming("dra")), snapshot(*NODES))
    assert result.message.startswith("0/5 nodes are available: pod has spec.resourceClaims")
    assert result.notes == (
        f"refused: the pod uses {DRA}, which kubesched does not implement",
        f"refused: the pod uses {DRA_CONTAINER}, which kubesched does not implement",
    )
    assert not result.feasible and not result.rejected
    assert f"note: refused: the pod uses {DRA}" in render_table(result)


def test_explain_says_a_gated_pod_waits_and_what_it_would_do_without_its_gates() -> None:
    raw = with_spec("gated", schedulingGates=[{"name": "example.com/a"}, {"name": "example.com/b"}])
    result = explain(default_algorithm(), pod_from_dict(raw), snapshot(*NODES))
    assert result.message == (
        "not scheduled: waiting for scheduling gates: [example.com/a example.com/b] "
        "(the scheduler does not try it until they are removed)"
    )
    assert result.notes[0].startswith("without the gates: would be scheduled on ")
    assert len(result.feasible) == 5


def cluster_state(*extra: dict[str, Any]) -> ClusterState:
    nodes = [make_node(f"n{i}", cpu="4", memory="8Gi") for i in range(3)]
    return ClusterState(nodes, [make_pod("web", cpu="500m"), *extra], {}, [])


def test_explain_snapshot_reads_refused_and_gated_pods_from_a_file(tmp_path: Path) -> None:
    path = tmp_path / "snap.json"
    gated = with_spec("gated", schedulingGates=[{"name": "example.com/quota"}])
    save(cluster_state(claiming("dra"), gated), str(path))
    outcome = CliRunner().invoke(main, ["explain", "default/dra", "--snapshot", str(path), "-o", "json"])
    assert outcome.exit_code == 0, outcome.output
    document = json.loads(outcome.output)
    assert document["message"] == (
        f"0/3 nodes are available: pod has {DRA} and {DRA_CONTAINER}, which kubesched does not implement."
    )
    assert document["notes"][0] == f"refused: the pod uses {DRA}, which kubesched does not implement"
    table = CliRunner().invoke(main, ["explain", "default/gated", "--snapshot", str(path)])
    assert table.exit_code == 0, table.output
    assert "not scheduled: waiting for scheduling gates: [example.com/quota]" in table.output


def test_simulate_leaves_refused_pods_unplaced_under_both_policies_with_the_reason() -> None:
    state = cluster_state(claiming("dra"), with_spec("ephemeral", volumes=[EPHEMERAL_VOLUME]))
    result = simulate(state, default_algorithm(), default_algorithm(), scheduler_name="kubesched", seed=1)
    placed = {p.pod: p for p in result.placements}
    assert placed["default/web"].current is not None
    for name, label in (("default/dra", DRA), ("default/ephemeral", EPHEMERAL)):
        assert placed[name].current is None and placed[name].candidate is None
        assert label in placed[name].current_reason and label in placed[name].candidate_reason
    assert sorted(result.as_dict()["unschedulableInBoth"]) == ["default/dra", "default/ephemeral"]


class Binds:
    def __init__(self) -> None:
        self.sent: list[str] = []

    async def bind(self, pod: Pod, node_name: str, extender: Any = None, **_: object) -> BindResult:
        self.sent.append(pod.name)
        return BindResult(BindOutcome.BOUND, "", 0.0)


class Messages:
    def __init__(self) -> None:
        self.failed: list[tuple[str, str]] = []

    def unschedulable(self, pod: Pod, message: str) -> None:
        self.failed.append((pod.name, message))

    def event(self, pod: Pod, type_: str, reason: str, message: str) -> None:
        pass


async def test_the_scheduler_never_binds_a_refused_pod_and_its_failed_scheduling_names_the_field() -> None:
    binder, recorder = Binds(), Messages()
    scheduler = Scheduler(
        SchedulerSettings("kubesched", seed=1),
        default_algorithm(),
        cast(Binder, binder),
        cast(Recorder, recorder),
        queue=SchedulingQueue(QueueSettings(0.01, 0.02, 60.0)),
    )
    scheduler.on_node("ADDED", make_node("n1", cpu="8"))
    scheduler.on_pod("ADDED", claiming("dra"))
    scheduler.on_pod("ADDED", with_spec("plain"))
    loop = asyncio.create_task(scheduler.run())
    try:
        await wait_for(lambda: recorder.failed and binder.sent, timeout=5, interval=0.01)
    finally:
        scheduler.queue.close()
        await asyncio.wait_for(loop, 5)
    assert binder.sent == ["plain"]
    assert recorder.failed == [
        (
            "dra",
            f"0/1 nodes are available: pod has {DRA} and {DRA_CONTAINER}, "
            "which kubesched does not implement.",
        )
    ]
