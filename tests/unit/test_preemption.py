"""Preemption (kube-scheduler 1.20 defaultpreemption/default_preemption.go): which node, which
victims, and what the FailedScheduling message says; nominated pods in the batch."""

from __future__ import annotations

import random
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kubesched.algorithm.batch import schedule_batch, with_nominated
from kubesched.algorithm.generic import FitError
from kubesched.algorithm.preemption import (
    ERR_REASON_NO_VICTIMS,
    ERR_REASON_NOT_HELPFUL,
    MSG_PREEMPT_NEVER,
    MSG_TERMINATING,
    Preemption,
    PreemptionOutcome,
    attempt,
    num_candidates,
    pod_fits,
    preempt,
)
from kubesched.model.disruption import DisruptionBudget, budget_from_dict
from kubesched.model.nodeinfo import NodeInfo, Snapshot
from kubesched.model.objects import Pod
from kubesched.policy.compile import compile_policy, default_algorithm
from kubesched_dev.fixtures import model_node, model_pod, node_info, snapshot

ALGORITHM = default_algorithm()
PREDICATES = ALGORITHM.predicates
EPOCH = datetime(2026, 1, 1, tzinfo=UTC)


def pod(name: str, cpu: str, priority: int = 0, *, started: int = 0, **kwargs: Any) -> Pod:
    """A pod asking for `cpu`; `started` minutes after EPOCH stands for its start time."""
    made = model_pod(name, cpu=cpu, priority=priority, **kwargs)
    return replace(made, created=EPOCH + timedelta(minutes=started))


def fit_error(preemptor: Pod, snap: Snapshot) -> FitError:
    with pytest.raises(FitError) as caught:
        ALGORITHM.schedule(preemptor, snap, random.Random(0))
    return caught.value


def run(
    preemptor: Pod, snap: Snapshot, budgets: tuple[DisruptionBudget, ...] = (), nominated_node: str = ""
) -> Preemption:
    error = fit_error(preemptor, snap)
    return preempt(error, snap, PREDICATES, budgets, random.Random(0), nominated_node)


def names(pods: tuple[Pod, ...]) -> list[str]:
    return [p.name for p in pods]


def budget(namespace: str, labels: dict[str, str], allowed: int = 0) -> DisruptionBudget:
    return budget_from_dict(
        {
            "metadata": {"namespace": namespace, "name": "pdb"},
            "spec": {"selector": {"matchLabels": labels}},
            "status": {"disruptionsAllowed": allowed},
        }
    )


# ------------------------------------------------------------------------- choosing the node


@dataclass
class Case:
    name: str
    nodes: dict[str, list[Pod]]  # every node has 4 cpus
    node: str  # the node expected
    victims: list[str]
    budgets: tuple[DisruptionBudget, ...] = ()
    preemptor: Pod = field(default_factory=lambda: pod("preemptor", "2", 100))


