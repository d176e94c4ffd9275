"""Reclaim by preemption under ElasticQuotas (algorithm/quota_reclaim.py, algorithm/preemption.py).

The first cases are scheduler-plugins' pkg/capacityscheduling/capacity_scheduling_test.go
(TestPostFilter, TestDryRunPreemption, TestPodEligibleToPreemptOthers), with their quotas, pods
and expected victims; the others are issue 36's acceptance cases at the algorithm level.
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from kubesched.algorithm.batch import schedule_batch
from kubesched.algorithm.generic import FitError
from kubesched.algorithm.preemption import (
    MSG_PREEMPT_NEVER,
    MSG_TERMINATING,
    Preemption,
    PreemptionOutcome,
    dry_run,
    preempt,
)
from kubesched.algorithm.quota_reclaim import (
    ERR_REASON_QUOTA,
    OWN_QUOTA,
    RECLAIM,
    UPSTREAM,
    ReclaimSettings,
    victim_rule,
)
from kubesched.model.disruption import budget_from_dict
from kubesched.model.nodeinfo import ClusterObjects, Snapshot
from kubesched.model.objects import Pod
from kubesched.model.podgroup import POD_GROUP_LABEL
from kubesched.model.quota import ElasticQuota, QuotaState, elastic_quota_from_dict
from kubesched.policy.compile import PolicyError, compile_policy, default_algorithm
from kubesched_dev.fixtures import model_node, model_pod, node_info, snapshot

ALGORITHM = default_algorithm()
PREDICATES = ALGORITHM.predicates
EPOCH = datetime(2026, 1, 1, tzinfo=UTC)
GPU = "example.com/gpu"
MID, HIGH = 100, 1000  # upstream's midPriority, highPriority


def quota(namespace: str, min: Mapping[str, Any], max: Mapping[str, Any] | None = None) -> ElasticQuota:
    spec: dict[str, Any] = {"min": dict(min)}
    if max is not None:
        spec["max"] = dict(max)
    meta = {"namespace": namespace, "name": f"eq-{namespace}", "creationTimestamp": "2026-01-01T00:00:00Z"}
    return elastic_quota_from_dict({"metadata": meta, "spec": spec})


def pod(
    name: str,
    namespace: str,
    priority: int = 0,
    *,
    gpu: int = 0,
    memory: str | None = None,
    started: int = 0,
    **kwargs: Any,
) -> Pod:
    """A pod asking for `gpu` units of an extended resource (or `memory`), nothing else, so that
    only what the quotas name is judged; `started` minutes after EPOCH stands for its start."""
    extra = {GPU: str(gpu)} if gpu else None
    made = model_pod(name, namespace=namespace, memory=memory, extra=extra, priority=priority, **kwargs)
    return replace(made, created=EPOCH + timedelta(minutes=started))


def cluster(
    layout: Mapping[str, Sequence[Pod]],
    quotas: Sequence[ElasticQuota],
    *,
    gpus: int = 10,
    memory: str = "8Gi",
    used: Mapping[str, Mapping[str, int]] | None = None,
    pod_groups: Mapping[str, Any] | None = None,
) -> Snapshot:
    """Nodes of `gpus` units running the pods given (bound: nodeName set), with the quotas in force
    and their use counted from the pods, or `used` as upstream's tests set it."""
    infos = [
        node_info(
            model_node(name, memory=memory, extra={GPU: str(gpus)}),
            [replace(p, node_name=name) for p in pods],
        )
        for name, pods in layout.items()
    ]
    snap = snapshot(*infos, objects=ClusterObjects(pod_groups=dict(pod_groups or {})))
    state = QuotaState.build(quotas, [p for info in snap.nodes for p in info.pods.values()])
    if used is not None:
        state = QuotaState(state.quotas, {ns: dict(amounts) for ns, amounts in used.items()})
    return replace(snap, quotas=state)


def fit_error(preemptor: Pod, snap: Snapshot) -> FitError:
    """The scheduling failure; a pod that fits every node (rejected by its quota alone) fails with
    no node reasons, as a PreFilter rejection leaves every node to preemption."""
    try:
        ALGORITHM.schedule(preemptor, snap, random.Random(0))
    except FitError as error:
        return error
    return FitError(preemptor, len(snap.nodes), {})


