"""Preemption with gangs (algorithm/preemption.py): a member of a placed PodGroup is evicted only
with its whole group, and a gang preempting through `schedule_batch` evicts only when all the
members it needs then fit.

The victim selection and ranking are kube-scheduler 1.20's
(pkg/scheduler/framework/plugins/defaultpreemption/default_preemption.go: selectVictimsOnNode,
filterPodsWithPDBViolation, pickOneNodeForPreemption), with a gang counted as one victim that
holds every member of its group; the groups are scheduler-plugins' coscheduling PodGroups
(apis/scheduling/v1alpha1/types.go).
"""

from __future__ import annotations

import random
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from kubesched.algorithm.batch import schedule_batch
from kubesched.algorithm.gang import GangFitError
from kubesched.algorithm.generic import FitError
from kubesched.algorithm.preemption import (
    ERR_REASON_NO_VICTIMS,
    MSG_NO_CANDIDATE,
    Candidate,
    Gangs,
    Preemption,
    PreemptionOutcome,
    attempt,
    preempt,
    select_victims_on_node,
)
from kubesched.kube.extender_transport import HTTPTransport
from kubesched.model.disruption import DisruptionBudget, budget_from_dict
from kubesched.model.nodeinfo import ClusterObjects, Snapshot
from kubesched.model.objects import Pod
from kubesched.model.podgroup import POD_GROUP_LABEL
from kubesched.policy.compile import compile_policy, default_algorithm
from kubesched_dev.fixtures import model_node, model_pod, node_info, snapshot

from ..extender_server import extender_processes

ALGORITHM = default_algorithm()
PREDICATES = ALGORITHM.predicates
PROFILES = {"default-scheduler": ALGORITHM}
EPOCH = datetime(2026, 1, 1, tzinfo=UTC)
NS = "ns"


def pod(
    name: str,
    cpu: str,
    priority: int,
    *,
    group: str = "",
    started: int = 0,
    labels: dict[str, str] | None = None,
) -> Pod:
    """A pod of namespace `ns` asking for `cpu`, in PodGroup `group` when given; `started` minutes
    after EPOCH stands for its start time."""
    tags = dict(labels or {})
    if group:
        tags[POD_GROUP_LABEL] = group
    made = model_pod(name, namespace=NS, cpu=cpu, priority=priority, labels=tags)
    return replace(made, created=EPOCH + timedelta(minutes=started))


def pod_group(name: str, min_member: Any) -> dict[str, Any]:
    return {
        "metadata": {
            "namespace": NS,
            "name": name,
            "uid": f"uid-{name}",
            "creationTimestamp": "2024-01-01T00:00:00Z",
        },
        "spec": {"minMember": min_member},
    }


def groups(**min_members: Any) -> dict[str, dict[str, Any]]:
    """PodGroups of namespace `ns` keyed as ClusterObjects.pod_groups is: name=minMember."""
    return {f"{NS}/{name}": pod_group(name, n) for name, n in min_members.items()}


def cluster(
    layout: Mapping[str, Sequence[Pod]], pod_groups: Mapping[str, Any] | None = None, cpu: str = "2"
) -> Snapshot:
    """Nodes of `cpu` cpus running the pods given (bound there: their nodeName set)."""
    infos = [
        node_info(model_node(name, cpu=cpu), [replace(p, node_name=name) for p in pods])
        for name, pods in layout.items()
    ]
    return snapshot(*infos, objects=ClusterObjects(pod_groups=dict(pod_groups or {})))


def fit_error(preemptor: Pod, snap: Snapshot) -> FitError:
    with pytest.raises(FitError) as caught:
        ALGORITHM.schedule(preemptor, snap, random.Random(0))
    return caught.value


def run(
    preemptor: Pod, snap: Snapshot, budgets: Sequence[DisruptionBudget] = (), seed: int = 0
) -> Preemption:
    return preempt(fit_error(preemptor, snap), snap, PREDICATES, budgets, random.Random(seed))


def names(pods: Sequence[Pod]) -> list[str]:
    return sorted(p.name for p in pods)