CASES = [
    Case(
        "the lowest highest-victim priority wins",
        {
            "a": [pod("a1", "2", 10), pod("a2", "2", 50)],
            "b": [pod("b1", "2", 20), pod("b2", "2", 20)],
        },
        "a",
        ["a1"],
    ),
    Case(
        "fewest PDB violations before priorities",
        {
            "a": [pod("a1", "4", 1, labels={"app": "db"})],
            "b": [pod("b1", "4", 90)],
        },
        "b",
        ["b1"],
        budgets=(budget("default", {"app": "db"}),),
    ),
    Case(
        "a budget that allows the disruption is no violation",
        {
            "a": [pod("a1", "4", 1, labels={"app": "db"})],
            "b": [pod("b1", "4", 90)],
        },
        "a",
        ["a1"],
        budgets=(budget("default", {"app": "db"}, allowed=1),),
    ),
    Case(
        "a budget in another namespace covers nothing here",
        {
            "a": [pod("a1", "4", 1, labels={"app": "db"})],
            "b": [pod("b1", "4", 90)],
        },
        "a",
        ["a1"],
        budgets=(budget("elsewhere", {"app": "db"}),),
    ),
    Case(
        "then the smallest sum of priorities",
        {
            "a": [pod("a1", "1", 30), pod("a2", "1", 30), pod("a3", "2", 99)],
            "b": [pod("b1", "1", 30), pod("b2", "1", 5), pod("b3", "2", 99)],
        },
        "b",
        ["b1", "b2"],
        preemptor=pod("preemptor", "2", 50),
    ),
    Case(
        "then the fewest victims",
        {
            "a": [pod("a1", "1", 0), pod("a2", "1", 0), pod("a3", "2", 99)],
            "b": [pod("b1", "2", 0), pod("b2", "2", 99)],
        },
        "b",
        ["b1"],
        preemptor=pod("preemptor", "2", 50),
    ),
    Case(
        "then the latest start of the most important victims",
        {
            "a": [pod("a1", "4", 10, started=5)],
            "b": [pod("b1", "4", 10, started=30)],
            "c": [pod("c1", "4", 10, started=1)],
        },
        "b",
        ["b1"],
    ),
    Case(
        "only as many victims as needed, the least important ones",
        {"a": [pod(f"a{p}", "1", p) for p in (40, 10, 30, 20)]},
        "a",
        ["a20", "a10"],
    ),
    Case(
        "PDB violators are reprieved first",
        {
            "a": [
                pod("protected", "1", 10, labels={"app": "db"}),
                pod("free", "1", 20),
                pod("other", "2", 99),
            ]
        },
        "a",
        ["free"],
        budgets=(budget("default", {"app": "db"}),),
        preemptor=pod("preemptor", "1", 50),
    ),
    Case(
        "a pod of equal priority is never a victim",
        {
            "a": [pod("a1", "4", 100)],
            "b": [pod("b1", "2", 100), pod("b2", "2", 99)],
        },
        "b",
        ["b2"],
    ),
]


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_preemption_picks_the_node_and_victims_of_kube_scheduler(case: Case) -> None:
    snap = snapshot(*[node_info(model_node(n, cpu="4"), pods) for n, pods in case.nodes.items()])
    result = run(case.preemptor, snap, case.budgets)
    assert result.message == ""
    assert (result.node_name, names(result.victims)) == (case.node, case.victims)


def test_a_host_port_conflict_is_resolved_by_evicting_the_pod_holding_the_port() -> None:
    port = [{"containerPort": 80, "hostPort": 80}]
    snap = snapshot(node_info(model_node("a"), [pod("web", "100m", 1, ports=port), pod("idle", "100m", 1)]))
    result = run(pod("preemptor", "100m", 10, ports=port), snap)
    assert (result.node_name, names(result.victims)) == ("a", ["web"])


def test_anti_affinity_to_a_lower_priority_pod_is_resolved_by_evicting_it() -> None:
    anti = {
        "podAntiAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": [
                {"labelSelector": {"matchLabels": {"app": "noisy"}}, "topologyKey": "kubernetes.io/hostname"}
            ]
        }
    }
    host = {"kubernetes.io/hostname": "a"}
    snap = snapshot(
        node_info(
            model_node("a", cpu="8", labels=host),
            [pod("noisy", "1", 1, labels={"app": "noisy"}), pod("quiet", "1", 1)],
        )
    )
    result = run(pod("preemptor", "1", 10, affinity=anti), snap)
    assert (result.node_name, names(result.victims)) == ("a", ["noisy"])


# ------------------------------------------------------------------------- when it does not


def test_higher_or_equal_priority_pods_are_never_victims() -> None:
    snap = snapshot(
        node_info(model_node("a", cpu="2"), [pod("a1", "2", 10)]),
        node_info(model_node("b", cpu="2"), [pod("b1", "2", 11)]),
        node_info(model_node("c", cpu="1"), [pod("c1", "1", 0)]),  # too small even when emptied
    )
    result = run(pod("preemptor", "2", 10), snap)
    assert result.node_name == "" and result.victims == ()
    assert result.message == f"0/3 nodes are available: 1 Insufficient cpu, 2 {ERR_REASON_NO_VICTIMS}."


def test_preemption_policy_never_does_not_preempt() -> None:
    snap = snapshot(node_info(model_node("a", cpu="2"), [pod("low", "2", 0)]))
    result = run(pod("preemptor", "2", 10, preemptionPolicy="Never"), snap)
    assert result == Preemption(message=MSG_PREEMPT_NEVER)