def run(
    preemptor: Pod,
    snap: Snapshot,
    nominated_node: str = "",
    settings: ReclaimSettings = UPSTREAM,
    **kwargs: Any,
) -> Preemption:
    error = fit_error(preemptor, snap)
    return preempt(error, snap, PREDICATES, (), random.Random(0), nominated_node, reclaim=settings, **kwargs)


def names(pods: Sequence[Pod]) -> list[str]:
    return sorted(p.name for p in pods)


def used_after(snap: Snapshot, result: Preemption, preemptor: Pod) -> dict[str, int]:
    """Each quota's use (of GPU) once the victims are gone and the preemptor runs."""
    after = snap.without_pods(result.victims).with_pod_on(preemptor, result.node_name)
    return {ns: after.quotas.used_by(ns).get(GPU, 0) for ns in after.quotas.quotas}


# ------------------------------------------------------------- upstream's capacity_scheduling_test.go

# Node memory 150, every pod asks for 50 (TestPostFilter, TestDryRunPreemption).
UPSTREAM_MEMORY = "150"


def upstream_cluster(pods: Sequence[Pod], quotas: Sequence[ElasticQuota]) -> Snapshot:
    return cluster({"node-a": pods}, quotas, memory=UPSTREAM_MEMORY)


def test_post_filter_in_namespace_preemption() -> None:
    """TestPostFilter "in-namespace preemption": ns1 would pass its min, so only its own pod goes."""
    snap = upstream_cluster(
        [
            pod("t1-p2", "ns1", MID, memory="50"),
            pod("t1-p3", "ns2", MID, memory="50"),
            pod("t1-p4", "ns2", MID, memory="50"),
        ],
        [quota("ns1", {"memory": 50}, {"memory": 200}), quota("ns2", {"memory": 200}, {"memory": 200})],
    )
    result = run(pod("t1-p1", "ns1", HIGH, memory="50"), snap)
    assert (result.node_name, names(result.victims)) == ("node-a", ["t1-p2"])


def test_post_filter_cross_namespace_preemption() -> None:
    """TestPostFilter "cross-namespace preemption": ns1 stays within its min and takes back from
    ns2, over its min by one pod: one of ns2's pods goes, never ns1's own."""
    snap = upstream_cluster(
        [
            pod("t1-p2", "ns1", MID, memory="50"),
            pod("t1-p3", "ns2", MID, memory="50"),
            pod("t1-p4", "ns2", MID, memory="50"),
        ],
        [quota("ns1", {"memory": 150}, {"memory": 200}), quota("ns2", {"memory": 50}, {"memory": 200})],
    )
    result = run(pod("t1-p1", "ns1", HIGH, memory="50"), snap)
    assert result.node_name == "node-a"
    assert len(result.victims) == 1 and result.victims[0].namespace == "ns2"


def test_post_filter_without_elastic_quotas() -> None:
    """TestPostFilter "without elasticQuotas": kube-scheduler's preemption, one of three equals goes."""
    snap = upstream_cluster(
        [
            pod("t1-p2", "ns1", MID, memory="50"),
            pod("t1-p3", "ns2", MID, memory="50"),
            pod("t1-p4", "ns2", MID, memory="50"),
        ],
        [],
    )
    assert not snap.quotas
    result = run(pod("t1-p1", "ns1", HIGH, memory="50"), snap)
    assert result.node_name == "node-a" and len(result.victims) == 1