def budget(labels: dict[str, str], allowed: int = 0) -> DisruptionBudget:
    return budget_from_dict(
        {
            "metadata": {"namespace": NS, "name": "pdb"},
            "spec": {"selector": {"matchLabels": labels}},
            "status": {"disruptionsAllowed": allowed},
        }
    )


# ------------------------------------------------------------------------- a member is never evicted alone


@pytest.mark.parametrize("other_priority", [50, 100])
def test_a_member_stays_when_its_group_has_a_member_of_the_preemptors_priority_or_higher(
    other_priority: int,
) -> None:
    """g1 alone would make room on a, but its group-mate on b has a priority >= the preemptor's."""
    snap = cluster(
        {"a": [pod("g1", "2", 10, group="g")], "b": [pod("g2", "2", other_priority, group="g")]},
        groups(g=2),
    )
    result = run(pod("preemptor", "2", 50), snap)
    assert (result.node_name, result.victims) == ("", ())
    assert result.message == f"0/2 nodes are available: 2 {ERR_REASON_NO_VICTIMS}."


def test_a_lower_priority_gang_is_evicted_whole_when_that_makes_room() -> None:
    """Every bound member goes, on every node; c, where removing the member there leaves too little
    room, is no candidate."""
    snap = cluster(
        {
            "a": [pod("g1", "3", 10, group="g")],
            "b": [pod("g2", "3", 10, group="g")],
            "c": [pod("g3", "2", 10, group="g"), pod("high", "2", 200)],
        },
        groups(g=3),
        cpu="4",
    )
    preemptor = pod("preemptor", "3", 100)
    for seed in range(6):  # whichever node the dry run starts from
        result = run(preemptor, snap, seed=seed)
        assert result.node_name in ("a", "b"), result
        assert names(result.victims) == ["g1", "g2", "g3"]
    info = snap.get("c")
    assert info is not None
    found = select_victims_on_node(
        preemptor, info, snap, PREDICATES, [p.prefilter(preemptor, snap) for p in PREDICATES]
    )
    assert found == ("Insufficient cpu",)


def test_a_gang_is_reprieved_or_evicted_as_a_unit() -> None:
    """Adding g1 back alone would leave room for the preemptor: pod by pod, g1b alone would go."""
    snap = cluster(
        {
            "a": [pod("g1", "1", 10, group="g"), pod("g1b", "1", 10, group="g")],
            "b": [pod("g2", "2", 10, group="g")],
        },
        groups(g=3),
    )
    result = run(pod("preemptor", "1", 100), snap)
    assert result.node_name in ("a", "b")
    assert names(result.victims) == ["g1", "g1b", "g2"]


def test_the_cheaper_node_wins_when_the_gang_is_counted_whole() -> None:
    """On a one victim of priority 10 would do, but it brings three group-mates: b's two plain pods
    of the same priority cost less (smallest sum of priorities)."""
    layout = {
        "a": [pod("g1", "2", 10, group="g")],
        "b": [pod("p1", "1", 10), pod("p2", "1", 10)],
        "c": [pod("g2", "2", 10, group="g")],
        "d": [pod("g3", "2", 10, group="g")],
        "e": [pod("g4", "2", 10, group="g")],
    }
    preemptor = pod("preemptor", "2", 100)
    result = run(preemptor, cluster(layout, groups(g=4)))
    assert (result.node_name, names(result.victims)) == ("b", ["p1", "p2"])
    # The same pods with no PodGroup: one victim beats two.
    plain = run(preemptor, cluster(layout))
    assert plain.node_name in ("a", "c", "d", "e") and len(plain.victims) == 1