def test_unresolvable_nodes_are_left_out() -> None:
    snap = snapshot(
        node_info(
            model_node("tainted", cpu="2", taints=[{"key": "k", "value": "v", "effect": "NoSchedule"}])
        ),
        node_info(model_node("other-zone", cpu="4", labels={"zone": "b"}), [pod("low", "2", 0)]),
        node_info(model_node("full", cpu="2", labels={"zone": "a"}), [pod("high", "2", 50)]),
    )
    result = run(pod("preemptor", "1", 10, nodeSelector={"zone": "a"}), snap)
    assert result.node_name == "" and result.clear_nomination
    assert result.message == (
        f"0/3 nodes are available: 1 {ERR_REASON_NO_VICTIMS}, 2 {ERR_REASON_NOT_HELPFUL}."
    )


def test_a_node_where_even_evicting_everything_is_not_enough_gives_its_reason() -> None:
    snap = snapshot(node_info(model_node("small", cpu="2"), [pod("low", "1", 0)]))
    result = run(pod("preemptor", "3", 10), snap)
    assert result.message == "0/1 nodes are available: 1 Insufficient cpu."


def test_a_cluster_of_one_priority_keeps_the_1_20_message() -> None:
    snap = snapshot(node_info(model_node("a", cpu="1"), [pod("peer", "1", 0)]))
    preemptor = pod("preemptor", "1", 0)
    outcome = attempt(fit_error(preemptor, snap), snap, PREDICATES)
    assert isinstance(outcome, PreemptionOutcome)
    assert outcome.summary() == "0/1 nodes are available: 1 Insufficient cpu."


def test_the_failed_scheduling_message_carries_the_preemption_outcome() -> None:
    snap = snapshot(node_info(model_node("a", cpu="1"), [pod("low", "1", 0)]))
    never = pod("never", "1", 5, preemptionPolicy="Never")
    outcome = attempt(fit_error(never, snap), snap, PREDICATES)
    assert outcome.summary() == (
        "0/1 nodes are available: 1 Insufficient cpu. preemption: not eligible due to preemptionPolicy=Never."
    )


def test_a_pod_whose_victims_are_still_terminating_waits() -> None:
    leaving = model_pod("leaving", cpu="2", priority=0, deleting=True)
    snap = snapshot(
        node_info(model_node("a", cpu="2"), [leaving]),
        node_info(model_node("b", cpu="2"), [pod("low", "2", 0)]),
    )
    preemptor = pod("preemptor", "2", 10)
    assert run(preemptor, snap, nominated_node="a") == Preemption(message=MSG_TERMINATING)
    # Without a nomination (or nominated elsewhere) it may preempt.
    assert run(preemptor, snap).node_name in ("a", "b")


def test_a_nominated_node_that_can_never_fit_does_not_hold_the_pod_back() -> None:
    leaving = model_pod("leaving", cpu="2", priority=0, deleting=True)
    snap = snapshot(
        node_info(model_node("cordoned", cpu="2", unschedulable=True), [leaving]),
        node_info(model_node("b", cpu="2"), [pod("low", "2", 0)]),
    )
    result = run(pod("preemptor", "2", 10), snap, nominated_node="cordoned")
    assert (result.node_name, names(result.victims)) == ("b", ["low"])


def test_attempt_leaves_errors_preemption_cannot_help_alone() -> None:
    snap = snapshot(node_info(model_node("a")))
    error = FitError(pod("p", "1", 10), 1, {}, pod_error="invalid resource requests: x")
    assert attempt(error, snap, PREDICATES) is error


def test_num_candidates_is_ten_percent_with_at_least_a_hundred() -> None:
    assert [num_candidates(n) for n in (5, 100, 500, 2000)] == [5, 100, 100, 200]


def test_budget_parsing() -> None:
    parsed = budget_from_dict(
        {
            "metadata": {"namespace": "ns", "name": "b"},
            "spec": {"selector": {"matchLabels": {"app": "x"}}},
            "status": {"disruptionsAllowed": 2, "disruptedPods": {"p1": "2021-01-01T00:00:00Z"}},
        }
    )
    assert (parsed.disruptions_allowed, parsed.disrupted_pods) == (2, frozenset({"p1"}))
    covered = replace(pod("p", "1", labels={"app": "x"}), namespace="ns")
    assert parsed.matches(covered)
    empty = budget_from_dict({"metadata": {"namespace": "ns"}, "spec": {"selector": {}}})
    assert not empty.matches(covered)  # an empty selector matches nothing


