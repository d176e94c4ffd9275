"""The legacy Policy catalogue on a real API server: one scheduling test per family, an extender
process that filters and binds, and `kubesched explain` on a pod rejected for several reasons."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes_asyncio.client import ApiClient

from kubesched.kube.client import request
from kubesched_dev.fixtures import create_nodes, create_pods, make_node, make_pod, wait_for

from ..extender_server import ExtenderProcess
from .kubeapi import pods_by_name
from .kubesched_process import KubeschedProcess

ZONE = "topology.kubernetes.io/zone"
HOST = "kubernetes.io/hostname"

# Every predicate of 1.20's default provider plus custom label presence, the priorities that
# decide the tests below.
CATALOGUE_POLICY: dict[str, Any] = {
    "kind": "Policy",
    "apiVersion": "v1",
    "predicates": [
        {"name": "GeneralPredicates"},
        {"name": "PodToleratesNodeTaints"},
        {"name": "NoDiskConflict"},
        {"name": "NoVolumeZoneConflict"},
        {"name": "MaxCSIVolumeCountPred"},
        {"name": "CheckVolumeBinding"},
        {"name": "EvenPodsSpread"},
        {"name": "MatchInterPodAffinity"},
        {"name": "not-retiring", "argument": {"labelsPresence": {"labels": ["retiring"], "presence": False}}},
    ],
    "priorities": [
        {"name": "LeastRequestedPriority", "weight": 1},
        {"name": "TaintTolerationPriority", "weight": 1000},
        {"name": "InterPodAffinityPriority", "weight": 1},
        {"name": "EvenPodsSpreadPriority", "weight": 2},
    ],
}


def _policy_file(tmp_path: Path, policy: dict[str, Any], name: str = "policy.json") -> Path:
    path = tmp_path / name
    path.write_text(json.dumps(policy))
    return path


@pytest.fixture
def kubesched(control_plane: Any, namespace: str, tmp_path: Path) -> Iterator[KubeschedProcess]:
    policy = _policy_file(tmp_path, CATALOGUE_POLICY)
    with KubeschedProcess(
        control_plane.kubeconfig, f"ks-{namespace}", tmp_path, ["--policy-config-file", str(policy)]
    ) as proc:
        proc.wait_for_log("cache_synced")
        yield proc


async def _placed(api: ApiClient, namespace: str, names: list[str], timeout: float = 30) -> dict[str, str]:
    """Wait until every pod of `names` is bound; their nodes."""

    async def bound() -> dict[str, str] | None:
        pods = await pods_by_name(api, namespace)
        nodes = {n: (pods.get(n) or {}).get("spec", {}).get("nodeName") for n in names}
        return nodes if all(nodes.values()) else None  # type: ignore[return-value]

    result = await wait_for(bound, timeout=timeout, interval=0.2)
    assert result is not None
    return result


async def _failed_message(api: ApiClient, namespace: str, name: str) -> str:
    async def message() -> str | None:
        status, body = await request(
            api,
            "GET",
            f"/api/v1/namespaces/{namespace}/events",
            query=[("fieldSelector", f"involvedObject.name={name}")],
        )
        assert status == 200, body
        found = [e["message"] for e in body["items"] if e["reason"] == "FailedScheduling"]
        return found[-1] if found else None

    result = await wait_for(message, timeout=30, interval=0.2)
    assert result is not None
    return result


async def _create(api: ApiClient, path: str, body: dict[str, Any]) -> None:
    status, reply = await request(api, "POST", path, body)
    assert status in (200, 201), reply


async def test_resources_ports_and_node_labels(
    api: ApiClient, namespace: str, kubesched: KubeschedProcess
) -> None:
    name = kubesched.scheduler_name
    await create_nodes(
        api,
        [
            make_node("fit-small", cpu="1"),
            make_node("fit-retiring", cpu="16", labels={"retiring": "2021-06"}),
            make_node("fit-port", cpu="16"),
            make_node("fit-ssd", cpu="16", labels={"disk": "ssd"}),
        ],
    )
    await create_pods(
        api, [make_pod("holder", namespace, name, cpu="100m", host_port=80, node_name="fit-port")]
    )
    await create_pods(
        api,
        [
            # Too big for fit-small; fit-retiring is excluded by the custom label-presence predicate;
            # fit-port's host port is taken; only fit-ssd is left.
            make_pod("web", namespace, name, cpu="2", host_port=80),
            make_pod("pinned", namespace, name, cpu="100m", node_selector={"disk": "ssd"}),
        ],
    )
    assert await _placed(api, namespace, ["web", "pinned"]) == {"web": "fit-ssd", "pinned": "fit-ssd"}


async def test_taints_and_tolerations(api: ApiClient, namespace: str, kubesched: KubeschedProcess) -> None:
    name = kubesched.scheduler_name
    await create_nodes(
        api,
        [
            make_node("taint-hard", taints=[{"key": "dedicated", "value": "db", "effect": "NoSchedule"}]),
            make_node("taint-soft", taints=[{"key": "spot", "value": "yes", "effect": "PreferNoSchedule"}]),
            make_node("taint-none", cpu="1"),  # the least free: only the soft taint's penalty moves pods here
        ],
    )
    db_toleration = {"key": "dedicated", "operator": "Equal", "value": "db", "effect": "NoSchedule"}
    await create_pods(
        api,
        [
            make_pod("plain", namespace, name, cpu="100m"),
            make_pod(
                "db",
                namespace,
                name,
                cpu="100m",
                tolerations=[db_toleration],
                node_selector={HOST: "taint-hard"},
            ),
        ],
    )
    assert await _placed(api, namespace, ["plain", "db"]) == {"plain": "taint-none", "db": "taint-hard"}
    await create_pods(
        api, [make_pod("not-tolerated", namespace, name, cpu="100m", node_selector={HOST: "taint-hard"})]
    )
    message = await _failed_message(api, namespace, "not-tolerated")
    assert message == (
        "0/3 nodes are available: 1 node(s) had taint {dedicated: db}, that the pod didn't tolerate, "
        "2 node(s) didn't match Pod's node affinity/selector."
    )


async def test_volumes_follow_pv_node_affinity(
    api: ApiClient, namespace: str, kubesched: KubeschedProcess
) -> None:
    name = kubesched.scheduler_name
    await create_nodes(
        api,
        [
            make_node("vol-a", labels={ZONE: "a"}),
            make_node("vol-b", labels={ZONE: "b"}),
            make_node("vol-c", labels={ZONE: "c"}),
        ],
    )
    storage_class = f"local-{namespace}"
    await _create(
        api,
        "/apis/storage.k8s.io/v1/storageclasses",
        {
            "metadata": {"name": storage_class},
            "provisioner": "kubernetes.io/no-provisioner",
            "volumeBindingMode": "WaitForFirstConsumer",
        },
    )

    def local_pv(pv_name: str, node: str, claim: str | None) -> dict[str, Any]:
        spec: dict[str, Any] = {
            "capacity": {"storage": "1Gi"},
            "accessModes": ["ReadWriteOnce"],
            "storageClassName": storage_class,
            "local": {"path": "/mnt/disk"},
            "nodeAffinity": {
                "required": {
                    "nodeSelectorTerms": [
                        {"matchExpressions": [{"key": HOST, "operator": "In", "values": [node]}]}
                    ]
                }
            },
        }
        if claim:
            spec["claimRef"] = {"name": claim, "namespace": namespace}
        return {"metadata": {"name": pv_name}, "spec": spec}

    bound_pv, free_pv = f"{namespace}-bound", f"{namespace}-free"
    await _create(api, "/api/v1/persistentvolumes", local_pv(bound_pv, "vol-b", "data-bound"))
    await _create(api, "/api/v1/persistentvolumes", local_pv(free_pv, "vol-c", None))
    # No PV controller runs here: the PV is made Available and the bound claim fully bound by hand.
    status, reply = await request(
        api,
        "PATCH",
        f"/api/v1/persistentvolumes/{free_pv}/status",
        {"status": {"phase": "Available"}},
        content_type="application/merge-patch+json",
    )
    assert status == 200, reply
    for claim, volume in (("data-bound", bound_pv), ("data-free", "")):
        annotations = {"pv.kubernetes.io/bind-completed": "yes"} if volume else {}
        await _create(
            api,
            f"/api/v1/namespaces/{namespace}/persistentvolumeclaims",
            {
                "metadata": {"name": claim, "annotations": annotations},
                "spec": {
                    "accessModes": ["ReadWriteOnce"],
                    "storageClassName": storage_class,
                    "volumeName": volume,
                    "resources": {"requests": {"storage": "1Gi"}},
                },
            },
        )
    pods = []
    for pod_name, claim in (("uses-bound", "data-bound"), ("uses-free", "data-free")):
        pod = make_pod(pod_name, namespace, name, cpu="100m")
        pod["spec"]["volumes"] = [{"name": "data", "persistentVolumeClaim": {"claimName": claim}}]
        pods.append(pod)
    try:
        await create_pods(api, pods)
        placed = await _placed(api, namespace, ["uses-bound", "uses-free"])
        assert placed == {"uses-bound": "vol-b", "uses-free": "vol-c"}
    finally:
        for path in (
            f"/api/v1/persistentvolumes/{bound_pv}",
            f"/api/v1/persistentvolumes/{free_pv}",
            f"/apis/storage.k8s.io/v1/storageclasses/{storage_class}",
        ):
            await request(api, "DELETE", path)


def _term(key: str, value: str, topology: str) -> dict[str, Any]:
    return {"labelSelector": {"matchLabels": {key: value}}, "topologyKey": topology}


async def test_inter_pod_affinity_and_anti_affinity(
    api: ApiClient, namespace: str, kubesched: KubeschedProcess
) -> None:
    name = kubesched.scheduler_name
    await create_nodes(
        api,
        [
            make_node("ipa-1", labels={ZONE: "a"}),
            make_node("ipa-2", labels={ZONE: "a"}),
            make_node("ipa-3", labels={ZONE: "b"}),
            make_node("ipa-4", labels={ZONE: "b"}),
        ],
    )
    loner_anti = {
        "podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [_term("app", "web", HOST)]}
    }
    await create_pods(
        api,
        [
            make_pod("db", namespace, name, cpu="100m", labels={"app": "db"}, node_name="ipa-1"),
            # An existing pod that wants no web pod on its node.
            make_pod(
                "loner",
                namespace,
                name,
                cpu="100m",
                labels={"app": "loner"},
                node_name="ipa-3",
                affinity=loner_anti,
            ),
        ],
    )
    with_db = {"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [_term("app", "db", HOST)]}}
    away_from_db = {
        "podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [_term("app", "db", ZONE)]}
    }
    await create_pods(
        api,
        [
            make_pod("cache", namespace, name, cpu="100m", labels={"app": "cache"}, affinity=with_db),
            make_pod("web", namespace, name, cpu="100m", labels={"app": "web"}, affinity=away_from_db),
        ],
    )
    placed = await _placed(api, namespace, ["cache", "web"])
    assert placed["cache"] == "ipa-1"
    assert placed["web"] == "ipa-4"  # zone b, and not next to the loner's anti-affinity


async def test_topology_spread_constraints(
    api: ApiClient, namespace: str, kubesched: KubeschedProcess
) -> None:
    name = kubesched.scheduler_name
    await create_nodes(
        api,
        [
            make_node("spread-a1", cpu="16", labels={ZONE: "a"}),
            make_node("spread-a2", cpu="16", labels={ZONE: "a"}),
            make_node("spread-a3", cpu="16", labels={ZONE: "a"}),
            make_node("spread-b1", cpu="2", labels={ZONE: "b"}),
        ],
    )
    pods = []
    for i in range(6):
        pod = make_pod(f"spread-{i}", namespace, name, cpu="100m", labels={"app": "spread"})
        pod["spec"]["topologySpreadConstraints"] = [
            {
                "maxSkew": 1,
                "topologyKey": ZONE,
                "whenUnsatisfiable": "DoNotSchedule",
                "labelSelector": {"matchLabels": {"app": "spread"}},
            },
        ]
        pods.append(pod)
    # One at a time, so that each decision sees the ones before it.
    for pod in pods:
        await create_pods(api, [pod])
        await _placed(api, namespace, [pod["metadata"]["name"]])
    placed = await _placed(api, namespace, [p["metadata"]["name"] for p in pods])
    per_zone = {"a": 0, "b": 0}
    for node in placed.values():
        per_zone["b" if node == "spread-b1" else "a"] += 1
    # LeastRequested alone would pile them onto the three big nodes of zone a.
    assert per_zone == {"a": 3, "b": 3}


async def test_an_extender_filters_and_binds(
    api: ApiClient, control_plane: Any, namespace: str, tmp_path: Path
) -> None:
    behaviour = {"filter": {"reject": {"ext-1": "no licence on this node"}}, "bind": {}}
    api_args = [
        "--api-server",
        control_plane.server,
        "--token",
        control_plane.token,
        "--ca-file",
        str(control_plane.ca_file),
    ]
    with ExtenderProcess(behaviour, tmp_path / "extender.log", api_args) as extender:
        policy = {
            "predicates": [{"name": "PodFitsResources"}],
            "priorities": [{"name": "LeastRequestedPriority", "weight": 1}],
            "extenders": [
                {
                    "urlPrefix": extender.url,
                    "filterVerb": "filter",
                    "bindVerb": "bind",
                    "nodeCacheCapable": True,
                    "httpTimeout": "2s",
                },
            ],
        }
        args = ["--policy-config-file", str(_policy_file(tmp_path, policy))]
        with KubeschedProcess(control_plane.kubeconfig, f"ks-{namespace}", tmp_path, args) as proc:
            proc.wait_for_log("cache_synced")
            await create_nodes(api, [make_node("ext-1", cpu="32"), make_node("ext-2", cpu="2")])
            await create_pods(api, [make_pod("licensed", namespace, proc.scheduler_name, cpu="100m")])
            placed = await _placed(api, namespace, ["licensed"])
        verbs = [r["verb"] for r in extender.requests()]
    # ext-1 is emptier, but the extender rejected it; the binding went through the extender.
    assert placed == {"licensed": "ext-2"}
    assert verbs == ["filter", "bind"]


def _explain_cli(control_plane: Any, target: str, *args: str) -> subprocess.CompletedProcess[str]:
    command = [
        sys.executable,
        "-m",
        "kubesched",
        "explain",
        target,
        "--kubeconfig",
        str(control_plane.kubeconfig),
    ]
    return subprocess.run([*command, *args], capture_output=True, text=True, timeout=60)


async def _explain(control_plane: Any, target: str) -> dict[str, Any]:
    done = await asyncio.to_thread(_explain_cli, control_plane, target, "-o", "json")
    assert done.returncode == 0, done.stderr
    result: dict[str, Any] = json.loads(done.stdout)
    return result


async def test_explain_names_every_reason_and_uses_the_scheduler_policy(
    api: ApiClient, control_plane: Any, namespace: str
) -> None:
    scheduler = f"ks-explain-{namespace}"
    await create_nodes(
        api,
        [
            make_node("why-small", cpu="1", labels={"disk": "ssd"}),
            make_node("why-hdd", cpu="8", labels={"disk": "hdd"}),
            make_node(
                "why-tainted",
                cpu="8",
                labels={"disk": "ssd"},
                taints=[{"key": "gpu", "value": "only", "effect": "NoSchedule"}],
            ),
            make_node("why-cordoned", cpu="8", labels={"disk": "ssd"}, unschedulable=True),
            make_node("why-ok", cpu="8", labels={"disk": "ssd"}),
            make_node("why-ok-2", cpu="16", labels={"disk": "ssd"}),
        ],
    )
    await create_pods(api, [make_pod("busy", namespace, scheduler, cpu="7", node_name="why-ok")])
    await create_pods(api, [make_pod("picky", namespace, scheduler, cpu="2", node_selector={"disk": "ssd"})])

    result = await _explain(control_plane, f"{namespace}/picky")
    rejected = {r["node"]: [(x["by"], x["reason"]) for x in r["reasons"]] for r in result["rejected"]}
    assert rejected == {
        "why-cordoned": [("CheckNodeUnschedulable", "node(s) were unschedulable")],
        "why-hdd": [("MatchNodeSelector", "node(s) didn't match Pod's node affinity/selector")],
        "why-ok": [("PodFitsResources", "Insufficient cpu")],
        "why-small": [("PodFitsResources", "Insufficient cpu")],
        "why-tainted": [
            ("PodToleratesNodeTaints", "node(s) had taint {gpu: only}, that the pod didn't tolerate")
        ],
    }
    assert [n["node"] for n in result["feasible"]] == ["why-ok-2"]
    assert result["policy"] == "built-in default (kube-scheduler 1.20)"
    assert result["scheduler_name"] == scheduler

    # A SchedulerPolicy for the pod's scheduler name is the policy explain runs.
    policy = {
        "apiVersion": "kubesched.io/v1alpha1",
        "kind": "SchedulerPolicy",
        "metadata": {"name": scheduler},
        "spec": {"schedulerName": scheduler, "predicates": [{"name": "PodFitsResources"}], "priorities": []},
    }
    await _create(api, "/apis/kubesched.io/v1alpha1/schedulerpolicies", policy)
    try:
        relaxed = await _explain(control_plane, f"{namespace}/picky")
    finally:
        await request(api, "DELETE", f"/apis/kubesched.io/v1alpha1/schedulerpolicies/{scheduler}")
    assert relaxed["policy"].startswith(f"SchedulerPolicy {scheduler}")
    # Only the mandatory predicates and PodFitsResources now: the node selector no longer counts.
    assert {r["node"] for r in relaxed["rejected"]} == {"why-cordoned", "why-ok", "why-small", "why-tainted"}
    assert sorted(n["node"] for n in relaxed["feasible"]) == ["why-hdd", "why-ok-2"]

    table = await asyncio.to_thread(_explain_cli, control_plane, f"{namespace}/picky")
    assert table.returncode == 0, table.stderr
    rows = [" ".join(line.split()) for line in table.stdout.splitlines()]
    assert (
        "why-tainted PodToleratesNodeTaints node(s) had taint {gpu: only}, that the pod didn't tolerate"
        in rows
    )
    missing = await asyncio.to_thread(_explain_cli, control_plane, f"{namespace}/nope")
    assert missing.returncode == 1 and f"pod {namespace}/nope not found" in missing.stderr
