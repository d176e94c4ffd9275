"""kubesched schedules real pods on a real API server: placements, events, conditions, retries."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes_asyncio.client import ApiClient, CoreV1Api

from kubesched.model.objects import node_from_dict, pod_from_dict
from kubesched_dev.fixtures import create_nodes, create_pods, make_node, make_pod, sum_resources, wait_for

from .kubeapi import events_for, pods_by_name, wait_bound
from .kubesched_process import KubeschedProcess

HOSTNAME_SMALL = {
    "nodeAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": [
                {
                    "matchExpressions": [
                        {"key": "kubernetes.io/hostname", "operator": "In", "values": ["small"]}
                    ]
                }
            ]
        }
    }
}
GPU_TOLERATION = {"key": "dedicated", "operator": "Equal", "value": "gpu", "effect": "NoSchedule"}
SEED_POLICY = Path(__file__).parents[2] / "examples" / "policies" / "seed-policy.json"


@pytest.fixture
def kubesched(control_plane: Any, namespace: str, tmp_path: Path) -> Iterator[KubeschedProcess]:
    """A kubesched process with the seed policy and a scheduler name of this test's own."""
    proc = KubeschedProcess(
        control_plane.kubeconfig, f"ks-{namespace}", tmp_path, ["--policy-config-file", str(SEED_POLICY)]
    )
    with proc:
        proc.wait_for_log("cache_synced")
        yield proc


async def test_pods_go_to_the_only_node_that_fits(
    api: ApiClient, namespace: str, kubesched: KubeschedProcess
) -> None:
    name = kubesched.scheduler_name
    await create_nodes(
        api,
        [
            make_node("small", cpu="1", memory="2Gi"),
            make_node("big", cpu="16", memory="64Gi", labels={"size": "big"}),
            make_node("zone-b", cpu="2", memory="4Gi", labels={"zone": "b"}),
            make_node(
                "tainted", cpu="2", memory="4Gi", labels={"dedicated": "gpu"},
                taints=[{"key": "dedicated", "value": "gpu", "effect": "NoSchedule"}],
            ),
            make_node("cordoned", cpu="64", memory="256Gi", labels={"size": "big"}, unschedulable=True),
        ],
    )  # fmt: skip
    await create_pods(
        api,
        [
            # Only "big" has 8 free cores ("cordoned" is unschedulable).
            make_pod("needs-8-cpu", namespace, name, cpu="8", memory="1Gi"),
            make_pod("wants-zone-b", namespace, name, cpu="100m", node_selector={"zone": "b"}),
            make_pod(
                "tolerates-gpu-taint", namespace, name, cpu="100m", node_selector={"dedicated": "gpu"},
                tolerations=[GPU_TOLERATION],
            ),
            make_pod("hostname-affinity", namespace, name, cpu="100m", affinity=HOSTNAME_SMALL),
        ],
    )  # fmt: skip
    pods = await wait_bound(api, namespace, 4)
    placements = {n: p["spec"]["nodeName"] for n, p in pods.items()}
    assert placements == {
        "needs-8-cpu": "big",
        "wants-zone-b": "zone-b",
        "tolerates-gpu-taint": "tainted",
        "hostname-affinity": "small",
    }
    expected = f"Successfully assigned {namespace}/needs-8-cpu to big"

    async def scheduled_event() -> bool:
        # Events are posted after the bind, off the hot path: wait for it rather than race it.
        events = await events_for(api, namespace, "needs-8-cpu")
        return any(e["reason"] == "Scheduled" and e["message"] == expected for e in events)

    await wait_for(scheduled_event, timeout=15)


async def test_host_ports_never_collide(api: ApiClient, namespace: str, kubesched: KubeschedProcess) -> None:
    name = kubesched.scheduler_name
    await create_nodes(api, [make_node(f"port-{i}") for i in range(3)])
    await create_pods(
        api, [make_pod(f"web-{i}", namespace, name, cpu="100m", host_port=8080) for i in range(3)]
    )
    pods = await wait_bound(api, namespace, 3)
    assert sorted(p["spec"]["nodeName"] for p in pods.values()) == ["port-0", "port-1", "port-2"]
    await create_pods(api, [make_pod("web-3", namespace, name, cpu="100m", host_port=8080)])

    async def failed() -> bool:
        return any(e["reason"] == "FailedScheduling" for e in await events_for(api, namespace, "web-3"))

    await wait_for(failed, timeout=30)
    message = next(
        e["message"] for e in await events_for(api, namespace, "web-3") if e["reason"] == "FailedScheduling"
    )
    assert message == "0/3 nodes are available: 3 node(s) didn't have free ports for the requested pod ports."


