"""PodGroups and their members on a real API server, for the gang tests: manifests, and reading back
what the scheduler wrote (pod conditions, events, PodGroup statuses) while waiting for it."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Mapping
from typing import Any

from kubernetes_asyncio.client import ApiClient

from kubesched.kube.client import request
from kubesched.model.podgroup import POD_GROUP_LABEL
from kubesched_dev import fixtures as testing
from kubesched_dev.fixtures import make_pod, post_object

from .kubeapi import events_for, pods_by_name

POD_GROUPS = "/apis/scheduling.x-k8s.io/v1alpha1"

Pods = dict[str, dict[str, Any]]


def pod_group(
    name: str,
    namespace: str,
    min_member: int,
    *,
    min_resources: Mapping[str, str] | None = None,
    schedule_timeout_seconds: int | None = None,
) -> dict[str, Any]:
    """A coscheduling PodGroup manifest."""
    spec: dict[str, Any] = {"minMember": min_member}
    if min_resources is not None:
        spec["minResources"] = dict(min_resources)
    if schedule_timeout_seconds is not None:
        spec["scheduleTimeoutSeconds"] = schedule_timeout_seconds
    return {
        "apiVersion": "scheduling.x-k8s.io/v1alpha1",
        "kind": "PodGroup",
        "metadata": {"name": name, "namespace": namespace},
        "spec": spec,
    }


def member(
    name: str, namespace: str, group: str, scheduler_name: str, cpu: str = "1", **kwargs: Any
) -> dict[str, Any]:
    """A pod of `group`, requesting `cpu` (make_pod's other arguments pass through)."""
    labels = {**kwargs.pop("labels", {}), POD_GROUP_LABEL: group}
    return make_pod(name, namespace, scheduler_name, cpu=cpu, labels=labels, **kwargs)


async def create_object(api: ApiClient, manifest: Mapping[str, Any]) -> None:
    """Create a pod (with the PriorityClass it names) or a PodGroup."""
    if manifest["kind"] == "Pod":
        await testing.create_pods(api, [manifest])
        return
    namespace = manifest["metadata"]["namespace"]
    await post_object(api, f"{POD_GROUPS}/namespaces/{namespace}/podgroups", manifest)


async def get_pod_group(api: ApiClient, namespace: str, name: str) -> dict[str, Any]:
    status, body = await request(api, "GET", f"{POD_GROUPS}/namespaces/{namespace}/podgroups/{name}")
    assert status == 200, body
    return dict(body)


async def delete_namespace(api: ApiClient, namespace: str) -> None:
    """The namespace, its pods and its PodGroups (no namespace controller runs to delete those)."""
    status, body = await request(api, "DELETE", f"{POD_GROUPS}/namespaces/{namespace}/podgroups")
    assert status in (200, 404), body
    await testing.delete_namespace(api, namespace)


def node_of(pod: Mapping[str, Any]) -> str:
    return str(pod["spec"].get("nodeName") or "")


def scheduled_condition(pod: Mapping[str, Any]) -> dict[str, Any]:
    """The pod's PodScheduled condition, or {} when it has none."""
    conditions = (pod.get("status") or {}).get("conditions") or []
    return next((dict(c) for c in conditions if c.get("type") == "PodScheduled"), {})


def unschedulable_message(pod: Mapping[str, Any]) -> str:
    """The message of a PodScheduled=False condition, or "" when there is none."""
    condition = scheduled_condition(pod)
    return str(condition.get("message") or "") if condition.get("status") == "False" else ""


def group_condition(group: Mapping[str, Any]) -> dict[str, Any]:
    """The PodGroup's `Scheduled` condition, or {} when its status has none."""
    conditions = (group.get("status") or {}).get("conditions") or []
    return next((dict(c) for c in conditions if c.get("type") == "Scheduled"), {})


def describe(pods: Pods) -> str:
    """One line per pod: where it is bound, or what its PodScheduled condition says."""
    lines = []
    for name, pod in sorted(pods.items()):
        where = node_of(pod) or f"pending: {unschedulable_message(pod) or scheduled_condition(pod) or '-'}"
        lines.append(f"  {name}: {where}")
    return "\n".join(lines)


async def wait_pods(
    api: ApiClient,
    namespace: str,
    check: Callable[[Pods], bool],
    what: str,
    timeout: float = 30.0,
    interval: float = 0.2,
) -> Pods:
    """The namespace's pods once `check` holds; on timeout, an AssertionError showing the last seen."""
    deadline = time.monotonic() + timeout
    while True:
        pods = await pods_by_name(api, namespace)
        if check(pods):
            return pods
        if time.monotonic() >= deadline:
            raise AssertionError(
                f"{what}: not seen within {timeout} s; the pods last seen:\n{describe(pods)}"
            )
        await asyncio.sleep(interval)


async def wait_group(
    api: ApiClient,
    namespace: str,
    name: str,
    check: Callable[[dict[str, Any]], bool],
    what: str,
    timeout: float = 30.0,
) -> dict[str, Any]:
    """The PodGroup once `check` holds for it; on timeout, an AssertionError showing its last status."""
    deadline = time.monotonic() + timeout
    while True:
        group = await get_pod_group(api, namespace, name)
        if check(group):
            return group
        if time.monotonic() >= deadline:
            raise AssertionError(
                f"{what}: not seen within {timeout} s; status last seen: {group.get('status')}"
            )
        await asyncio.sleep(0.2)


async def failed_scheduling(api: ApiClient, namespace: str, pod: str) -> list[str]:
    """The messages of the pod's FailedScheduling events."""
    return [e["message"] for e in await events_for(api, namespace, pod) if e["reason"] == "FailedScheduling"]


def bound(pods: Pods, names: list[str]) -> list[str]:
    """Those of `names` that are bound."""
    return [name for name in names if name in pods and node_of(pods[name])]