@pytest.mark.parametrize(
    ("name", "pods", "quotas", "victims"),
    [
        (
            "in-namespace preemption",
            [("t1-p1", "ns1", MID), ("t1-p2", "ns2", MID), ("t1-p3", "ns2", MID)],
            [quota("ns1", {"memory": 50}, {"memory": 200}), quota("ns2", {"memory": 200}, {"memory": 200})],
            ["t1-p1"],
        ),
        (
            "cross-namespace preemption",
            [("t1-p1", "ns1", MID), ("t1-p2", "ns2", HIGH), ("t1-p3", "ns2", MID)],
            [quota("ns1", {"memory": 150}, {"memory": 200}), quota("ns2", {"memory": 50}, {"memory": 200})],
            ["t1-p3"],
        ),
    ],
)
def test_dry_run_preemption(
    name: str, pods: list[tuple[str, str, int]], quotas: list[ElasticQuota], victims: list[str]
) -> None:
    """TestDryRunPreemption: one candidate, node-a, with upstream's victims."""
    snap = upstream_cluster([pod(n, ns, prio, memory="50") for n, ns, prio in pods], quotas)
    preemptor = pod("t1-p", "ns1", HIGH, memory="50")
    states = [p.prefilter(preemptor, snap) for p in PREDICATES]
    found, failed = dry_run(preemptor, snap, snap.nodes, PREDICATES, states, (), random.Random(0))
    assert failed == {}
    assert [(c.node_name, names(c.victims), c.num_pdb_violations) for c in found] == [("node-a", victims, 0)]


def terminating(name: str, namespace: str, priority: int) -> Pod:
    return pod(name, namespace, priority, deleting=True)


NS1 = quota("ns1", {"memory": 50}, {"memory": 150})
NS2 = quota("ns2", {"memory": 50}, {"memory": 150})


@pytest.mark.parametrize(
    ("name", "preemptor", "existing", "quotas", "used", "eligible"),
    [
        (
            "Pod with terminating pod in the same namespace",
            pod("t1-p1", "ns1", HIGH),
            terminating("t1-p0", "ns1", MID),
            [NS1],
            {"ns1": {}},
            False,
        ),
        (
            "Pod with terminating pod in another namespace",
            pod("t1-p1", "ns1", HIGH),
            terminating("t1-p0", "ns2", MID),
            [NS1, NS2],
            {"ns1": {}, "ns2": {"memory": 100}},
            False,
        ),
        (
            "Pod without elasticQuotas and terminating pod exists in the same namespace",
            pod("t1-p1", "ns1", HIGH),
            terminating("t1-p0", "ns2", MID),
            [],
            None,
            False,
        ),
        (
            "Pod without ElasticQuotas and terminating pod exists in another namespace",
            pod("t1-p1", "ns1", HIGH),
            terminating("t1-p0", "ns2", MID),
            [NS2],
            {"ns2": {"memory": 100}},
            True,
        ),
    ],
)
def test_pod_eligible_to_preempt_others(
    name: str,
    preemptor: Pod,
    existing: Pod,
    quotas: list[ElasticQuota],
    used: Mapping[str, Mapping[str, int]] | None,
    eligible: bool,
) -> None:
    """TestPodEligibleToPreemptOthers (nominated to node-a, its status fine): whether a pod the
    preemptor could have evicted is still terminating there."""
    snap = cluster({"node-a": [existing]}, quotas, memory=UPSTREAM_MEMORY, used=used)
    result = preempt(FitError(preemptor, 1, {}), snap, PREDICATES, (), random.Random(0), "node-a")
    assert (result.message != MSG_TERMINATING) is eligible


def test_pod_eligible_to_preempt_others_policy_and_unresolvable_node() -> None:
    """TestPodEligibleToPreemptOthers' first two cases: preemptionPolicy Never is not eligible; a
    nominated node the filters call unresolvable does not hold the pod back."""
    snap = cluster({"node-a": [pod("t1-p0", "ns1", MID, memory="50")]}, [NS1], memory=UPSTREAM_MEMORY)
    never = pod("t1-p1", "ns1", HIGH, preemptionPolicy="Never")
    assert run(never, snap, "node-a") == Preemption(message=MSG_PREEMPT_NEVER)
    leaving = cluster({"node-a": [terminating("t1-p0", "ns1", MID)]}, [NS1], memory=UPSTREAM_MEMORY)
    error = FitError(
        pod("t1-p1", "ns1", HIGH), 1, {"node-a": ("node(s) had taint {k: v}, that the pod didn't tolerate",)}
    )
    assert preempt(error, leaving, PREDICATES, (), random.Random(0), "node-a").message != MSG_TERMINATING


# ------------------------------------------------------------- issue 36's acceptance cases