async def test_impossible_pod_is_reported_then_scheduled_when_a_node_fits(
    api: ApiClient, namespace: str, kubesched: KubeschedProcess
) -> None:
    name = kubesched.scheduler_name
    await create_nodes(api, [make_node("tiny-1", cpu="1"), make_node("tiny-2", cpu="1")])
    await create_pods(api, [make_pod("huge", namespace, name, cpu="6", memory="1Gi")])

    expected = "0/2 nodes are available: 2 Insufficient cpu."

    # The scheduler may try the pod before it has seen the second node ("0/1 ..."); seeing the node
    # requeues the pod, so the report settles on both nodes.
    async def reported() -> bool:
        pod = (await pods_by_name(api, namespace))["huge"]
        conditions = pod.get("status", {}).get("conditions") or []
        return any(c["type"] == "PodScheduled" and c.get("message") == expected for c in conditions)

    await wait_for(reported, timeout=30)
    pod = (await pods_by_name(api, namespace))["huge"]
    (condition,) = [c for c in pod["status"]["conditions"] if c["type"] == "PodScheduled"]
    assert condition["status"] == "False"
    assert condition["reason"] == "Unschedulable"
    assert not pod["spec"].get("nodeName")
    events = [e for e in await events_for(api, namespace, "huge") if e["reason"] == "FailedScheduling"]
    assert {e["type"] for e in events} == {"Warning"}
    assert expected in [e["message"] for e in events]

    loop = asyncio.get_running_loop()
    added = loop.time()
    await create_nodes(api, [make_node("roomy", cpu="8")])
    pods = await wait_bound(api, namespace, 1, timeout=20)
    assert pods["huge"]["spec"]["nodeName"] == "roomy"
    # The node event moves the pod at once; the 60 s flush is not what got it scheduled.
    assert loop.time() - added < 10


async def test_other_schedulers_pods_are_left_alone(
    api: ApiClient, namespace: str, kubesched: KubeschedProcess
) -> None:
    await create_nodes(api, [make_node("n1")])
    await create_pods(
        api,
        [
            make_pod("ours", namespace, kubesched.scheduler_name, cpu="100m"),
            make_pod("theirs", namespace, "some-other-scheduler", cpu="100m"),
        ],
    )
    await wait_bound(api, namespace, 1)
    await asyncio.sleep(2)
    pods = await pods_by_name(api, namespace)
    assert pods["ours"]["spec"]["nodeName"] == "n1"
    assert not pods["theirs"]["spec"].get("nodeName")


async def test_500_pods_on_100_nodes_without_overcommit(
    api: ApiClient, namespace: str, kubesched: KubeschedProcess
) -> None:
    name = kubesched.scheduler_name
    zones = ["a", "b", "c", "d", "e"]
    nodes = [
        make_node(
            f"fleet-{i:03d}",
            cpu="4",
            memory="8Gi",
            pods="110",
            labels={"topology.kubernetes.io/zone": zones[i % 5]},
        )
        for i in range(100)
    ]
    await create_nodes(api, nodes)
    # 500 x (800m, 1600Mi) fill 100 x (4 cores, 8 Gi) exactly, 5 pods a node: every assumption must be
    # accounted for, or a node overcommits or a pod finds no room left and the wait times out.
    pods = [
        make_pod(f"p-{i:03d}", namespace, name, cpu="800m", memory="1600Mi", labels={"app": f"app-{i % 7}"})
        for i in range(500)
    ]
    await create_pods(api, pods)
    bound = await wait_bound(api, namespace, 500, timeout=180)
    per_node: dict[str, list[Any]] = {}
    for raw in bound.values():
        pod = pod_from_dict(raw)
        per_node.setdefault(pod.node_name, []).append(pod)
    for node_raw in nodes:
        node = node_from_dict(node_raw)
        used = sum_resources(p.requests for p in per_node.get(node.name, []))
        assert used.milli_cpu <= node.allocatable.milli_cpu, node.name
        assert used.memory <= node.allocatable.memory, node.name
    assert sorted(len(v) for v in per_node.values()) == [5] * 100


async def test_kopf_leaves_no_trace_on_pods(
    api: ApiClient, namespace: str, kubesched: KubeschedProcess
) -> None:
    await create_nodes(api, [make_node("n1")])
    await create_pods(
        api,
        [make_pod(f"clean-{i}", namespace, kubesched.scheduler_name, cpu="10m") for i in range(5)]
        + [make_pod("never-fits", namespace, kubesched.scheduler_name, cpu="100")],
    )
    await wait_bound(api, namespace, 5)
    await asyncio.sleep(1)
    for pod in (await pods_by_name(api, namespace)).values():
        meta = pod["metadata"]
        assert not meta.get("finalizers"), meta
        assert not [k for k in (meta.get("annotations") or {}) if "kopf" in k], meta
    core = CoreV1Api(api)
    events = await core.list_namespaced_event(namespace)
    assert not [e for e in events.items if (e.source.component or "").startswith("kopf")]


async def test_sigterm_stops_cleanly(api: ApiClient, namespace: str, kubesched: KubeschedProcess) -> None:
    await create_nodes(api, [make_node("n1")])
    await create_pods(
        api, [make_pod(f"s-{i}", namespace, kubesched.scheduler_name, cpu="10m") for i in range(20)]
    )
    await wait_bound(api, namespace, 20)
    loop = asyncio.get_running_loop()
    started = loop.time()
    code = await loop.run_in_executor(None, kubesched.stop)
    assert code == 0, kubesched.log()[-3000:]
    assert loop.time() - started < 10
    assert '"event": "stopped"' in kubesched.log()