# ------------------------------------------------------------------------- nominated pods


def test_nominated_pods_hold_room_for_lower_or_equal_priority_pods_only() -> None:
    snap = snapshot(node_info(model_node("a", cpu="2")))
    nominee = pod("nominee", "2", 10)
    nominated = {nominee.uid: (nominee, "a")}
    for priority, fits in ((5, False), (10, False), (11, True)):
        incoming = pod(f"p{priority}", "1", priority)
        view = with_nominated(snap, incoming, nominated)
        info = view.get("a")
        assert info is not None
        assert (not pod_fits(incoming, info, view, PREDICATES, _states(incoming, view))) is fits
    # The nominee itself does not make room for itself.
    assert with_nominated(snap, nominee, nominated) is snap


def test_a_batch_keeps_the_room_a_preemptor_won_for_it() -> None:
    snap = snapshot(node_info(model_node("a", cpu="2"), [pod("low", "2", 0)]))
    high = pod("high", "2", 100)
    mid = pod("mid", "1", 50)
    outcomes, _ = schedule_batch({"default-scheduler": ALGORITHM}, [high, mid], snap, random.Random(0), 0)
    first, second = outcomes
    assert isinstance(first, PreemptionOutcome) and first.preemption.node_name == "a"
    assert names(first.preemption.victims) == ["low"]
    # mid would preempt "low" too, but the room is high's: nothing below high's priority helps.
    assert isinstance(second, PreemptionOutcome) and second.preemption.node_name == ""


def test_a_nominated_pod_of_lower_priority_does_not_block_a_higher_one() -> None:
    snap = snapshot(node_info(model_node("a", cpu="2")))
    low = pod("low-nominee", "2", 1)
    high = pod("high", "2", 100)
    outcomes, _ = schedule_batch(
        {"default-scheduler": ALGORITHM}, [high], snap, random.Random(0), 0, nominated={low.uid: (low, "a")}
    )
    assert getattr(outcomes[0], "node_name", None) == "a"


def _states(p: Pod, snap: Snapshot) -> list[Any]:
    return [predicate.prefilter(p, snap) for predicate in PREDICATES]


# ------------------------------------------------------------------------- properties

POLICY = compile_policy({"predicates": [{"name": "PodFitsResources"}], "priorities": []})

pods_on_node = st.lists(st.tuples(st.integers(1, 4), st.integers(-5, 20)), max_size=5)


@settings(max_examples=150, deadline=None)
@given(
    st.lists(pods_on_node, min_size=1, max_size=5),
    st.integers(1, 6),
    st.integers(-5, 20),
    st.integers(0, 2**16),
)
def test_preemption_properties(
    layout: list[list[tuple[int, int]]], cpu: int, priority: int, seed: int
) -> None:
    infos = []
    for i, pods in enumerate(layout):
        info = NodeInfo(model_node(f"n{i}", cpu="6"))
        for j, (want, prio) in enumerate(pods):
            if info.requested.milli_cpu + want * 1000 <= 6000:
                info = info.with_pod(pod(f"p{i}-{j}", str(want), prio, node_name=f"n{i}", started=j))
        infos.append(info)
    snap = snapshot(*infos)
    preemptor = pod("preemptor", str(cpu), priority)
    try:
        POLICY.schedule(preemptor, snap, random.Random(seed))
        return  # it fits somewhere: nothing to preempt
    except FitError as exc:
        error = exc
    predicates = POLICY.predicates
    result = preempt(error, snap, predicates, (), random.Random(seed))
    states = [p.prefilter(preemptor, snap) for p in predicates]
    if not result.node_name:
        # No node would fit even without every lower-priority pod.
        for info in snap.nodes:
            emptied = info
            for other in info.pods.values():
                if other.priority < priority:
                    emptied = emptied.without_pod(other.uid)
            assert pod_fits(preemptor, emptied, snap, predicates, states)
        return
    assert result.victims
    assert all(v.priority < priority for v in result.victims)
    chosen = snap.get(result.node_name)
    assert chosen is not None
    after = chosen
    for victim in result.victims:
        after = after.without_pod(victim.uid)
    assert not pod_fits(preemptor, after, snap, predicates, states)  # it fits once they are gone
    for victim in result.victims:  # and none of them could have stayed
        assert pod_fits(preemptor, after.with_pod(victim), snap, predicates, states)
