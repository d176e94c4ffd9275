"""The table of watched kinds agrees with what the cache keeps and with the API's paths."""

from __future__ import annotations

from dataclasses import fields
from pathlib import Path

import pytest
import yaml

from kubesched.model.kinds import (
    BUDGET_KIND,
    FINISHED_MEMBERS,
    NODES,
    NON_TERMINAL_PODS,
    PODS,
    WATCHED_OBJECTS,
    WatchedKind,
)
from kubesched.model.nodeinfo import ClusterObjects
from kubesched.model.podgroup import LEGACY_POD_GROUP_LABEL, POD_GROUP_LABEL
from kubesched.runtime.cache import SchedulerCache
from kubesched.tools.snapshot import ClusterState

ROOT = Path(__file__).resolve().parents[2]


def test_every_cluster_objects_field_is_filled_by_exactly_one_kind() -> None:
    """A kind may be listed in several API versions (CSIStorageCapacity v1 and v1beta1), always
    into the same field."""
    by_field: dict[str, set[str]] = {}
    for watched in WATCHED_OBJECTS:
        if watched.field is not None:
            by_field.setdefault(watched.field, set()).add(watched.kind)
    assert sorted(by_field) == sorted(f.name for f in fields(ClusterObjects))
    assert all(len(kinds) == 1 for kinds in by_field.values())
    versions = [(w.kind, w.api_version) for w in WATCHED_OBJECTS]
    assert len(set(versions)) == len(versions)


def test_a_kind_without_a_field_is_a_disruption_budget() -> None:
    assert {watched.kind for watched in WATCHED_OBJECTS if watched.field is None} == {BUDGET_KIND}


@pytest.mark.parametrize(
    ("watched", "api_version", "path", "query"),
    [
        (NODES, "v1", "/api/v1/nodes", {}),
        (PODS, "v1", "/api/v1/pods", {"fieldSelector": NON_TERMINAL_PODS}),
        (
            FINISHED_MEMBERS[LEGACY_POD_GROUP_LABEL],
            "v1",
            "/api/v1/pods",
            {
                "fieldSelector": "status.phase!=Pending,status.phase!=Running,status.phase!=Unknown",
                "labelSelector": f"{LEGACY_POD_GROUP_LABEL},!{POD_GROUP_LABEL}",
            },
        ),
        (WATCHED_OBJECTS[0], "v1", "/api/v1/services", {}),
        (WATCHED_OBJECTS[2], "apps/v1", "/apis/apps/v1/replicasets", {}),
        (WATCHED_OBJECTS[-1], "policy/v1beta1", "/apis/policy/v1beta1/poddisruptionbudgets", {}),
    ],
)
def test_coordinates(watched: WatchedKind, api_version: str, path: str, query: dict[str, str]) -> None:
    assert (watched.api_version, watched.path, watched.query) == (api_version, path, query)


def test_an_object_of_each_kind_lands_where_the_plugins_read_it() -> None:
    cache = SchedulerCache()
    for watched in WATCHED_OBJECTS:
        meta = {"name": watched.plural, **({"namespace": "ns"} if watched.namespaced else {})}
        obj = {"apiVersion": watched.api_version, "kind": watched.kind, "metadata": meta}
        if watched.field is None:
            cache.set_budget(f"ns/{watched.plural}", {**obj, "spec": {"maxUnavailable": 1}})
        else:
            cache.set_object(watched.kind, f"ns/{watched.plural}", obj)
    objects = cache.snapshot().objects
    for watched in WATCHED_OBJECTS:
        if watched.field is not None:
            assert getattr(objects, watched.field)[f"ns/{watched.plural}"]["kind"] == watched.kind
    assert len(cache.budgets()) == 1  # one PodDisruptionBudget, seen through both API versions


def test_the_cluster_role_lets_the_operator_list_and_watch_every_kind() -> None:
    """manifests/rbac.yaml: a kind added to the table without its rule would fail its listing with 403."""
    documents = yaml.safe_load_all((ROOT / "manifests" / "rbac.yaml").read_text(encoding="utf-8"))
    (role,) = [d for d in documents if d["kind"] == "ClusterRole"]
    granted = {
        (group, resource, verb)
        for rule in role["rules"]
        for group in rule["apiGroups"]
        for resource in rule["resources"]
        for verb in rule["verbs"]
    }
    for watched in (NODES, PODS, *WATCHED_OBJECTS):
        for verb in ("list", "watch"):
            assert (watched.group, watched.plural, verb) in granted, (watched.kind, verb)


def test_a_snapshot_file_holds_every_watched_kind_and_no_other() -> None:
    document = ClusterState([], []).document()
    document["objects"] = {watched.kind: [] for watched in WATCHED_OBJECTS}
    assert set(ClusterState.from_document(document).objects) == {w.kind for w in WATCHED_OBJECTS}
    document["objects"] = {"ConfigMap": []}
    with pytest.raises(ValueError, match="unknown kind"):
        ClusterState.from_document(document)
