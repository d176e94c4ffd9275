"""The PodGroup CRD (crds/scheduling.x-k8s.io_podgroups.yaml) on the real API server, the status writer
(kube/status_writer.py) against it with the shipped RBAC, and life under scheduler-plugins' own CRD
(scheduler_plugins_podgroup_crd.yaml): statuses written there, and a migration to ours with `kubectl
apply` that keeps a cluster's PodGroups.

Upstream: kubernetes-sigs/scheduler-plugins, apis/scheduling/v1alpha1/types.go (the API) and its
controller-gen CRD, whose schema has neither `status.scheduled` nor `status.conditions`.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
from collections.abc import AsyncIterator, Mapping
from pathlib import Path
from typing import Any

import pytest_asyncio
import yaml
from kubernetes_asyncio.client import ApiClient
from prometheus_client import REGISTRY

from kubesched.kube.client import MERGE_PATCH, request
from kubesched.kube.status_writer import pod_group_status_writer
from kubesched_dev.devcluster import LocalControlPlane
from kubesched_dev.fixtures import (
    CRD_PATH,
    install_crds,
    new_token_client,
    service_account_token,
    wait_for,
)

from .test_install import kubectl

HERE = Path(__file__).parent
REPO = HERE.parents[1]
OURS = REPO / "crds" / "scheduling.x-k8s.io_podgroups.yaml"
THEIRS = HERE / "scheduler_plugins_podgroup_crd.yaml"
CRD_NAME = "podgroups.scheduling.x-k8s.io"
GROUP_VERSION = "scheduling.x-k8s.io/v1alpha1"


def groups_path(namespace: str) -> str:
    return f"/apis/{GROUP_VERSION}/namespaces/{namespace}/podgroups"


def pod_group(name: str, min_member: int, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": GROUP_VERSION,
        "kind": "PodGroup",
        "metadata": {"name": name},
        "spec": {"minMember": min_member, **spec},
    }


def full_status(phase: str = "Scheduling", scheduled: int = 3, running: int = 0) -> dict[str, Any]:
    """A status as the scheduler writes it: coscheduling's fields plus kubesched's two."""
    return {
        "phase": phase,
        "scheduled": scheduled,
        "running": running,
        "succeeded": 0,
        "failed": 0,
        "scheduleStartTime": "2024-05-01T10:00:00Z",
        "occupiedBy": "ns/trainer",
        "conditions": [
            {
                "type": "Scheduled",
                "status": "True",
                "reason": "Placed",
                "message": f"{scheduled} of 3 members placed",
                "lastTransitionTime": "2024-05-01T10:00:01Z",
                "observedGeneration": 1,
            }
        ],
    }


def counted(result: str) -> float:
    return REGISTRY.get_sample_value("kubesched_podgroup_status_writes_total", {"result": result}) or 0.0


async def create_group(api: ApiClient, namespace: str, body: Mapping[str, Any]) -> dict[str, Any]:
    status, reply = await request(api, "POST", groups_path(namespace), body)
    assert status == 201, reply
    created: dict[str, Any] = reply
    return created


async def get_group(api: ApiClient, namespace: str, name: str) -> dict[str, Any]:
    status, reply = await request(api, "GET", f"{groups_path(namespace)}/{name}")
    assert status == 200, reply
    found: dict[str, Any] = reply
    return found


async def patch_status(
    api: ApiClient, namespace: str, name: str, status: Mapping[str, Any]
) -> tuple[int, Any]:
    path = f"{groups_path(namespace)}/{name}/status"
    return await request(api, "PATCH", path, {"status": status}, content_type=MERGE_PATCH)


async def schema_admits_min_member_zero(api: ApiClient, namespace: str) -> bool:
    """Which CRD is in force: theirs admits minMember 0, ours does not (a dry run stores nothing)."""
    status, reply = await request(
        api, "POST", groups_path(namespace), pod_group("probe", 0), query=[("dryRun", "All")]
    )
    assert status in (201, 422), (status, reply)
    return status == 201


async def established(api: ApiClient) -> bool:
    status, reply = await request(api, "GET", f"{CRD_PATH}/{CRD_NAME}")
    conditions = (reply.get("status") or {}).get("conditions") or [] if status == 200 else []
    return any(c.get("type") == "Established" and c.get("status") == "True" for c in conditions)


async def wait_for_crd(api: ApiClient, namespace: str, *, theirs: bool) -> None:
    """Until the CRD is Established and its schema (ours or theirs) validates new objects."""
    await wait_for(lambda: established(api), timeout=30, message=f"{CRD_NAME} Established")

    async def in_force() -> bool:
        return await schema_admits_min_member_zero(api, namespace) == theirs

    await wait_for(in_force, timeout=30, message=f"{'their' if theirs else 'our'} schema in force")


async def replace_crd(api: ApiClient, manifest: Mapping[str, Any]) -> None:
    status, current = await request(api, "GET", f"{CRD_PATH}/{CRD_NAME}")
    assert status == 200, current
    body = copy.deepcopy(dict(manifest))
    body["metadata"] = {**body["metadata"], "resourceVersion": current["metadata"]["resourceVersion"]}
    status, reply = await request(api, "PUT", f"{CRD_PATH}/{CRD_NAME}", body)
    assert status == 200, reply


@contextlib.asynccontextmanager
async def ours_restored(api: ApiClient, namespace: str) -> AsyncIterator[None]:
    """Whatever the test does to the CRD, ours is back (and in force) for the tests after it."""
    try:
        yield
    finally:
        await install_crds(api, REPO / "crds")
        await wait_for_crd(api, namespace, theirs=False)


@pytest_asyncio.fixture
async def groups_deleted(api: ApiClient, namespace: str) -> AsyncIterator[None]:
    """PodGroups would outlive the namespace (no namespace controller runs): delete them."""
    yield
    status, reply = await request(api, "DELETE", groups_path(namespace))
    assert status in (200, 404), reply


@pytest_asyncio.fixture
async def operator_api(api: ApiClient, control_plane: LocalControlPlane) -> AsyncIterator[ApiClient]:
    """A client with the token of the ServiceAccount that manifests/rbac.yaml binds."""
    manifests = REPO / "manifests"
    applied = await asyncio.to_thread(
        kubectl,
        control_plane,
        "apply",
        "-f",
        str(manifests / "namespace.yaml"),
        "-f",
        str(manifests / "rbac.yaml"),
    )
    assert applied.returncode == 0, applied.stderr
    token = await service_account_token(api, "kubesched", "kubesched")
    client = new_token_client(control_plane.server, control_plane.ca_file, token)
    try:
        yield client
    finally:
        await client.close()


# ------------------------------------------------------------------------------------------ our CRD


async def test_the_crd_is_served_with_its_names_and_status_subresource(api: ApiClient) -> None:
    status, reply = await request(api, "GET", f"/apis/{GROUP_VERSION}")
    assert status == 200, reply
    resources = {r["name"]: r for r in reply["resources"]}
    assert resources["podgroups"]["namespaced"] is True
    assert resources["podgroups"]["kind"] == "PodGroup"
    assert sorted(resources["podgroups"]["shortNames"]) == ["pg", "pgs"]
    assert resources["podgroups"]["singularName"] == "podgroup"
    assert resources["podgroups/status"]["verbs"] == ["get", "patch", "update"]


async def test_the_schema_refuses_min_member_zero_and_bad_fields_naming_them(
    api: ApiClient, namespace: str, groups_deleted: None
) -> None:
    status, reply = await request(api, "POST", groups_path(namespace), pod_group("zero", 0))
    assert status == 422, reply
    assert "spec.minMember" in reply and "greater than or equal to 1" in reply, reply
    bad = pod_group("bad", 2, minResources={"cpu": "lots", "memory": "1Gi"}, scheduleTimeoutSeconds=-1)
    status, reply = await request(api, "POST", groups_path(namespace), bad)
    assert status == 422, reply
    assert "spec.minResources.cpu" in reply and "spec.scheduleTimeoutSeconds" in reply, reply
    assert "spec.minResources.memory" not in reply, reply
    # What a coscheduling user writes is kept as written.
    good = pod_group(
        "good", 2, minResources={"cpu": "2", "memory": "1Gi", "nvidia.com/gpu": 4}, scheduleTimeoutSeconds=60
    )
    created = await create_group(api, namespace, good)
    assert created["spec"] == good["spec"]
    status, reply = await patch_status(api, namespace, "good", {"phase": "Gathering"})
    assert status == 422 and "status.phase" in reply, reply
    # The older releases' phases still validate.
    for phase in ("PreScheduling", "Scheduled"):
        status, reply = await patch_status(api, namespace, "good", {"phase": phase})
        assert status == 200, reply


async def test_kubectl_get_shows_the_printer_columns(
    api: ApiClient, control_plane: LocalControlPlane, namespace: str, groups_deleted: None
) -> None:
    await create_group(api, namespace, pod_group("gang", 3))
    status, reply = await patch_status(api, namespace, "gang", full_status("Running", scheduled=3, running=2))
    assert status == 200, reply
    result = await asyncio.to_thread(kubectl, control_plane, "get", "pg", "-n", namespace, "-o", "wide")
    assert result.returncode == 0, result.stderr
    header, row = (line.split() for line in result.stdout.splitlines())
    assert header == ["NAME", "PHASE", "MINMEMBER", "SCHEDULED", "RUNNING", "SUCCEEDED", "FAILED", "AGE"]
    assert row[:7] == ["gang", "Running", "3", "3", "2", "0", "0"], result.stdout
    result = await asyncio.to_thread(kubectl, control_plane, "get", "pgs", "-n", namespace)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split()[:6] == ["NAME", "PHASE", "MINMEMBER", "SCHEDULED", "RUNNING", "AGE"]


# ------------------------------------------------------------------------------------------ the writer


async def test_the_writer_writes_a_status_once_and_forgets_a_deleted_group(
    api: ApiClient, operator_api: ApiClient, namespace: str, groups_deleted: None
) -> None:
    """With the ServiceAccount's token alone: manifests/rbac.yaml grants podgroups/status patch."""
    await create_group(api, namespace, pod_group("gang", 3))
    key = f"{namespace}/gang"
    sent: list[tuple[str, Any]] = []

    async def send(method: str, path: str, body: Any, content_type: str) -> tuple[int, Any]:
        reply = await request(operator_api, method, path, body, content_type=content_type)
        sent.append((path, reply[0]))
        return reply

    written, gone = counted("written"), counted("gone")
    writer = pod_group_status_writer(operator_api, interval=0.05, send=send)
    runner = asyncio.create_task(writer.run())
    try:
        writer.set(key, full_status())

        async def stored() -> Any:
            return (await get_group(api, namespace, "gang")).get("status")

        assert await wait_for(stored, timeout=30, message="status written") == full_status(), sent
        # The same status again: nothing more is sent, however many rounds pass.
        for _ in range(3):
            writer.set(key, full_status())
            await writer.flush()
        assert [code for _, code in sent] == [200]
        assert counted("written") - written == 1

        writer.set(key, full_status("Running", scheduled=3, running=3))

        async def running() -> bool:
            return ((await stored()) or {}).get("phase") == "Running"

        await wait_for(running, timeout=30, message="second status written")
        assert [code for _, code in sent] == [200, 200]

        status, reply = await request(operator_api, "DELETE", f"{groups_path(namespace)}/gang")
        assert status == 403, reply  # the spec is the users'; the scheduler only writes status
        status, reply = await request(api, "DELETE", f"{groups_path(namespace)}/gang")
        assert status == 200, reply
        writer.set(key, full_status("Finished", scheduled=0))
        await wait_for(lambda: counted("gone") - gone == 1, timeout=30, message="404 counted as gone")
        assert writer.pending == []
        for _ in range(3):
            await writer.flush()
        assert [code for _, code in sent] == [200, 200, 404]
    finally:
        await writer.close()
        await asyncio.wait_for(runner, 30)


