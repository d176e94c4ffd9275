"""PodGroups as scheduler-plugins' coscheduling defines them (apis/scheduling/v1alpha1/types.go):
parsing, which group a pod belongs to, what its members add up to, its phase and `occupiedBy`."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

import pytest

from kubesched.model.objects import Pod, pod_from_dict
from kubesched.model.podgroup import (
    FAILED,
    FINISHED,
    LEGACY_POD_GROUP_LABEL,
    PENDING,
    POD_GROUP_LABEL,
    RUNNING,
    SCHEDULING,
    UNKNOWN,
    MemberCounts,
    PodGroup,
    count_members,
    group_key,
    group_name,
    occupied_by,
    phase,
    pod_group_from_dict,
)
from kubesched.model.resources import Resource
from kubesched_dev.fixtures import make_pod


def raw_group(spec: Any, **meta: Any) -> dict[str, Any]:
    metadata = {"namespace": "ns", "name": "g", "uid": "u", "creationTimestamp": "2024-01-01T00:00:00Z"}
    metadata.update(meta)
    return {
        "apiVersion": "scheduling.x-k8s.io/v1alpha1",
        "kind": "PodGroup",
        "metadata": metadata,
        "spec": spec,
    }


def member(
    name: str,
    phase: str = "Pending",
    *,
    node: str | None = None,
    deleting: bool = False,
    owners: Sequence[str] = (),
    labels: dict[str, str] | None = None,
    namespace: str = "ns",
) -> Pod:
    raw = make_pod(
        name, namespace, labels={POD_GROUP_LABEL: "g"} if labels is None else labels, node_name=node
    )
    raw["status"]["phase"] = phase
    if deleting:
        raw["metadata"]["deletionTimestamp"] = "2024-01-01T00:05:00Z"
    raw["metadata"]["ownerReferences"] = [
        {"apiVersion": "batch/v1", "kind": "Job", "name": owner, "uid": f"uid-{owner}", "controller": True}
        for owner in owners
    ]
    return pod_from_dict(raw)


# ------------------------------------------------------------------------------------- parsing


def test_a_valid_pod_group_is_parsed_whole() -> None:
    """types.go: PodGroupSpec's minMember, minResources (a ResourceList) and scheduleTimeoutSeconds."""
    group = pod_group_from_dict(
        raw_group(
            {"minMember": 3, "minResources": {"cpu": "1500m", "memory": "1Gi"}, "scheduleTimeoutSeconds": 0}
        )
    )
    assert group.error == ""
    assert (group.namespace, group.name, group.uid, group.key) == ("ns", "g", "u", "ns/g")
    assert group.min_member == 3
    assert group.min_resources == Resource(milli_cpu=1500, memory=1024**3)
    assert group.min_resources_raw == {"cpu": "1500m", "memory": "1Gi"}
    assert group.schedule_timeout_seconds == 0
    assert group.created == datetime(2024, 1, 1, tzinfo=UTC)