def kep_story(b_pods: Sequence[Pod]) -> Snapshot:
    """One node of 10 GPUs; A: min 4 max 6, using 6 (three 2-GPU pods of high priority); B: min 6 max 8."""
    a_pods = [pod(f"a{i}", "a", HIGH, gpu=2, started=i) for i in range(3)]
    return cluster(
        {"n": [*a_pods, *b_pods]}, [quota("a", {GPU: 4}, {GPU: 6}), quota("b", {GPU: 6}, {GPU: 8})]
    )


def test_kep_story_a_quota_within_its_min_takes_back_what_was_lent() -> None:
    """(3) B, using 3, asks for 3 more: one of A's pods goes (whatever its priority); B reaches 6,
    A ends at 4."""
    snap = kep_story([pod("b0", "b", 0, gpu=3)])
    preemptor = pod("b1", "b", 0, gpu=3)
    result = run(preemptor, snap)
    assert result.node_name == "n"
    assert [v.namespace for v in result.victims] == ["a"]
    assert used_after(snap, result, preemptor) == {"a": 4, "b": 6}


def test_kep_story_beyond_its_min_a_quota_takes_nothing_from_others() -> None:
    """(4) B, at its min of 6, asks for one more: A's pods are no victims."""
    snap = cluster(
        {"n": [pod("a0", "a", 0, gpu=2), pod("a1", "a", 0, gpu=2), pod("b0", "b", 10, gpu=6)]},
        [quota("a", {GPU: 4}, {GPU: 6}), quota("b", {GPU: 6}, {GPU: 8})],
    )
    result = run(pod("b1", "b", 10, gpu=1), snap)
    assert (result.node_name, result.victims) == ("", ())


def test_a_borrowing_quota_never_evicts_another_quotas_pods() -> None:
    """(5) A, over its min, asks for more at a high priority: B's low-priority pods stay."""
    snap = cluster(
        {"n": [pod("a0", "a", HIGH, gpu=6), pod("b0", "b", 0, gpu=2), pod("b1", "b", 0, gpu=2)]},
        [quota("a", {GPU: 4}, {GPU: 10}), quota("b", {GPU: 6}, {GPU: 10})],
    )
    result = run(pod("a1", "a", HIGH, gpu=2), snap)
    assert (result.node_name, result.victims) == ("", ())


def test_a_quota_within_its_min_lends_nothing() -> None:
    """A uses 4 of its min 6: B, within its min too, finds no victim in A, whatever A's priority."""
    snap = cluster(
        {"n": [pod("a0", "a", 0, gpu=2), pod("a1", "a", 0, gpu=2), pod("b0", "b", 0, gpu=6)]},
        [quota("a", {GPU: 6}, {GPU: 10}), quota("b", {GPU: 10}, {GPU: 10})],
    )
    result = run(pod("b1", "b", HIGH, gpu=2), snap)
    assert (result.node_name, result.victims) == ("", ())


def test_within_its_own_quota_only_lower_priority_pods_go() -> None:
    """(6) A, over its min, preempts at priority 10: its own pod of priority 5 goes; its pod of
    priority 20 and B's pod of priority 0 stay."""
    snap = cluster(
        {"n": [pod("a-low", "a", 5, gpu=3), pod("a-high", "a", 20, gpu=3), pod("b0", "b", 0, gpu=4)]},
        [quota("a", {GPU: 2}, {GPU: 10}), quota("b", {GPU: 8}, {GPU: 10})],
    )
    result = run(pod("a-new", "a", 10, gpu=3), snap)
    assert (result.node_name, names(result.victims)) == ("n", ["a-low"])


def test_issue_683_mins_adding_up_to_the_cluster() -> None:
    """(7) scheduler-plugins issue 683: 5 GPUs, A (min 4 max 5) uses all 5, B (min 1) asks for 1:
    exactly one of A's pods goes."""
    snap = cluster(
        {"n": [pod(f"a{i}", "a", 0, gpu=1, started=i) for i in range(5)]},
        [quota("a", {GPU: 4}, {GPU: 5}), quota("b", {GPU: 1}, {GPU: 5})],
        gpus=5,
    )
    preemptor = pod("b0", "b", 0, gpu=1)
    result = run(preemptor, snap)
    assert result.node_name == "n"
    assert [v.namespace for v in result.victims] == ["a"]
    assert used_after(snap, result, preemptor) == {"a": 4, "b": 1}


