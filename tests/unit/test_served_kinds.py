"""Kopf is handed only the kinds the server serves (app/discovery.py), so that it has no "Unresolved
resources" to warn about: PodDisruptionBudgets are policy/v1beta1 on Kubernetes 1.20, policy/v1
from 1.25; CSIStorageCapacity is v1 from 1.24, and 1.20 serves storage.k8s.io/v1 without it."""

from __future__ import annotations

from typing import Any, cast

import pytest
from kubernetes_asyncio.client import ApiClient

from kubesched.app import discovery as discovery_module
from kubesched.app.discovery import kinds_served, served_group_versions, served_kinds, served_resources
from kubesched.model.kinds import BUDGET_KIND, WATCHED_OBJECTS


def group_list(*group_versions: str) -> dict[str, Any]:
    """An APIGroupList, as GET /apis answers."""
    groups: dict[str, list[str]] = {}
    for group_version in group_versions:
        groups.setdefault(group_version.split("/")[0], []).append(group_version)
    return {
        "kind": "APIGroupList",
        "apiVersion": "v1",
        "groups": [
            {
                "name": name,
                "versions": [{"groupVersion": gv, "version": gv.split("/")[1]} for gv in versions],
                "preferredVersion": {"groupVersion": versions[0], "version": versions[0].split("/")[1]},
            }
            for name, versions in groups.items()
        ],
    }


def resource_list(group_version: str, *plurals: str) -> dict[str, Any]:
    """An APIResourceList, as GET /apis/<group>/<version> answers."""
    resources = [{"name": plural, "namespaced": True, "kind": "", "verbs": ["list"]} for plural in plurals]
    return {
        "kind": "APIResourceList",
        "apiVersion": "v1",
        "groupVersion": group_version,
        "resources": resources,
    }


# GET /apis and GET /apis/<group version>, for the kinds kubesched watches (and a few it does not).
Discovery = dict[str, dict[str, Any]]
KUBERNETES_1_20: Discovery = {
    "/apis": group_list("apps/v1", "storage.k8s.io/v1", "storage.k8s.io/v1beta1", "policy/v1beta1"),
    "/apis/apps/v1": resource_list("apps/v1", "deployments", "replicasets", "statefulsets"),
    # CSIStorageCapacity was storage.k8s.io/v1alpha1 in 1.20, a version served only on demand.
    "/apis/storage.k8s.io/v1": resource_list(
        "storage.k8s.io/v1", "csidrivers", "csinodes", "storageclasses", "volumeattachments"
    ),
    "/apis/storage.k8s.io/v1beta1": resource_list(
        "storage.k8s.io/v1beta1", "csidrivers", "csinodes", "storageclasses", "volumeattachments"
    ),
    "/apis/policy/v1beta1": resource_list("policy/v1beta1", "poddisruptionbudgets", "podsecuritypolicies"),
}
KUBERNETES_1_25: Discovery = {
    "/apis": group_list("apps/v1", "storage.k8s.io/v1", "storage.k8s.io/v1beta1", "policy/v1"),
    "/apis/apps/v1": resource_list("apps/v1", "deployments", "replicasets", "statefulsets"),
    "/apis/storage.k8s.io/v1": resource_list(
        "storage.k8s.io/v1", "csidrivers", "csinodes", "csistoragecapacities", "storageclasses"
    ),
    "/apis/storage.k8s.io/v1beta1": resource_list("storage.k8s.io/v1beta1", "csistoragecapacities"),
    "/apis/policy/v1": resource_list("policy/v1", "poddisruptionbudgets"),
}
KUBERNETES_1_32: Discovery = {
    "/apis": group_list("apps/v1", "storage.k8s.io/v1", "policy/v1"),
    "/apis/apps/v1": resource_list("apps/v1", "deployments", "replicasets", "statefulsets"),
    "/apis/storage.k8s.io/v1": resource_list(
        "storage.k8s.io/v1", "csidrivers", "csinodes", "csistoragecapacities", "storageclasses"
    ),
    "/apis/policy/v1": resource_list("policy/v1", "poddisruptionbudgets"),
}


def answering(discovery: Discovery, asked: list[str] | None = None) -> Any:
    """A stand-in for kube.client.request that answers from `discovery` (404 for other paths)."""

    async def request(api: Any, method: str, path: str, **_: Any) -> tuple[int, Any]:
        if asked is not None:
            asked.append(f"{method} {path}")
        return (200, discovery[path]) if path in discovery else (404, {"kind": "Status"})

    return request


