"""What the scheduler knows of a PodGroup's members, and the status it writes (runtime/gangs.py).

Phases and counters follow scheduler-plugins' PodGroup controller
(pkg/controllers/podgroup_controller.go) with the phase meanings of apis/scheduling/v1alpha1/types.go.
"""

from __future__ import annotations

from typing import Any

import pytest

from kubesched.algorithm.gang import GangFitError
from kubesched.algorithm.generic import FitError
from kubesched.model.objects import Pod, pod_from_dict
from kubesched.model.podgroup import LEGACY_POD_GROUP_LABEL, POD_GROUP_LABEL, PodGroup, pod_group_from_dict
from kubesched.runtime.gangs import GangTracker


class Clock:
    def __init__(self) -> None:
        self.now = 1_700_000_000.0

    def __call__(self) -> float:
        return self.now


def group(min_member: int = 3, **spec: Any) -> PodGroup:
    raw = {
        "metadata": {
            "namespace": "ns",
            "name": "g",
            "uid": "g-uid",
            "creationTimestamp": "2026-01-01T00:00:00Z",
        },
        "spec": {"minMember": min_member, **spec},
    }
    return pod_group_from_dict(raw)


def member(name: str, node: str = "", phase: str = "Pending", priority: int = 0, owner: str = "") -> Pod:
    meta: dict[str, Any] = {
        "name": name,
        "namespace": "ns",
        "uid": f"uid-{name}",
        "labels": {POD_GROUP_LABEL: "g"},
        "creationTimestamp": "2026-01-01T00:00:00Z",
    }
    if owner:
        meta["ownerReferences"] = [{"kind": "Job", "name": owner, "uid": "j", "controller": True}]
    return pod_from_dict(
        {
            "metadata": meta,
            "spec": {"priority": priority, "containers": [{"name": "c"}], "nodeName": node},
            "status": {"phase": phase},
        }
    )


def tracker(found: PodGroup | None) -> tuple[GangTracker, Clock]:
    clock = Clock()
    return GangTracker(lambda key: found if key == "ns/g" else None, clock), clock


def condition(status: dict[str, Any]) -> dict[str, Any]:
    (only,) = status["conditions"]
    assert only["type"] == "Scheduled"
    return dict(only)


def short(pod: Pod, message: str = "only 1 of 3 members can be placed") -> GangFitError:
    return GangFitError(pod, 2, "ns/g", message, FitError(pod, 2, {"n1": ["Insufficient cpu"]}))


def test_too_few_members_wait_and_say_how_many_exist() -> None:
    gangs, _ = tracker(group(3))
    for name in ("a", "b"):
        gangs.observe(member(name))
    state = gangs.state("ns/g")
    assert (state.exist, state.scheduler_names) == (2, frozenset({"default-scheduler"}))
    status = gangs.status("ns/g")
    assert status is not None
    assert status["phase"] == "Pending"
    assert condition(status)["reason"] == "WaitingForMembers"
    assert condition(status)["message"] == "2 of 3 members exist"


def test_the_phase_follows_the_members() -> None:
    gangs, _ = tracker(group(2))
    gangs.observe(member("a", owner="train"))
    gangs.observe(member("b", owner="train"))
    gangs.bound("uid-a", "n1")  # our own bind confirmed by the watch
    status = gangs.status("ns/g")
    assert status is not None and (status["phase"], status["scheduled"]) == ("Unknown", 1)
    gangs.observe(member("b", node="n2"))
    status = gangs.status("ns/g")
    assert status is not None
    assert (status["phase"], status["scheduled"], status["occupiedBy"]) == ("Scheduling", 2, "ns/train")
    assert condition(status)["status"] == "True"
    gangs.observe(member("a", node="n1", phase="Running"))
    gangs.observe(member("b", node="n2", phase="Running"))
    status = gangs.status("ns/g")
    assert status is not None and (status["phase"], status["running"]) == ("Running", 2)
    # Finished members leave the pod watch with their final phase: they still count.
    gangs.observe(member("a", node="n1", phase="Succeeded"), deleted=True)
    gangs.observe(member("b", node="n2", phase="Succeeded"), deleted=True)
    status = gangs.status("ns/g")
    assert status is not None and (status["phase"], status["succeeded"]) == ("Finished", 2)


def test_a_member_lost_after_placement_shows_as_a_gap() -> None:
    gangs, _ = tracker(group(2))
    gangs.observe(member("a", node="n1"))
    gangs.observe(member("b", node="n2"))
    assert (gangs.status("ns/g") or {})["phase"] == "Scheduling"
    gangs.observe(member("b", node="n2"), deleted=True)  # deleted before it finished
    status = gangs.status("ns/g")
    assert status is not None and status["phase"] == "Unknown"
    assert condition(status)["reason"] == "ReplacingMembers"