def test_room_on_the_node_is_not_enough_when_the_sum_of_mins_is_passed() -> None:
    """A node with a free GPU, but A's borrowing uses up the sum of the mins: the pod reprieved
    there would pass it, so it is a victim after all (upstream's reprievePod)."""
    snap = cluster(
        {"n": [pod(f"a{i}", "a", 0, gpu=1, started=i) for i in range(5)]},
        [quota("a", {GPU: 4}, {GPU: 5}), quota("b", {GPU: 1}, {GPU: 5})],
        gpus=6,
    )
    result = run(pod("b0", "b", 0, gpu=1), snap)
    assert result.node_name == "n" and [v.namespace for v in result.victims] == ["a"]


def test_a_quota_over_its_max_even_after_every_eviction_gets_no_node() -> None:
    """B within its min (5) but with a max of 2, using 2: evicting A's pods cannot help."""
    snap = cluster(
        {"n": [pod("a0", "a", 0, gpu=4), pod("a1", "a", 0, gpu=4), pod("b0", "b", 0, gpu=2)]},
        [quota("a", {GPU: 1}, {GPU: 10}), quota("b", {GPU: 5}, {GPU: 2})],
    )
    result = run(pod("b1", "b", 0, gpu=2), snap)
    assert (result.node_name, result.victims) == ("", ())
    assert result.message == f"0/1 nodes are available: 1 {ERR_REASON_QUOTA}."


def test_pods_with_and_without_a_quota_never_evict_each_other() -> None:
    """A pod without a quota evicts only lower-priority pods without one; a pod with a quota
    never evicts a pod without one (A within its min here: it would reclaim from any quota)."""
    quotas = [quota("a", {GPU: 12}, {GPU: 12})]
    snap = cluster({"n": [pod("a0", "a", 0, gpu=6), pod("free0", "free", 0, gpu=4)]}, quotas)
    outsider = run(pod("free1", "free", 100, gpu=6), snap)
    assert outsider.node_name == "" and outsider.victims == ()
    small = run(pod("free2", "free", 100, gpu=4), snap)
    assert (small.node_name, names(small.victims)) == ("n", ["free0"])
    insider = run(pod("a1", "a", 100, gpu=6), snap)
    assert insider.victims == ()


def test_a_budget_is_honoured_as_in_ordinary_preemption() -> None:
    """Two of A's pods (A has no min: both are candidates) would each do; the one a PDB protects
    is reprieved first and stays."""
    snap = cluster(
        {
            "n": [
                pod("a-guarded", "a", 0, gpu=2, labels={"app": "db"}),
                pod("a-plain", "a", 0, gpu=2),
                pod("b0", "b", 0, gpu=6),
            ]
        },
        [quota("a", {}, {GPU: 10}), quota("b", {GPU: 10}, {GPU: 10})],
    )
    pdb = budget_from_dict(
        {
            "metadata": {"namespace": "a", "name": "pdb"},
            "spec": {"selector": {"matchLabels": {"app": "db"}}},
            "status": {"disruptionsAllowed": 0},
        }
    )
    preemptor = pod("b1", "b", 0, gpu=2)
    result = preempt(fit_error(preemptor, snap), snap, PREDICATES, (pdb,), random.Random(0))
    assert (result.node_name, names(result.victims)) == ("n", ["a-plain"])


def test_nominated_pods_take_room_but_are_never_victims() -> None:
    """A's pod nominated to the node (a pending pod) takes room but is no victim, though it is
    A's least important pod there: A's running pod goes instead."""
    nominee = pod("a-nominated", "a", HIGH, gpu=2)
    snap = cluster(
        {"n": [pod("a-running", "a", HIGH + 1, gpu=2), nominee, pod("b0", "b", 0, gpu=6)]},
        [quota("a", {GPU: 1}, {GPU: 10}), quota("b", {GPU: 8}, {GPU: 10})],
    )
    preemptor = pod("b1", "b", 0, gpu=2)
    result = run(preemptor, snap, nominated=frozenset({nominee.uid}))
    assert (result.node_name, names(result.victims)) == ("n", ["a-running"])


