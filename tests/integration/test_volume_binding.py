"""Volume binding on a real API server: local PVs of a WaitForFirstConsumer class are bound to the
claims of the pods placed on their nodes, each PV once; a claim to provision gets its node, and
its pod waits until the claim is bound (here the test plays the external provisioner)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator
from functools import partial
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio
from kubernetes_asyncio.client import ApiClient

from kubesched.kube.client import request
from kubesched_dev.fixtures import create_nodes, create_pods, make_node, make_pod, post_object, wait_for

from .kubeapi import events_for, pods_by_name
from .kubesched_process import KubeschedProcess

HOSTNAME = "kubernetes.io/hostname"
SELECTED_NODE = "volume.kubernetes.io/selected-node"
MERGE = "application/merge-patch+json"


@pytest.fixture
def kubesched(control_plane: Any, namespace: str, tmp_path: Path) -> Iterator[KubeschedProcess]:
    with KubeschedProcess(control_plane.kubeconfig, f"ks-{namespace}", tmp_path) as proc:
        proc.wait_for_log("cache_synced")
        yield proc


@pytest_asyncio.fixture(loop_scope="session")
async def cluster_scoped(api: ApiClient) -> AsyncIterator[list[str]]:
    """Paths of the PVs and StorageClasses a test makes, deleted afterwards (they outlive namespaces)."""
    made: list[str] = []
    yield made
    for path in made:
        await request(api, "DELETE", path)


async def storage_class(api: ApiClient, made: list[str], name: str, provisioner: str) -> None:
    body = {
        "apiVersion": "storage.k8s.io/v1",
        "kind": "StorageClass",
        "metadata": {"name": name},
        "provisioner": provisioner,
        "volumeBindingMode": "WaitForFirstConsumer",
    }
    await post_object(api, "/apis/storage.k8s.io/v1/storageclasses", body)
    made.append(f"/apis/storage.k8s.io/v1/storageclasses/{name}")


async def local_pv(
    api: ApiClient, made: list[str], name: str, node: str, class_name: str, claim_ref: Any = None
) -> None:
    spec: dict[str, Any] = {
        "capacity": {"storage": "1Gi"},
        "accessModes": ["ReadWriteOnce"],
        "storageClassName": class_name,
        "local": {"path": f"/mnt/{name}"},
        "nodeAffinity": {
            "required": {
                "nodeSelectorTerms": [
                    {"matchExpressions": [{"key": HOSTNAME, "operator": "In", "values": [node]}]}
                ]
            }
        },
    }
    if claim_ref is not None:
        spec["claimRef"] = claim_ref
    body = {"apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": name}, "spec": spec}
    await post_object(api, "/api/v1/persistentvolumes", body)
    made.append(f"/api/v1/persistentvolumes/{name}")
    # A new PV is Pending until the PV controller makes it Available: none runs here.
    await request(
        api,
        "PATCH",
        f"/api/v1/persistentvolumes/{name}/status",
        {"status": {"phase": "Available"}},
        content_type=MERGE,
    )


async def claim(api: ApiClient, namespace: str, name: str, class_name: str) -> None:
    body = {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "storageClassName": class_name,
            "accessModes": ["ReadWriteOnce"],
            "resources": {"requests": {"storage": "1Gi"}},
        },
    }
    await post_object(api, f"/api/v1/namespaces/{namespace}/persistentvolumeclaims", body)


def claimant(name: str, namespace: str, scheduler: str, claim_name: str) -> dict[str, Any]:
    pod = make_pod(name, namespace, scheduler, cpu="100m")
    pod["spec"]["volumes"] = [{"name": "data", "persistentVolumeClaim": {"claimName": claim_name}}]
    return pod


async def get(api: ApiClient, path: str) -> dict[str, Any]:
    status, body = await request(api, "GET", path)
    assert status == 200, body
    return dict(body)


async def event_reasons(api: ApiClient, namespace: str, pod: str) -> list[str]:
    return [e["reason"] for e in await events_for(api, namespace, pod)]


async def placed(api: ApiClient, namespace: str, names: list[str], timeout: float = 30) -> dict[str, str]:
    async def bound() -> dict[str, str] | None:
        pods = await pods_by_name(api, namespace)
        nodes = {n: str((pods.get(n) or {}).get("spec", {}).get("nodeName") or "") for n in names}
        return nodes if all(nodes.values()) else None

    result: dict[str, str] = await wait_for(bound, timeout=timeout, interval=0.2, message=f"{names} bound")
    return result


async def test_pods_get_the_local_pvs_of_their_nodes_each_pv_once(
    api: ApiClient, namespace: str, kubesched: KubeschedProcess, cluster_scoped: list[str]
) -> None:
    cls = f"local-{namespace}"
    await storage_class(api, cluster_scoped, cls, "kubernetes.io/no-provisioner")
    # vb-big is far emptier: without volume binding both pods would go there.
    await create_nodes(api, [make_node("vb-big", cpu="64"), make_node("vb-small", cpu="2")])
    await local_pv(api, cluster_scoped, f"pv-big-{namespace}", "vb-big", cls)
    await local_pv(api, cluster_scoped, f"pv-small-{namespace}", "vb-small", cls)
    for name in ("data-1", "data-2"):
        await claim(api, namespace, name, cls)
    await asyncio.sleep(0.5)  # the scheduler's watches bring the Available PVs before the pods
    await create_pods(
        api,
        [
            claimant("db-1", namespace, kubesched.scheduler_name, "data-1"),
            claimant("db-2", namespace, kubesched.scheduler_name, "data-2"),
        ],
    )
    nodes = await placed(api, namespace, ["db-1", "db-2"])
    assert sorted(nodes.values()) == ["vb-big", "vb-small"]
    # The PV the first pod took was never offered to the second: no failed attempt on the way.
    for pod_name in ("db-1", "db-2"):
        reasons = await wait_for(partial(event_reasons, api, namespace, pod_name), timeout=10)
        assert reasons == ["Scheduled"]

    pv_of_node = {"vb-big": f"pv-big-{namespace}", "vb-small": f"pv-small-{namespace}"}
    for pod_name, claim_name in (("db-1", "data-1"), ("db-2", "data-2")):
        pvc = await get(api, f"/api/v1/namespaces/{namespace}/persistentvolumeclaims/{claim_name}")
        pv_name = pv_of_node[nodes[pod_name]]
        pv = await get(api, f"/api/v1/persistentvolumes/{pv_name}")
        # Each pod's claim is bound to the PV on the pod's node, on both sides, as the PV controller would.
        assert pvc["spec"]["volumeName"] == pv_name
        assert pvc["metadata"]["annotations"]["pv.kubernetes.io/bind-completed"] == "yes"
        assert pvc["status"]["phase"] == "Bound" and pvc["status"]["capacity"] == {"storage": "1Gi"}
        ref = pv["spec"]["claimRef"]
        assert (ref["namespace"], ref["name"], ref["uid"]) == (namespace, claim_name, pvc["metadata"]["uid"])
        assert pv["metadata"]["annotations"]["pv.kubernetes.io/bound-by-controller"] == "yes"
        assert pv["status"]["phase"] == "Bound"
        assert SELECTED_NODE not in pvc["metadata"]["annotations"]  # a static binding: no provisioning


async def test_a_claim_to_provision_gets_its_node_and_the_pod_waits_for_the_volume(
    api: ApiClient, namespace: str, kubesched: KubeschedProcess, cluster_scoped: list[str]
) -> None:
    cls = f"dynamic-{namespace}"
    await storage_class(api, cluster_scoped, cls, "example.com/provisioner")
    await create_nodes(api, [make_node("vb-dyn", cpu="8")])
    await claim(api, namespace, "scratch", cls)
    await create_pods(api, [claimant("worker", namespace, kubesched.scheduler_name, "scratch")])
    claim_path = f"/api/v1/namespaces/{namespace}/persistentvolumeclaims/scratch"

    async def selected() -> dict[str, Any] | None:
        pvc = await get(api, claim_path)
        return pvc if (pvc["metadata"].get("annotations") or {}).get(SELECTED_NODE) else None

    pvc = await wait_for(selected, timeout=30, interval=0.2, message="selected-node annotation")
    assert pvc["metadata"]["annotations"][SELECTED_NODE] == "vb-dyn"
    # The provisioner gives up (it removes the annotation): the pod is not bound, and says why.
    await request(
        api, "PATCH", claim_path, {"metadata": {"annotations": {SELECTED_NODE: None}}}, content_type=MERGE
    )

    async def failed() -> str:
        events = await events_for(api, namespace, "worker")
        return next((e["message"] for e in events if "VolumeBinding" in e["message"]), "")

    message = await wait_for(failed, timeout=30, interval=0.2, message="FailedScheduling of worker")
    assert message == 'running PreBind plugin "VolumeBinding": provisioning failed for PVC "scratch"'
    assert not (await pods_by_name(api, namespace))["worker"]["spec"].get("nodeName")

    # The pod is tried again: the claim gets its node again, and this time the volume comes.
    pvc = await wait_for(selected, timeout=30, interval=0.2, message="selected-node annotation again")
    pv_name = f"pvc-{pvc['metadata']['uid']}"
    ref = {
        "kind": "PersistentVolumeClaim",
        "namespace": namespace,
        "name": "scratch",
        "uid": pvc["metadata"]["uid"],
    }
    await local_pv(api, cluster_scoped, pv_name, "vb-dyn", cls, claim_ref=ref)
    bind = {
        "metadata": {"annotations": {"pv.kubernetes.io/bind-completed": "yes"}},
        "spec": {"volumeName": pv_name},
    }
    status, body = await request(api, "PATCH", claim_path, bind, content_type=MERGE)
    assert status == 200, body
    assert await placed(api, namespace, ["worker"]) == {"worker": "vb-dyn"}