def test_an_attempt_sets_the_start_time_and_the_reason() -> None:
    gangs, _ = tracker(group(3))
    pods = [member(n) for n in "abc"]
    for p in pods:
        gangs.observe(p)
    gangs.attempted(pods, [short(p) for p in pods])
    status = gangs.status("ns/g")
    assert status is not None and status["scheduleStartTime"] == "2023-11-14T22:13:20Z"
    assert condition(status)["reason"] == "Unschedulable"
    assert condition(status)["message"].startswith("pod group ns/g: only 1 of 3 members can be placed: 0/2")


def test_the_schedule_timeout_is_said_once_it_passes_and_marks_the_group_dirty() -> None:
    gangs, clock = tracker(group(2, scheduleTimeoutSeconds=30))
    pods = [member(n) for n in "ab"]
    for p in pods:
        gangs.observe(p)
    gangs.attempted(pods, [short(p, "only 1 of 2 members can be placed") for p in pods])
    gangs.status("ns/g")
    assert gangs.take_dirty() == ["ns/g"]
    clock.now += 10
    assert gangs.take_dirty() == []
    clock.now += 25
    assert gangs.take_dirty() == ["ns/g"]
    status = gangs.status("ns/g")
    assert status is not None and status["phase"] == "Pending"
    reason = condition(status)
    assert reason["reason"] == "ScheduleTimeout"
    assert "not placed within 30s" in reason["message"] and "still trying" in reason["message"]
    assert gangs.take_dirty() == []  # said once, not every round


def test_only_the_group_first_in_line_that_waited_for_room_may_hold_nodes() -> None:
    groups = {
        "ns/old": pod_group_from_dict(
            {
                "metadata": {"namespace": "ns", "name": "old", "creationTimestamp": "2026-01-01T00:00:00Z"},
                "spec": {"minMember": 2},
            }
        ),
        "ns/new": pod_group_from_dict(
            {
                "metadata": {"namespace": "ns", "name": "new", "creationTimestamp": "2026-02-01T00:00:00Z"},
                "spec": {"minMember": 2},
            }
        ),
    }
    clock = Clock()
    gangs = GangTracker(groups.get, clock)

    def of(group_name: str, name: str) -> Pod:
        raw = member(name)
        return pod_from_dict(
            {
                "metadata": {
                    "name": name,
                    "namespace": "ns",
                    "uid": f"uid-{name}",
                    "labels": {POD_GROUP_LABEL: group_name},
                },
                "spec": {"priority": raw.priority, "containers": [{"name": "c"}]},
            }
        )

    pods = {g: [of(g, f"{g}-{i}") for i in range(2)] for g in ("old", "new")}
    for members in pods.values():
        for p in members:
            gangs.observe(p)
        gangs.attempted(members, [short(p, "only 1 of 2 members can be placed") for p in members])
    assert not gangs.state("ns/old").may_reserve  # it has not waited long yet
    clock.now += 31
    assert gangs.state("ns/old").may_reserve
    assert not gangs.state("ns/new").may_reserve  # one group at a time
    # Waiting for members is not waiting for room: such a group holds nothing.
    gangs.attempted(pods["old"], [short(p, "1 of 2 members exist") for p in pods["old"]])
    assert not gangs.state("ns/old").may_reserve
    assert gangs.state("ns/new").may_reserve


def test_an_invalid_or_missing_group_gets_no_status() -> None:
    gangs, _ = tracker(group(0))
    gangs.observe(member("a"))
    assert gangs.status("ns/g") is None
    missing, _ = tracker(None)
    missing.observe(member("a"))
    assert missing.status("ns/g") is None
    assert missing.state("ns/g").group is None


def test_a_relabelled_pod_leaves_its_old_group() -> None:
    gangs, _ = tracker(group(2))
    gangs.observe(member("a"))
    assert gangs.state("ns/g").exist == 1
    plain = pod_from_dict(
        {"metadata": {"name": "a", "namespace": "ns", "uid": "uid-a"}, "spec": {"containers": []}}
    )
    gangs.observe(plain)
    assert gangs.state("ns/g").exist == 0
    assert not gangs.tracks("uid-a")


def test_a_gap_is_a_gap_even_when_no_status_was_computed_in_between() -> None:
    gangs, _ = tracker(group(2))
    gangs.observe(member("a", node="n1"))
    gangs.observe(member("b", node="n2"))
    gangs.observe(member("b", node="n2"), deleted=True)
    status = gangs.status("ns/g")
    assert status is not None and status["phase"] == "Unknown"


def test_members_whose_binds_are_under_way_count_as_scheduled() -> None:
    """A group the batch placed reads Scheduling at once, not Unknown while its binds go out."""
    assumed = {"uid-a": "n1", "uid-b": "n2"}
    gangs = GangTracker(lambda key: group(2) if key == "ns/g" else None, Clock(), assumed.get)
    gangs.observe(member("a"))
    gangs.observe(member("b"))
    status = gangs.status("ns/g")
    assert status is not None and (status["phase"], status["scheduled"]) == ("Scheduling", 2)
    assumed.clear()  # the binds failed and the assumptions were forgotten: a gap now
    status = gangs.status("ns/g")
    assert status is not None and (status["phase"], status["scheduled"]) == ("Unknown", 0)