# ------------------------------------------------------------- beyond upstream: protectMin


def test_protect_min_keeps_a_quota_at_its_min() -> None:
    """A (min 5) uses 6 in 2-GPU pods: upstream takes one and leaves A at 4, below its min; with
    protectMin none of A's pods may go."""
    snap = cluster(
        {"n": [pod(f"a{i}", "a", 0, gpu=2, started=i) for i in range(3)] + [pod("b0", "b", 0, gpu=3)]},
        [quota("a", {GPU: 5}, {GPU: 10}), quota("b", {GPU: 5}, {GPU: 10})],
    )
    preemptor = pod("b1", "b", 0, gpu=2)
    upstream = run(preemptor, snap)
    assert upstream.node_name == "n" and used_after(snap, upstream, preemptor)["a"] == 4
    protected = run(preemptor, snap, settings=ReclaimSettings(protect_min=True))
    assert (protected.node_name, protected.victims) == ("", ())


def test_protect_min_still_reclaims_what_is_above_the_min() -> None:
    snap = kep_story([pod("b0", "b", 0, gpu=3)])
    preemptor = pod("b1", "b", 0, gpu=3)
    result = run(preemptor, snap, settings=ReclaimSettings(protect_min=True))
    assert used_after(snap, result, preemptor) == {"a": 4, "b": 6}


def test_the_policy_sets_protect_min_and_the_batch_follows_it() -> None:
    """`quotas.protectMin` reaches reclaim through the batch: the case above, decided end to end."""
    plain = compile_policy({})
    protect = compile_policy({"quotas": {"protectMin": True}})
    assert plain.quota_reclaim == UPSTREAM and "quotas" not in plain.describe()
    assert protect.quota_reclaim == ReclaimSettings(protect_min=True)
    assert protect.describe()["quotas"] == {"protectMin": True}
    with pytest.raises(PolicyError) as caught:
        compile_policy({"quotas": {"protectMin": "yes"}})
    assert caught.value.field == "quotas.protectMin"
    snap = cluster(
        {"n": [pod(f"a{i}", "a", 0, gpu=2, started=i) for i in range(3)] + [pod("b0", "b", 0, gpu=3)]},
        [quota("a", {GPU: 5}, {GPU: 10}), quota("b", {GPU: 5}, {GPU: 10})],
    )
    preemptor = pod("b1", "b", 0, gpu=2)
    taken, _ = schedule_batch({"default-scheduler": plain}, [preemptor], snap, random.Random(0), 0)
    assert [v.namespace for v in victims_of(taken)] == ["a"]
    kept, _ = schedule_batch({"default-scheduler": protect}, [preemptor], snap, random.Random(0), 0)
    assert victims_of(kept) == []
    assert (
        kept[0]
        .summary()
        .startswith(
            f"0/1 nodes are available: ElasticQuota b/eq-b: the quotas' total use would pass the sum of "
            f"their mins: {GPU} 11 > 10. preemption: "
        )
    )


def test_a_refused_pod_preempts_in_a_batch_and_the_next_pod_sees_the_nomination() -> None:
    """(3) in a batch: B's pod refused by the sum of the mins reclaims one of A's pods and is
    nominated; a second pod of B, of the same priority, finds the room taken by it."""
    snap = kep_story([pod("b0", "b", 0, gpu=3)])
    first, second = pod("b1", "b", 0, gpu=3), pod("b2", "b", 0, gpu=3)
    outcomes, _ = schedule_batch({"default-scheduler": ALGORITHM}, [first, second], snap, random.Random(0), 0)
    assert isinstance(outcomes[0], PreemptionOutcome) and outcomes[0].preemption.node_name == "n"
    assert [v.namespace for v in outcomes[0].preemption.victims] == ["a"]
    assert victims_of(outcomes[1:]) == []  # B would pass its min: nothing more is taken from A
    assert "ElasticQuota b/eq-b" in outcomes[1].summary()