def test_a_budget_covering_an_off_node_member_counts_as_a_violation() -> None:
    """filterPodsWithPDBViolation over the whole victim set: the PDB covers g2, which runs on c."""
    layout = {
        "a": [pod("g1", "2", 10, group="g")],
        "b": [pod("plain", "2", 50)],
        "c": [pod("g2", "2", 10, group="g", labels={"app": "db"})],
    }
    snap = cluster(layout, groups(g=2))
    preemptor = pod("preemptor", "2", 100)
    assert run(preemptor, snap).node_name in ("a", "c")  # without the budget the gang costs less
    covered = (budget({"app": "db"}),)
    result = run(preemptor, snap, covered)
    assert (result.node_name, names(result.victims)) == ("b", ["plain"])
    info = snap.get("a")
    assert info is not None
    found = select_victims_on_node(
        preemptor, info, snap, PREDICATES, [p.prefilter(preemptor, snap) for p in PREDICATES], covered
    )
    assert isinstance(found, Candidate)
    assert (names(found.victims), found.num_pdb_violations) == (["g1", "g2"], 1)


@pytest.mark.parametrize(
    "pod_groups",
    [{}, groups(ghost=1), groups(ghost=0), {f"{NS}/ghost": {"metadata": {"namespace": NS, "name": "ghost"}}}],
    ids=["missing", "a group of one", "invalid minMember", "no spec"],
)
def test_pods_naming_a_group_that_is_no_gang_are_plain_victims(pod_groups: dict[str, Any]) -> None:
    layout = {"a": [pod("m1", "2", 10, group="ghost")], "b": [pod("m2", "2", 200, group="ghost")]}
    result = run(pod("preemptor", "2", 100), cluster(layout, pod_groups))
    assert (result.node_name, names(result.victims)) == ("a", ["m1"])
    # As a gang, m1 may not go without m2, which outranks the preemptor.
    assert run(pod("preemptor", "2", 100), cluster(layout, groups(ghost=2))).node_name == ""


def test_the_preemptors_own_group_is_never_its_victim() -> None:
    """A member beyond minMember that preempts alone does not evict its group-mates, whatever
    their priority."""
    snap = cluster(
        {"a": [pod("mate", "2", 10, group="g")], "b": [pod("mate2", "2", 10, group="g")]}, groups(g=2)
    )
    result = run(pod("extra", "2", 100, group="g"), snap)
    assert result.node_name == "" and result.victims == ()
    assert Gangs.of(pod("outsider", "2", 100), snap).evictable == frozenset({f"{NS}/g"})


def test_a_terminating_member_is_a_plain_pod() -> None:
    """bound_members leaves out members being deleted: one may be a victim alone."""
    leaving = replace(pod("g1", "2", 10, group="g"), deleting=True)
    snap = cluster({"a": [leaving], "b": [pod("g2", "2", 200, group="g")]}, groups(g=2))
    result = run(pod("preemptor", "2", 100), snap)
    assert (result.node_name, names(result.victims)) == ("a", ["g1"])


# ------------------------------------------------------------------------- a gang preempting in a batch


def batch(pods: Sequence[Pod], snap: Snapshot) -> list[Any]:
    outcomes, _ = schedule_batch(PROFILES, pods, snap, random.Random(0), 0)
    return outcomes


def high_gang(n: int) -> list[Pod]:
    return [pod(f"h{i}", "2", 100, group="hi") for i in range(1, n + 1)]


def test_a_high_priority_gang_evicts_when_every_member_then_fits() -> None:
    """Three members, three full nodes: the plain pod on c and the whole low gang (l1 on a, l2 on b)
    go; the member nominated where the low gang's other member ran needs no victim of its own."""
    snap = cluster(
        {
            "a": [pod("l1", "2", 0, group="lo")],
            "b": [pod("l2", "2", 0, group="lo")],
            "c": [pod("low", "2", 0)],
        },
        {**groups(hi=3), **groups(lo=2)},
    )
    outcomes = batch(high_gang(3), snap)
    assert all(isinstance(o, PreemptionOutcome) for o in outcomes), outcomes
    steps = [o.preemption for o in outcomes]
    victims = [v for step in steps for v in step.victims]
    assert names(victims) == ["l1", "l2", "low"]
    assert len({v.uid for v in victims}) == len(victims)  # each evicted once
    assert sorted(step.node_name for step in steps) == ["a", "b", "c"]
    assert sorted(len(step.victims) for step in steps) == [0, 1, 2]
    after = snap.without_pods(victims)
    for step in steps:  # every member's node is empty once the victims are gone
        info = after.get(step.node_name)
        assert info is not None and not info.pods, (
            step.node_name,
            list(info.pods.values()) if info else None,
        )