# --- members that finish -------------------------------------------------------------------------
# The pod watch skips finished pods: a member that finishes leaves it as DELETED carrying its state
# from before. Its final phase comes from the watch of finished members (Scheduler.on_finished_member),
# in either order with that DELETED.


def running_pair() -> GangTracker:
    gangs, _ = tracker(group(2))
    for name, node in (("a", "n1"), ("b", "n2")):
        gangs.observe(member(name, node=node, phase="Running"))
    assert (gangs.status("ns/g") or {})["phase"] == "Running"
    return gangs


def counts(gangs: GangTracker) -> tuple[str, int, int, int, str]:
    status = gangs.status("ns/g")
    assert status is not None
    return (
        status["phase"],
        status["running"],
        status["succeeded"],
        status["failed"],
        condition(status)["reason"],
    )


@pytest.mark.parametrize("finished_first", [True, False])
def test_a_member_that_failed_counts_whichever_watch_tells_first(finished_first: bool) -> None:
    gangs = running_pair()
    failed = (member("a", node="n1", phase="Failed"), False)
    left = (member("a", node="n1", phase="Running"), True)  # what the pod watch's DELETED carries
    for pod, deleted in (failed, left) if finished_first else (left, failed):
        gangs.observe(pod, deleted=deleted)
    assert counts(gangs) == ("Failed", 1, 0, 1, "Placed")


def test_members_that_succeeded_finish_the_group() -> None:
    gangs = running_pair()
    gangs.observe(member("a", node="n1", phase="Succeeded"))
    assert counts(gangs) == ("Running", 1, 1, 0, "Placed")
    gangs.observe(member("b", node="n2", phase="Succeeded"))
    gangs.observe(member("b", node="n2", phase="Running"))  # the pod watch, late
    gangs.observe(member("b", node="n2", phase="Running"), deleted=True)
    assert counts(gangs) == ("Finished", 0, 2, 0, "Placed")
    status = gangs.status("ns/g")
    assert status is not None and condition(status)["message"] == "2 members placed, minMember 2"


def test_a_finished_member_is_forgotten_once_deleted() -> None:
    gangs = running_pair()
    gangs.observe(member("a", node="n1", phase="Succeeded"))
    gangs.drop("uid-a")  # the pod watch's re-listing lacks it: it finished, it stays
    assert gangs.tracks("uid-a") and counts(gangs)[2] == 1
    gangs.drop("uid-a", finished=True)  # the watch of finished members saw it deleted
    assert not gangs.tracks("uid-a") and counts(gangs)[2] == 0
    gangs.drop("uid-b")  # a running member gone in a gap
    assert not gangs.tracks("uid-b") and counts(gangs)[1] == 0


def test_the_finished_members_of_each_label_have_their_versions() -> None:
    gangs, _ = tracker(group(2))
    for name, label, phase in (
        ("new", POD_GROUP_LABEL, "Succeeded"),
        ("old", LEGACY_POD_GROUP_LABEL, "Failed"),
        ("live", POD_GROUP_LABEL, "Running"),
    ):
        raw = {
            "metadata": {"name": name, "namespace": "ns", "uid": name, "labels": {label: "g"}},
            "spec": {"containers": [], "nodeName": "n1"},
            "status": {"phase": phase},
        }
        raw["metadata"]["resourceVersion"] = "7"
        gangs.observe(pod_from_dict(raw))
    assert gangs.finished_versions(POD_GROUP_LABEL) == {"new": "7"}
    assert gangs.finished_versions(LEGACY_POD_GROUP_LABEL) == {"old": "7"}


def test_finished_and_failed_stay_when_the_members_are_cleaned_up() -> None:
    """As coscheduling's controller: a Job's cleanup deleting the finished members leaves the phase."""
    gangs = running_pair()
    for name, node in (("a", "n1"), ("b", "n2")):
        gangs.observe(member(name, node=node, phase="Succeeded"))
    assert counts(gangs) == ("Finished", 0, 2, 0, "Placed")
    for uid in ("uid-a", "uid-b"):
        gangs.drop(uid, finished=True)
    assert not gangs.tracks("uid-a") and counts(gangs) == ("Finished", 0, 2, 0, "Placed")


def test_a_group_whose_status_says_finished_is_not_rewritten() -> None:
    """After a restart the stored phase is all there is: it stays, whatever members remain."""
    raw_group = {
        "metadata": {"namespace": "ns", "name": "g", "uid": "g-uid"},
        "spec": {"minMember": 2},
        "status": {"phase": "Failed", "failed": 1},
    }
    gangs, _ = tracker(pod_group_from_dict(raw_group))
    gangs.observe(member("a", node="n1", phase="Running"))
    assert gangs.status("ns/g") is None