def test_a_victim_taken_from_another_quota_is_told_which_rule_took_it() -> None:
    state = QuotaState.build([quota("a", {GPU: 4}, {GPU: 6}), quota("b", {GPU: 6}, {GPU: 8})], [])
    preemptor = pod("b1", "b", 0, gpu=3)
    assert victim_rule(preemptor, pod("a0", "a", HIGH, gpu=2), state) == (
        RECLAIM,
        "ElasticQuota a/eq-a over its min, reclaimed by b/eq-b within its min",
    )
    assert victim_rule(preemptor, pod("b0", "b", 0, gpu=2), state)[0] == OWN_QUOTA
    assert victim_rule(preemptor, pod("x0", "x", 0, gpu=2), state) == ("", "")  # no quota: by priority


# ------------------------------------------------------------- gangs


def group(namespace: str, name: str, min_member: int) -> dict[str, Any]:
    meta = {
        "namespace": namespace,
        "name": name,
        "uid": f"uid-{name}",
        "creationTimestamp": "2024-01-01T00:00:00Z",
    }
    return {"metadata": meta, "spec": {"minMember": min_member}}


def test_a_reclaimed_gang_member_takes_its_whole_group() -> None:
    """A's placed gang (one member on each node) is reclaimed whole, its member elsewhere too."""
    member = {POD_GROUP_LABEL: "job"}
    snap = cluster(
        {
            "n1": [pod("g1", "a", HIGH, gpu=4, labels=member), pod("b0", "b", 0, gpu=6)],
            "n2": [pod("g2", "a", HIGH, gpu=4, labels=member), pod("a-plain", "a", HIGH, gpu=6)],
        },
        [quota("a", {GPU: 2}, {GPU: 20}), quota("b", {GPU: 10}, {GPU: 20})],
        pod_groups={"a/job": group("a", "job", 2)},
    )
    result = run(pod("b1", "b", 0, gpu=4), snap)
    assert result.node_name in ("n1", "n2")
    if result.node_name == "n1":
        assert names(result.victims) == ["g1", "g2"]


def victims_of(outcomes: Sequence[Any]) -> list[Pod]:
    return [v for o in outcomes if isinstance(o, PreemptionOutcome) for v in o.preemption.victims]


def test_a_gang_that_cannot_fit_even_after_reclaim_evicts_nobody() -> None:
    """(8b) B's gang of three 2-GPU members; 2 GPUs free and A (min 6) over its min by one pod:
    reclaim makes room for two members only, so nobody is evicted."""
    snap = cluster(
        {"n": [pod(f"a{i}", "a", 0, gpu=2, started=i) for i in range(4)]},
        [quota("a", {GPU: 6}, {GPU: 10}), quota("b", {GPU: 6}, {GPU: 10})],
        pod_groups={"b/job": group("b", "job", 3)},
    )
    members = [pod(f"b{i}", "b", 0, gpu=2, labels={POD_GROUP_LABEL: "job"}) for i in range(3)]
    outcomes, _ = schedule_batch({"default-scheduler": ALGORITHM}, members, snap, random.Random(0), 0)
    assert all(isinstance(o, FitError) for o in outcomes)
    assert victims_of(outcomes) == []


def test_a_gang_that_fits_after_reclaim_takes_back_its_min() -> None:
    """The same gang with A at min 4: two of A's pods go and the three members are nominated."""
    snap = cluster(
        {"n": [pod(f"a{i}", "a", 0, gpu=2, started=i) for i in range(4)]},
        [quota("a", {GPU: 4}, {GPU: 10}), quota("b", {GPU: 6}, {GPU: 10})],
        pod_groups={"b/job": group("b", "job", 3)},
    )
    members = [pod(f"b{i}", "b", 0, gpu=2, labels={POD_GROUP_LABEL: "job"}) for i in range(3)]
    outcomes, _ = schedule_batch({"default-scheduler": ALGORITHM}, members, snap, random.Random(0), 0)
    victims = victims_of(outcomes)
    assert len(victims) == 2 and {v.namespace for v in victims} == {"a"}
    assert [o.preemption.node_name for o in outcomes if isinstance(o, PreemptionOutcome)] == ["n"] * 3