@pytest.mark.parametrize(
    ("spec", "error"),
    [
        pytest.param({"minMember": 0}, "spec.minMember must be at least 1, got 0", id="zero"),
        pytest.param({"minMember": -1}, "spec.minMember must be at least 1, got -1", id="negative"),
        pytest.param({"minMember": "3"}, "spec.minMember must be at least 1, got '3'", id="string"),
        pytest.param({"minMember": 2.0}, "spec.minMember must be at least 1, got 2.0", id="float"),
        pytest.param({"minMember": True}, "spec.minMember must be at least 1, got True", id="bool"),
        pytest.param({}, "spec.minMember must be at least 1, got 0", id="missing"),
        pytest.param(
            {"minMember": 2, "minResources": {"cpu": "lots"}},
            "spec.minResources: ",
            id="malformed-quantity",
        ),
        pytest.param(
            {"minMember": 2, "minResources": {"memory": "-1Gi"}},
            "spec.minResources: memory must not be negative, got '-1Gi'",
            id="negative-quantity",
        ),
        pytest.param(
            {"minMember": 2, "minResources": ["cpu", "1"]},
            "spec.minResources must be a map of resource names to quantities",
            id="resources-not-a-map",
        ),
        pytest.param(
            {"minMember": 2, "scheduleTimeoutSeconds": -5},
            "spec.scheduleTimeoutSeconds must be a non-negative integer, got -5",
            id="negative-timeout",
        ),
        pytest.param(
            {"minMember": 2, "scheduleTimeoutSeconds": "60"},
            "spec.scheduleTimeoutSeconds must be a non-negative integer, got '60'",
            id="string-timeout",
        ),
    ],
)
def test_what_cannot_be_used_goes_into_error_not_an_exception(spec: dict[str, Any], error: str) -> None:
    """types.go declares minMember an int32 and scheduleTimeoutSeconds a *int32: anything else, and a
    minMember below 1 (a group nothing could ever satisfy), makes the group invalid, with the field
    named so a user can find it."""
    group = pod_group_from_dict(raw_group(spec))
    assert error in group.error, group.error
    assert group.key == "ns/g"  # still identifiable, so its members can say what is wrong


def test_every_error_of_a_pod_group_is_reported_at_once() -> None:
    group = pod_group_from_dict(
        raw_group({"minMember": 0, "minResources": {"cpu": "x"}, "scheduleTimeoutSeconds": -1})
    )
    assert group.error.count("; ") == 2, group.error
    assert group.schedule_timeout_seconds is None
    assert group.min_resources == Resource()


@pytest.mark.parametrize(
    ("raw", "error"),
    [
        pytest.param(
            {"metadata": {"namespace": "ns", "name": "g"}, "spec": "minMember: 3"},
            "spec must be an object",
            id="spec-string",
        ),
        pytest.param({"metadata": ["ns", "g"], "spec": {"minMember": 3}}, "", id="metadata-list"),
        pytest.param(raw_group({"minMember": 3}, creationTimestamp=1704067200), "", id="timestamp-number"),
        pytest.param({}, "spec.minMember must be at least 1", id="empty"),
    ],
)
def test_a_mangled_object_is_parsed_without_raising(raw: dict[str, Any], error: str) -> None:
    """A snapshot file or a CRD installed without its schema can carry any shape: the parser's
    contract is an `error`, never an exception (an exception would fail the whole batch)."""
    group = pod_group_from_dict(raw)
    assert (error in group.error) if error else group.error == "", group.error


# ------------------------------------------------------------------------------------ membership


@pytest.mark.parametrize(
    ("labels", "key"),
    [
        ({POD_GROUP_LABEL: "g"}, "ns/g"),
        ({LEGACY_POD_GROUP_LABEL: "old"}, "ns/old"),
        ({POD_GROUP_LABEL: "new", LEGACY_POD_GROUP_LABEL: "old"}, "ns/new"),
        ({POD_GROUP_LABEL: "", LEGACY_POD_GROUP_LABEL: "old"}, "ns/old"),
        ({}, ""),
        ({"app": "g"}, ""),
    ],
)
def test_group_key_reads_the_new_label_first_then_the_legacy_one(labels: dict[str, str], key: str) -> None:
    """types.go's PodGroupLabel, `scheduling.x-k8s.io/pod-group`; releases before it used
    `pod-group.scheduling.sigs.k8s.io`. The group is in the pod's own namespace."""
    pod = member("p", labels=labels)
    assert group_key(pod) == key
    assert group_name(pod) == key.partition("/")[2]


def test_count_members_counts_as_coscheduling_status_does() -> None:
    """podgroup_controller.go getCurrentPodStats: running, succeeded and failed by phase; kubesched
    adds `scheduled` (bound and not terminated) and `exist` (not terminated, not being deleted)."""
    pods = [
        member("pending"),
        member("bound", node="n1"),
        member("running", "Running", node="n1"),
        member("running-2", "Running", node="n2"),
        member("done", "Succeeded", node="n2"),
        member("crashed", "Failed", node="n2"),
        member("going", "Running", node="n1", deleting=True),
    ]
    assert count_members(pods) == MemberCounts(exist=4, scheduled=3, running=2, succeeded=1, failed=1)
    assert count_members([]) == MemberCounts()