def versions(kinds: tuple[Any, ...], kind: str) -> list[str]:
    return [watched.api_version for watched in kinds if watched.kind == kind]


@pytest.mark.parametrize(
    ("discovery", "budgets", "capacities"),
    [
        (KUBERNETES_1_20, ["policy/v1beta1"], []),
        (KUBERNETES_1_25, ["policy/v1"], ["storage.k8s.io/v1", "storage.k8s.io/v1beta1"]),
        (KUBERNETES_1_32, ["policy/v1"], ["storage.k8s.io/v1"]),
    ],
    ids=["1.20", "1.25", "1.32"],
)
async def test_only_the_served_resources_are_watched(
    monkeypatch: pytest.MonkeyPatch, discovery: Discovery, budgets: list[str], capacities: list[str]
) -> None:
    monkeypatch.setattr(discovery_module, "request", answering(discovery))
    kinds = await served_kinds(cast(ApiClient, None))
    assert versions(kinds, BUDGET_KIND) == budgets
    assert versions(kinds, "CSIStorageCapacity") == capacities
    # Everything else is served by all three, PodGroups and ElasticQuotas excepted, whose CRDs none has.
    left_out = {k.kind for k in WATCHED_OBJECTS if k not in kinds}
    assert left_out - {BUDGET_KIND, "CSIStorageCapacity"} == {"PodGroup", "ElasticQuota"}
    assert "CSIDriver" in {k.kind for k in kinds}


def test_pod_groups_are_watched_once_their_crd_is_installed() -> None:
    served = served_resources(
        "scheduling.x-k8s.io/v1alpha1",
        resource_list("scheduling.x-k8s.io/v1alpha1", "podgroups", "podgroups/status"),
    )
    assert "PodGroup" in {kind.kind for kind in kinds_served(WATCHED_OBJECTS, served)}


def test_the_core_api_is_always_served() -> None:
    kinds = kinds_served(WATCHED_OBJECTS, frozenset())
    assert {kind.api_version for kind in kinds} == {"v1"}
    assert {kind.kind for kind in kinds} >= {"Service", "PersistentVolume"}


@pytest.mark.parametrize("reply", [None, [], {"kind": "Status"}, {"groups": {"policy": "v1"}}])
def test_a_reply_that_is_no_group_list_is_refused(reply: Any) -> None:
    with pytest.raises(ValueError, match="not an APIGroupList"):
        served_group_versions(reply)
    with pytest.raises(ValueError, match="not an APIResourceList"):
        served_resources("storage.k8s.io/v1", reply)


@pytest.mark.parametrize(
    "answer",
    [(403, "forbidden"), (200, "<html>"), OSError("connection refused")],
    ids=["forbidden", "not a group list", "unreachable"],
)
async def test_when_discovery_fails_every_kind_is_watched(
    monkeypatch: pytest.MonkeyPatch, answer: Any
) -> None:
    """As before discovery: Kopf then warns about the version it cannot find, and nothing is lost."""

    async def request(*_: Any, **__: Any) -> tuple[int, Any]:
        if isinstance(answer, Exception):
            raise answer
        return cast(tuple[int, Any], answer)

    monkeypatch.setattr(discovery_module, "request", request)
    assert await served_kinds(cast(ApiClient, None)) == WATCHED_OBJECTS


async def test_a_group_version_that_fails_its_discovery_leaves_every_kind_watched(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    discovery = {path: reply for path, reply in KUBERNETES_1_32.items() if path != "/apis/policy/v1"}
    monkeypatch.setattr(discovery_module, "request", answering(discovery))
    assert await served_kinds(cast(ApiClient, None)) == WATCHED_OBJECTS


async def test_discovery_asks_each_group_version_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """Only the group versions of watched kinds that the server serves: not the core API, not
    storage.k8s.io/v1beta1 on 1.32."""
    asked: list[str] = []
    monkeypatch.setattr(discovery_module, "request", answering(KUBERNETES_1_32, asked))
    assert versions(await served_kinds(cast(ApiClient, None)), BUDGET_KIND) == ["policy/v1"]
    assert asked[0] == "GET /apis"
    assert sorted(asked[1:]) == [
        "GET /apis/apps/v1",
        "GET /apis/policy/v1",
        "GET /apis/storage.k8s.io/v1",
    ]
