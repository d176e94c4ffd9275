"""ElasticQuotas on a real API server, with `kubesched run` as a process: KEP 9's story 1 (borrowing up
to max, then waiting with the quota named), a gang its quota cannot hold, and life under
scheduler-plugins' own CRD (scheduler_plugins_elasticquota_crd.yaml).

Upstream: kubernetes-sigs/scheduler-plugins, pkg/capacityscheduling/ and
test/integration/capacity_scheduling_test.go; kep/9-capacity-scheduling. Run with -s to read what was seen.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio
import yaml
from kubernetes_asyncio.client import ApiClient

from kubesched.kube.client import request
from kubesched_dev import fixtures as testing
from kubesched_dev.fixtures import CRD_PATH, create_nodes, install_crds, make_node, make_pod, wait_for

from .kubeapi import pods_by_name, wait_bound
from .kubesched_process import KubeschedProcess
from .podgroups import create_object, delete_namespace, failed_scheduling, member, node_of, pod_group

HERE = Path(__file__).parent
REPO = HERE.parents[1]
THEIRS = HERE / "scheduler_plugins_elasticquota_crd.yaml"
CRD_NAME = "elasticquotas.scheduling.x-k8s.io"
API = "/apis/scheduling.x-k8s.io/v1alpha1"
GPU = "example.com/gpu"


def quotas_path(namespace: str) -> str:
    return f"{API}/namespaces/{namespace}/elasticquotas"


def elastic_quota(
    name: str, namespace: str, min: Mapping[str, Any], max: Mapping[str, Any]
) -> dict[str, Any]:
    return {
        "apiVersion": "scheduling.x-k8s.io/v1alpha1",
        "kind": "ElasticQuota",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"min": dict(min), "max": dict(max)},
    }


async def create_quota(api: ApiClient, manifest: Mapping[str, Any]) -> None:
    status, reply = await request(api, "POST", quotas_path(manifest["metadata"]["namespace"]), manifest)
    assert status == 201, reply


async def used(api: ApiClient, namespace: str, name: str) -> dict[str, Any] | None:
    status, reply = await request(api, "GET", f"{quotas_path(namespace)}/{name}")
    assert status == 200, reply
    found: dict[str, Any] | None = (reply.get("status") or {}).get("used")
    return found


async def wait_used(api: ApiClient, namespace: str, name: str, expected: Mapping[str, str]) -> None:
    seen: list[Any] = []

    async def written() -> bool:
        seen.append(await used(api, namespace, name))
        return seen[-1] == expected

    await wait_for(written, timeout=60, interval=0.3, message=f"{namespace}/{name} status.used {expected}")
    print(f"{namespace}/{name} status.used: {seen[-1]}")


async def wait_refused(api: ApiClient, namespace: str, pod: str, needle: str) -> list[str]:
    messages: list[str] = []

    async def refused() -> bool:
        messages[:] = await failed_scheduling(api, namespace, pod)
        return any(needle in m for m in messages)

    await wait_for(refused, timeout=60, interval=0.3, message=f"{namespace}/{pod} refused: {needle}")
    print(f"{namespace}/{pod} FailedScheduling: {messages}")
    return messages


@pytest.fixture(scope="module")
def kubesched(control_plane: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[KubeschedProcess]:
    name = f"ks-quotas-{uuid.uuid4().hex[:8]}"
    proc = KubeschedProcess(control_plane.kubeconfig, name, tmp_path_factory.mktemp("quotas"))
    with proc:
        proc.wait_for_log("cache_synced")
        proc.wait_for_log("leader_elected")
        yield proc


@pytest_asyncio.fixture
async def namespaces(api: ApiClient) -> AsyncIterator[list[str]]:
    """Namespaces of this test; their quotas, groups and pods are deleted after it (no namespace
    controller runs), so that no quota's min lingers into another test's sum of mins."""
    made: list[str] = []
    yield made
    for namespace in made:
        status, reply = await request(api, "DELETE", quotas_path(namespace))
        assert status in (200, 404), reply
        await delete_namespace(api, namespace)


async def new_namespace(api: ApiClient, made: list[str], label: str) -> str:
    namespace = f"quota-{label}-{uuid.uuid4().hex[:6]}"
    await testing.create_namespace(api, namespace)
    made.append(namespace)
    return namespace


async def gpu_node(api: ApiClient, name: str) -> dict[str, str]:
    """A node of 10 GPUs only this test's pods select."""
    selector = {"quota-test": name}
    await create_nodes(api, [make_node(name, cpu="64", labels=selector, extended={GPU: "10"})])
    return selector


def with_gpus(manifest: dict[str, Any], gpus: int) -> dict[str, Any]:
    """`manifest` asking for `gpus` (an extended resource needs its limit equal to its request)."""
    resources = manifest["spec"]["containers"][0].setdefault("resources", {})
    resources.setdefault("requests", {})[GPU] = str(gpus)
    resources.setdefault("limits", {})[GPU] = str(gpus)
    return manifest


def gpu_pod(
    name: str, namespace: str, scheduler: str, gpus: int, selector: Mapping[str, str]
) -> dict[str, Any]:
    return with_gpus(make_pod(name, namespace, scheduler, node_selector=selector), gpus)