# ----------------------------------------------------------------------------------------- phase

GROUP = PodGroup("ns", "g", min_member=3)


@pytest.mark.parametrize(
    ("counts", "ever_placed", "expected"),
    [
        pytest.param(MemberCounts(exist=3), False, PENDING, id="pending-none-placed"),
        pytest.param(MemberCounts(exist=2), False, PENDING, id="pending-too-few-exist"),
        pytest.param(MemberCounts(exist=3, scheduled=3), False, SCHEDULING, id="scheduling-none-running"),
        pytest.param(MemberCounts(exist=3, scheduled=3, running=2), False, SCHEDULING, id="scheduling-some"),
        pytest.param(MemberCounts(exist=3, scheduled=3, running=3), False, RUNNING, id="running"),
        pytest.param(
            MemberCounts(exist=2, scheduled=2, running=2, succeeded=1), True, RUNNING, id="running-with-done"
        ),
        pytest.param(MemberCounts(succeeded=3), True, FINISHED, id="finished"),
        pytest.param(MemberCounts(succeeded=3, failed=1), True, FINISHED, id="finished-despite-a-failure"),
        pytest.param(MemberCounts(exist=2, scheduled=2, running=2, failed=1), True, FAILED, id="failed"),
        pytest.param(
            MemberCounts(exist=1, scheduled=1, running=1, succeeded=1, failed=1), True, FAILED, id="failed-2"
        ),
        pytest.param(MemberCounts(exist=3, scheduled=1), False, UNKNOWN, id="unknown-partly-placed"),
        pytest.param(MemberCounts(exist=3), True, UNKNOWN, id="unknown-lost-its-places"),
        pytest.param(
            MemberCounts(exist=3, scheduled=1, running=1, failed=1), True, UNKNOWN, id="unknown-fail"
        ),
    ],
)
def test_phase_for_every_phase_of_the_newest_release(
    counts: MemberCounts, ever_placed: bool, expected: str
) -> None:
    """podgroup_controller.go: Finished when minMember succeeded, else Failed when a member failed
    and failed + running + succeeded reach minMember, else Running when running + succeeded reach
    it; types.go's PodGroupScheduling (minMember scheduled, fewer running), PodGroupUnknown (part
    of minMember placed) and PodGroupPending."""
    assert phase(GROUP, counts, ever_placed) == expected


def test_phase_of_an_invalid_group_needs_one_member() -> None:
    invalid = PodGroup("ns", "g", min_member=0, error="spec.minMember must be at least 1, got 0")
    assert phase(invalid, MemberCounts(exist=1, scheduled=1, running=1), True) == RUNNING
    assert phase(invalid, MemberCounts(exist=1), False) == PENDING


def test_phase_follows_count_members() -> None:
    pods = [member("a", "Running", node="n1"), member("b", "Running", node="n1"), member("c", node="n2")]
    assert phase(GROUP, count_members(pods), True) == SCHEDULING
    pods[2] = member("c", "Running", node="n2")
    assert phase(GROUP, count_members(pods), True) == RUNNING


# ------------------------------------------------------------------------------------ occupiedBy


def test_occupied_by_names_the_owners_sorted_and_once() -> None:
    """podgroup_controller.go fillOccupiedObj: each owner reference as `namespace/name`, sorted,
    joined with ","."""
    pods = [
        member("a", owners=["job-b"]),
        member("b", owners=["job-a", "job-b"]),
        member("c", owners=["job-b"]),
    ]
    assert occupied_by(pods) == "ns/job-a,ns/job-b"
    assert occupied_by([member("orphan")]) == ""
    assert occupied_by([]) == ""