# ---------------------------------------------------------------------------- scheduler-plugins' CRD


async def test_under_scheduler_plugins_crd_our_status_is_accepted_with_our_fields_pruned(
    api: ApiClient, namespace: str, groups_deleted: None
) -> None:
    async with ours_restored(api, namespace):
        await replace_crd(api, yaml.safe_load(THEIRS.read_text()))
        await wait_for_crd(api, namespace, theirs=True)
        await create_group(api, namespace, pod_group("gang", 3))
        replies: list[tuple[int, Any]] = []

        async def send(method: str, path: str, body: Any, content_type: str) -> tuple[int, Any]:
            replies.append(await request(api, method, path, body, content_type=content_type))
            return replies[-1]

        writer = pod_group_status_writer(api, send=send)
        writer.set(f"{namespace}/gang", full_status())
        await writer.flush()
        ((status, reply),) = replies
        assert status == 200, reply
        coscheduling = {k: v for k, v in full_status().items() if k not in ("scheduled", "conditions")}
        assert reply["status"] == coscheduling
        assert (await get_group(api, namespace, "gang"))["status"] == coscheduling
        # Compared with what was sent, not with what was kept: not written again.
        for _ in range(3):
            writer.set(f"{namespace}/gang", full_status())
            await writer.flush()
        assert len(replies) == 1 and writer.pending == []