async def test_story_1_a_borrows_up_to_its_max_then_waits_naming_its_quota(
    api: ApiClient, kubesched: KubeschedProcess, namespaces: list[str]
) -> None:
    """KEP 9 story 1: quota A (min 4, max 6) borrows B's unused min (B: min 6, max 8, using 3)."""
    a, b = [await new_namespace(api, namespaces, x) for x in "ab"]
    selector = await gpu_node(api, f"{a}-node")
    await create_quota(api, elastic_quota("quota-a", a, {GPU: 4}, {GPU: 6}))
    await create_quota(api, elastic_quota("quota-b", b, {GPU: 6}, {GPU: 8}))
    scheduler = kubesched.scheduler_name
    await testing.create_pods(api, [gpu_pod("b0", b, scheduler, 3, selector)])
    await wait_bound(api, b, 1)
    await testing.create_pods(api, [gpu_pod(f"a{i}", a, scheduler, 2, selector) for i in range(3)])
    await wait_bound(api, a, 3)
    await testing.create_pods(api, [gpu_pod("a3", a, scheduler, 2, selector)])
    await wait_refused(api, a, "a3", f"ElasticQuota {a}/quota-a: over max: {GPU} 8 > 6")
    pods = await pods_by_name(api, a)
    assert not node_of(pods["a3"]), pods["a3"]
    await wait_used(api, a, "quota-a", {GPU: "6"})
    await wait_used(api, b, "quota-b", {GPU: "3"})

    # Deleting one of A's pods makes room: the waiting pod is tried again and bound.
    status, reply = await request(
        api, "DELETE", f"/api/v1/namespaces/{a}/pods/a0", query=[("gracePeriodSeconds", "0")]
    )
    assert status == 200, reply
    await wait_for(lambda: _bound(api, a, "a3"), timeout=60, interval=0.3, message="a3 bound once a0 is gone")
    await wait_used(api, a, "quota-a", {GPU: "6"})

    # A second quota in the namespace is ignored, and says so once.
    await create_quota(api, elastic_quota("quota-a2", a, {GPU: 1}, {GPU: 1}))

    async def ignored() -> list[dict[str, Any]]:
        status, body = await request(
            api,
            "GET",
            f"/api/v1/namespaces/{a}/events",
            query=[("fieldSelector", "involvedObject.name=quota-a2")],
        )
        assert status == 200, body
        return [e for e in body["items"] if e["reason"] == "IgnoredQuota"]

    (event,) = await wait_for(ignored, timeout=30, interval=0.3, message="IgnoredQuota event")
    print(f"IgnoredQuota: {event['message']}")
    assert event["type"] == "Warning" and "quota-a, older, is in force" in event["message"]
    assert event["involvedObject"]["kind"] == "ElasticQuota"


async def _bound(api: ApiClient, namespace: str, name: str) -> bool:
    return bool(node_of((await pods_by_name(api, namespace)).get(name, {"spec": {}})))


async def test_a_gang_its_quota_cannot_hold_binds_nothing(
    api: ApiClient, kubesched: KubeschedProcess, namespaces: list[str]
) -> None:
    namespace = await new_namespace(api, namespaces, "gang")
    selector = await gpu_node(api, f"{namespace}-node")
    await create_quota(api, elastic_quota("quota", namespace, {GPU: 3}, {GPU: 3}))
    await create_object(api, pod_group("g", namespace, 4))
    for i in range(4):
        manifest = member(
            f"m{i}", namespace, "g", kubesched.scheduler_name, cpu="100m", node_selector=selector
        )
        await create_object(api, with_gpus(manifest, 1))
    for i in range(4):
        await wait_refused(api, namespace, f"m{i}", f"ElasticQuota {namespace}/quota refuses its 4 members")
    await wait_used(api, namespace, "quota", {GPU: "0"})
    pods = await pods_by_name(api, namespace)
    assert not [name for name, p in pods.items() if node_of(p)], pods


async def test_under_scheduler_plugins_crd_quotas_admit_and_status_is_written(
    api: ApiClient, kubesched: KubeschedProcess, namespaces: list[str]
) -> None:
    theirs = yaml.safe_load(THEIRS.read_text())
    try:
        status, current = await request(api, "GET", f"{CRD_PATH}/{CRD_NAME}")
        assert status == 200, current
        theirs["metadata"]["resourceVersion"] = current["metadata"]["resourceVersion"]
        status, reply = await request(api, "PUT", f"{CRD_PATH}/{CRD_NAME}", theirs)
        assert status == 200, reply

        async def in_force() -> bool:
            status, crd = await request(api, "GET", f"{CRD_PATH}/{CRD_NAME}")
            columns = crd["spec"]["versions"][0].get("additionalPrinterColumns")
            return status == 200 and not columns  # theirs has none

        await wait_for(in_force, timeout=30, message="their CRD in force")
        namespace = await new_namespace(api, namespaces, "theirs")
        selector = await gpu_node(api, f"{namespace}-node")
        await create_quota(api, elastic_quota("quota", namespace, {GPU: 2}, {GPU: 2}))
        pods = [gpu_pod(f"p{i}", namespace, kubesched.scheduler_name, 2, selector) for i in range(2)]
        await testing.create_pods(api, pods)
        await wait_bound(api, namespace, 1)
        refused = "p1" if node_of((await pods_by_name(api, namespace))["p0"]) else "p0"
        await wait_refused(api, namespace, refused, f"ElasticQuota {namespace}/quota: over max: {GPU} 4 > 2")
        await wait_used(api, namespace, "quota", {GPU: "2"})
    finally:
        await install_crds(api, REPO / "crds")