def test_a_gang_that_cannot_fit_whole_evicts_nothing() -> None:
    """h2 could only take a by evicting l1 alone, but l1's group-mate on c outranks the gang: no
    member preempts, and each says why its group is not placed."""
    layout = {
        "a": [pod("l1", "2", 0, group="lo")],
        "b": [pod("low", "2", 0)],
        "c": [pod("l2", "2", 150, group="lo")],
    }
    outcomes = batch(high_gang(2), cluster(layout, {**groups(hi=2), **groups(lo=2)}))
    for outcome in outcomes:
        assert isinstance(outcome, GangFitError), outcome
        assert not isinstance(outcome, PreemptionOutcome)
        assert outcome.summary().startswith("pod group ns/hi: only 0 of 2 members can be placed: 0/3 nodes")
    # With no PodGroup for l1 and l2, l1 is a plain victim and the gang gets its two nodes.
    plain = batch(high_gang(2), cluster(layout, groups(hi=2)))
    assert all(isinstance(o, PreemptionOutcome) for o in plain), plain
    assert names([v for o in plain for v in o.preemption.victims]) == ["l1", "low"]


# ------------------------------------------------------------------------- extenders


@pytest.fixture
def extender(tmp_path: Path) -> Iterator[Any]:
    with extender_processes(tmp_path) as start_one:
        yield start_one


def preempt_through(url: str, preemptor: Pod, snap: Snapshot) -> Preemption:
    algorithm = compile_policy(
        {
            "predicates": [{"name": "PodFitsResources"}],
            "priorities": [],
            "extenders": [{"urlPrefix": url, "preemptVerb": "preempt"}],
        },
        transport=HTTPTransport,
    )
    with pytest.raises(FitError) as caught:
        algorithm.schedule(preemptor, snap, random.Random(0))
    outcome = attempt(caught.value, snap, algorithm.predicates, (), random.Random(0), "", algorithm.extenders)
    assert isinstance(outcome, PreemptionOutcome)
    return outcome.preemption


def test_extenders_see_each_nodes_own_victims_and_the_gang_is_completed_after(extender: Any) -> None:
    snap = cluster(
        {"n1": [pod("g1", "2", 0, group="g")], "n2": [pod("g2", "2", 0, group="g")]},
        groups(g=2),
    )
    ext = extender({"preempt": {"drop": ["n2"]}})
    chosen = preempt_through(ext.url, pod("urgent", "2", 100), snap)
    assert (chosen.node_name, names(chosen.victims)) == ("n1", ["g1", "g2"])
    (call,) = ext.requests()
    sent = call["body"]["NodeNameToVictims"]
    assert {node: [p["metadata"]["name"] for p in v["Pods"]] for node, v in sent.items()} == {
        "n1": ["g1"],
        "n2": ["g2"],
    }


def test_an_extender_naming_a_member_of_a_gang_that_may_not_go_loses_that_node(extender: Any) -> None:
    """n1's plain pod is the dry run's choice; an extender answering with the protected gang member
    on n1 instead loses the candidate, rather than have the member evicted alone."""
    member = pod("g1", "1", 0, group="g")
    plain = pod("plain", "1", 0)
    snap = cluster(
        {"n1": [member, plain], "n2": [pod("g2", "2", 300, group="g")]},
        groups(g=2),
    )
    for victim, expected in ((plain, ("n1", ["plain"])), (member, ("", []))):
        reply = {"NodeNameToMetaVictims": {"n1": {"Pods": [{"UID": victim.uid}], "NumPDBViolations": 0}}}
        ext = extender({"preempt": {"reply": reply}})
        chosen = preempt_through(ext.url, pod("urgent", "1", 100), snap)
        assert (chosen.node_name, names(chosen.victims)) == expected, chosen
        assert chosen.message == ("" if expected[0] else MSG_NO_CANDIDATE)
        assert [r["verb"] for r in ext.requests()] == ["preempt"]
