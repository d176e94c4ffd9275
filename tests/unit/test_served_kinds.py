"""Kopf is handed only the kinds whose API group version the server serves (app/handlers.py), so
that it has no "Unresolved resources" to warn about: PodDisruptionBudgets are policy/v1beta1 on
Kubernetes 1.20, policy/v1 from 1.25."""

from __future__ import annotations

from typing import Any, cast

import pytest
from kubernetes_asyncio.client import ApiClient

from kubesched.app import handlers
from kubesched.app.handlers import kinds_served, served_group_versions, served_kinds
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


KUBERNETES_1_20 = group_list("apps/v1", "storage.k8s.io/v1", "storage.k8s.io/v1beta1", "policy/v1beta1")
KUBERNETES_1_25 = group_list("apps/v1", "storage.k8s.io/v1", "policy/v1")


def budget_versions(kinds: tuple[Any, ...]) -> list[str]:
    return [kind.api_version for kind in kinds if kind.kind == BUDGET_KIND]


@pytest.mark.parametrize(
    ("discovery", "budgets"),
    [(KUBERNETES_1_20, ["policy/v1beta1"]), (KUBERNETES_1_25, ["policy/v1"])],
    ids=["1.20", "1.25"],
)
def test_only_the_served_versions_are_watched(discovery: dict[str, Any], budgets: list[str]) -> None:
    kinds = kinds_served(WATCHED_OBJECTS, served_group_versions(discovery))
    assert budget_versions(kinds) == budgets
    # Everything else is served in both: only the budget version that is not served is left out,
    # and PodGroups, whose CRD neither has installed.
    assert [k.kind for k in WATCHED_OBJECTS if k not in kinds and k.kind != BUDGET_KIND] == ["PodGroup"]


def test_pod_groups_are_watched_once_their_crd_is_installed() -> None:
    served = served_group_versions(group_list("apps/v1", "policy/v1", "scheduling.x-k8s.io/v1alpha1"))
    assert "PodGroup" in {kind.kind for kind in kinds_served(WATCHED_OBJECTS, served)}


def test_the_core_api_is_always_served() -> None:
    kinds = kinds_served(WATCHED_OBJECTS, frozenset())
    assert {kind.api_version for kind in kinds} == {"v1"}
    assert {kind.kind for kind in kinds} >= {"Service", "PersistentVolume"}


@pytest.mark.parametrize("reply", [None, [], {"kind": "Status"}, {"groups": {"policy": "v1"}}])
def test_a_reply_that_is_no_group_list_is_refused(reply: Any) -> None:
    with pytest.raises(ValueError, match="not an APIGroupList"):
        served_group_versions(reply)


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

    monkeypatch.setattr(handlers, "request", request)
    assert await served_kinds(cast(ApiClient, None)) == WATCHED_OBJECTS


async def test_discovery_asks_once(monkeypatch: pytest.MonkeyPatch) -> None:
    asked: list[str] = []

    async def request(api: Any, method: str, path: str, **_: Any) -> tuple[int, Any]:
        asked.append(f"{method} {path}")
        return 200, KUBERNETES_1_20

    monkeypatch.setattr(handlers, "request", request)
    assert budget_versions(await served_kinds(cast(ApiClient, None))) == ["policy/v1beta1"]
    assert asked == ["GET /apis"]