async def test_applying_ours_over_scheduler_plugins_crd_keeps_the_pod_groups(
    api: ApiClient, control_plane: LocalControlPlane, namespace: str, groups_deleted: None
) -> None:
    """What a user switching from coscheduling does: `kubectl apply` of ours over theirs."""
    async with ours_restored(api, namespace):
        applied = await asyncio.to_thread(kubectl, control_plane, "apply", "-f", str(THEIRS))
        assert applied.returncode == 0, applied.stderr
        await wait_for_crd(api, namespace, theirs=True)
        old = pod_group("old", 2, minResources={"cpu": "2"}, scheduleTimeoutSeconds=30)
        await create_group(api, namespace, old)
        await create_group(api, namespace, pod_group("zero", 0))  # their schema admits it
        for name in ("old", "zero"):
            status, reply = await patch_status(api, namespace, name, {"phase": "Running", "running": 2})
            assert status == 200, reply

        applied = await asyncio.to_thread(kubectl, control_plane, "apply", "-f", str(OURS))
        assert applied.returncode == 0, applied.stderr
        await wait_for_crd(api, namespace, theirs=False)
        status, crd = await request(api, "GET", f"{CRD_PATH}/{CRD_NAME}")
        assert status == 200, crd
        assert crd["spec"]["versions"] == yaml.safe_load(OURS.read_text())["spec"]["versions"]

        kept = await get_group(api, namespace, "old")
        assert (kept["spec"], kept["status"]) == (old["spec"], {"phase": "Running", "running": 2})
        assert (await get_group(api, namespace, "zero"))["spec"] == {"minMember": 0}
        listed = await asyncio.to_thread(kubectl, control_plane, "get", "pg", "-n", namespace, "-o", "name")
        assert listed.returncode == 0, listed.stderr
        assert sorted(listed.stdout.split()) == [
            "podgroup.scheduling.x-k8s.io/old",
            "podgroup.scheduling.x-k8s.io/zero",
        ]
        # Our status fields are now kept.
        status, reply = await patch_status(api, namespace, "old", full_status("Running", 2, 2))
        assert status == 200 and reply["status"] == full_status("Running", 2, 2), reply
        # A status write validates the whole object (1.20 has no validation ratcheting): a group
        # our schema refuses gets no status until its spec is fixed.
        status, reply = await patch_status(api, namespace, "zero", {"phase": "Pending"})
        assert status == 422 and "spec.minMember" in reply, reply
