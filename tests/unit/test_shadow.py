"""Shadow policies: the comparison, the sample, the figures in status, and the store's rules."""

from __future__ import annotations

import random
from collections.abc import Mapping
from typing import Any

import pytest

from kubesched.algorithm.batch import schedule_batch
from kubesched.algorithm.generic import Algorithm, FitError, ScheduleResult
from kubesched.model.nodeinfo import Snapshot
from kubesched.model.objects import Pod, node_from_dict, pod_from_dict
from kubesched.policy.compile import compile_policy
from kubesched.policy.shadow import (
    MAX_RECENT,
    Comparison,
    ShadowRunner,
    Tally,
    Verdict,
    agreement_percent,
    compare,
    fold_figures,
    sampled,
)
from kubesched.policy.shadow_status import ShadowReporter
from kubesched.policy.store import ACTIVE, PolicyStore
from kubesched_dev.fixtures import make_node, make_pod

from .test_policy_store import condition, policy

OWN = "kubesched"
T0 = "2024-01-01T00:00:00Z"
T1 = "2024-01-01T00:01:00Z"
SPREAD = {
    "priorities": [
        {"name": "LeastRequestedPriority", "weight": 3},
        {"name": "MostRequestedPriority", "weight": 1},
    ]
}
PACK = {
    "priorities": [
        {"name": "LeastRequestedPriority", "weight": 1},
        {"name": "MostRequestedPriority", "weight": 3},
    ]
}
UNFIT = FitError(pod_from_dict(make_pod("p")), 2, {"a": ("Insufficient cpu",), "b": ("Insufficient cpu",)})


def result(node: str, scores: Mapping[str, int] | None = None) -> ScheduleResult:
    return ScheduleResult(node, 2, 2, 0, dict(scores or {}))


# ------------------------------------------------------------------------------------ comparing


@pytest.mark.parametrize(
    ("active", "shadow", "verdict"),
    [
        (result("a"), result("a"), Verdict.SAME_NODE),
        (result("a", {"a": 5, "b": 9}), result("b", {"a": 9, "b": 9}), Verdict.SAME_NODE),  # a tie at the top
        (result("a"), result("b", {"a": 8, "b": 9}), Verdict.DIFFERENT_NODE),
        (result("a"), result("b", {"b": 9}), Verdict.DIFFERENT_NODE),  # `a` not even feasible for the shadow
        (result("a"), UNFIT, Verdict.SHADOW_ONLY_UNSCHEDULABLE),
        (UNFIT, result("a"), Verdict.ACTIVE_ONLY_UNSCHEDULABLE),
        (UNFIT, UNFIT, Verdict.BOTH_UNSCHEDULABLE),
    ],
)
def test_compare(
    active: ScheduleResult | FitError, shadow: ScheduleResult | FitError, verdict: Verdict
) -> None:
    assert compare(active, shadow) is verdict


def test_the_sample_is_by_uid_so_every_shadow_and_every_retry_agree() -> None:
    uids = [f"uid-{i}" for i in range(4000)]
    assert all(sampled(uid, 1.0) for uid in uids) and not any(sampled(uid, 0.0) for uid in uids)
    quarter = [uid for uid in uids if sampled(uid, 0.25)]
    assert 900 < len(quarter) < 1100
    assert quarter == [uid for uid in uids if sampled(uid, 0.25)]
    assert set(quarter) <= {uid for uid in uids if sampled(uid, 0.5)}  # a larger rate adds pods


def test_agreement_is_rounded_down_so_that_100_means_every_one() -> None:
    assert agreement_percent(1999, 2000) == 99.9
    assert agreement_percent(2000, 2000) == 100.0
    assert agreement_percent(1, 3) == 33.3
    assert agreement_percent(0, 0) == 0.0


# ------------------------------------------------------------------------------------ the runner


def cluster(quota: Mapping[str, Any] | None = None) -> Snapshot:
    """A half-full node and three empty identical ones: ties, and a split between spread and pack;
    with `quota`, the spec of an ElasticQuota of the pods' namespace."""
    from kubesched.model.nodeinfo import ClusterObjects, NodeInfo

    busy = NodeInfo(node_from_dict(make_node("busy", cpu="4", memory="8Gi"))).with_pod(
        pod_from_dict(make_pod("resident", cpu="2", memory="4Gi", node_name="busy"))
    )
    empty = [NodeInfo(node_from_dict(make_node(f"empty-{i}", cpu="4", memory="8Gi"))) for i in range(3)]
    if quota is None:
        return Snapshot.of([busy, *empty])
    meta = {"namespace": "default", "name": "eq", "creationTimestamp": "2026-01-01T00:00:00Z"}
    objects = ClusterObjects(elastic_quotas={"default/eq": {"metadata": meta, "spec": dict(quota)}})
    return Snapshot.of([busy, *empty], objects)


def workload(count: int = 12) -> list[Pod]:
    pods = [
        pod_from_dict(make_pod(f"web-{i}", scheduler_name=OWN, cpu="250m", memory="512Mi"))
        for i in range(count)
    ]
    return [*pods, pod_from_dict(make_pod("huge", scheduler_name=OWN, cpu="64"))]


def store_with(*shadows: tuple[str, Mapping[str, Any]]) -> PolicyStore:
    store = PolicyStore(OWN)
    store.upsert(policy("active", {**SPREAD, "schedulerName": OWN}))
    for name, spec in shadows:
        store.upsert(policy(name, {**spec, "schedulerName": OWN, "mode": "Shadow"}, created=T1))
    return store


def run(
    store: PolicyStore, pods: list[Pod], seed: int = 1, snapshot: Snapshot | None = None
) -> tuple[list[Any], dict[Comparison, Tally]]:
    runner = ShadowRunner(seed=99, wall_clock=lambda: T1)
    profiles: dict[str, Algorithm] = store.profiles()
    runner.update(store.shadows(), store.active(), profiles)
    snapshot = snapshot or cluster()
    outcomes, _ = schedule_batch(profiles, pods, snapshot, random.Random(seed), 0, runner.observe)
    return outcomes, runner.take()


def test_an_identical_shadow_agrees_on_every_pod_even_where_ties_are_broken_at_random() -> None:
    _, tallies = run(store_with(("twin", SPREAD)), workload())
    (key,) = tallies
    assert key == Comparison("twin", 1, 'SchedulerPolicy "active" generation 1')
    tally = tallies[key]
    assert tally.evaluated == 13 and tally.agreed == 13
    assert tally.counts == {Verdict.SAME_NODE: 12, Verdict.BOTH_UNSCHEDULABLE: 1}
    assert tally.disagreements == []


def test_shadows_are_held_by_elastic_quotas_as_the_active_policy_is() -> None:
    # `resident` uses 2 of the quota's cpu: under its min of 2500m two web pods fit, under its max four.
    quota = {"min": {"cpu": "2500m", "memory": "64Gi"}, "max": {"cpu": "3"}}
    outcomes, tallies = run(
        store_with(("twin", SPREAD), ("lender", {**SPREAD, "quotas": {"borrowing": "Cluster"}})),
        workload(),
        snapshot=cluster(quota),
    )
    assert sum(isinstance(o, ScheduleResult) for o in outcomes) == 2
    by_policy = {key.policy: tally for key, tally in tallies.items()}
    assert by_policy["twin"].counts == {Verdict.SAME_NODE: 2, Verdict.BOTH_UNSCHEDULABLE: 11}
    # Borrowing from the cluster, the shadow admits each web pod on the snapshot the active policy
    # saw (2500m used, max 3): only `huge` stays over the max.
    assert by_policy["lender"].counts == {
        Verdict.SAME_NODE: 2,
        Verdict.ACTIVE_ONLY_UNSCHEDULABLE: 10,
        Verdict.BOTH_UNSCHEDULABLE: 1,
    }


def test_swapped_weights_disagree_with_the_top_terms_behind_each_choice() -> None:
    _, tallies = run(store_with(("packer", PACK)), workload())
    tally = tallies[Comparison("packer", 1, 'SchedulerPolicy "active" generation 1')]
    assert tally.evaluated == 13 and 0 < tally.agreed < 13
    assert tally.counts[Verdict.DIFFERENT_NODE] == 13 - tally.agreed
    assert len(tally.disagreements) == MAX_RECENT  # details are bounded per interval; counts are not
    first = tally.disagreements[0]
    assert first["pod"] == "default/web-0" and first["at"] == T1
    assert first["active"]["node"].startswith("empty-") and first["shadow"]["node"] == "busy"
    assert [t["priority"] for t in first["active"]["topTerms"]] == [
        "LeastRequestedPriority",
        "MostRequestedPriority",
    ]
    top = first["shadow"]["topTerms"][0]
    assert top["priority"] == "MostRequestedPriority" and top["weighted"] == top["score"] * 3
    assert first["shadow"]["total"] == sum(t["weighted"] for t in first["shadow"]["topTerms"])


def test_a_shadow_changes_nothing_the_active_policy_decides() -> None:
    pods = workload()
    alone, _ = run(store_with(), pods, seed=5)
    watched, _ = run(store_with(("twin", SPREAD), ("packer", PACK)), pods, seed=5)
    assert [getattr(o, "node_name", None) for o in alone] == [getattr(o, "node_name", None) for o in watched]


def test_a_sample_rate_of_zero_evaluates_nothing_and_other_profiles_are_left_alone() -> None:
    store = store_with(("paused", {**PACK, "shadow": {"sampleRate": 0}}))
    other = [pod_from_dict(make_pod("elsewhere", scheduler_name="other", cpu="1"))]
    profiles = {**store.profiles(), "other": compile_policy({})}
    runner = ShadowRunner()
    runner.update(store.shadows(), store.active(), profiles)
    schedule_batch(profiles, workload() + other, cluster(), random.Random(1), 0, runner.observe)
    assert runner.take() == {}


def test_decisions_of_an_algorithm_swapped_out_meanwhile_are_not_counted() -> None:
    store = store_with(("twin", SPREAD))
    runner = ShadowRunner()
    runner.update(store.shadows(), store.active(), store.profiles())
    stale = {OWN: compile_policy(SPREAD)}  # a batch that started before the swap
    schedule_batch(stale, workload(2), cluster(), random.Random(1), 0, runner.observe)
    assert runner.take() == {}


# ------------------------------------------------------------------------------------- figures


KEY = Comparison("packer", 2, 'SchedulerPolicy "active" generation 1')


def tally(agreed: int, different: int, disagreements: int = 0, seconds: float = 0.01) -> Tally:
    t = Tally()
    for _ in range(agreed):
        t.add(Verdict.SAME_NODE, seconds)
    for _ in range(different):
        t.add(Verdict.DIFFERENT_NODE, seconds)
    t.disagreements = [{"pod": f"ns/p{i}"} for i in range(disagreements)]
    return t


def test_figures_accumulate_across_intervals_newest_disagreements_first() -> None:
    first = fold_figures(None, KEY, tally(3, 1, 1), 0.5, T0)
    assert first["evaluated"] == 4 and first["agreed"] == 3 and first["agreementPercent"] == 75.0
    assert first["since"] == T0 and first["sampleRate"] == 0.5 and first["meanEvaluationMilliseconds"] == 10.0
    second = fold_figures(first, KEY, tally(1, 4, 5), 0.5, T1)
    assert (second["evaluated"], second["agreed"], second["differentNode"]) == (9, 4, 5)
    assert second["since"] == T0 and second["updated"] == T1
    assert [d["pod"] for d in second["recentDisagreements"]] == ["ns/p4", "ns/p3", "ns/p2", "ns/p1", "ns/p0"]
    assert fold_figures(second, KEY, None, 0.5, T1) is second  # nothing new: nothing to write


def test_figures_start_again_for_a_new_generation_or_a_new_active_policy() -> None:
    old = fold_figures(None, KEY, tally(5, 5), 1.0, T0)
    for key in (Comparison("packer", 3, KEY.compared_with), Comparison("packer", 2, "base algorithm")):
        fresh = fold_figures(old, key, None, 1.0, T1)
        assert fresh["evaluated"] == 0 and fresh["since"] == T1 and fresh["recentDisagreements"] == []
        assert fresh["generation"] == key.generation and fresh["comparedWith"] == key.compared_with


# ------------------------------------------------------------------------------------- the store


def test_a_shadow_takes_no_part_in_the_oldest_wins_contest_and_several_may_shadow_one_name() -> None:
    store = PolicyStore(OWN)
    store.upsert(policy("early-shadow", {**PACK, "mode": "Shadow"}, created=T0))
    store.upsert(policy("late-active", SPREAD, created=T1))
    store.upsert(
        policy("second-shadow", {**SPREAD, "mode": "Shadow", "shadow": {"sampleRate": 0.1}}, created=T1)
    )
    assert store.active()[OWN].policy == "late-active"
    shadows = store.shadows()[OWN]
    assert [(s.policy, s.mode.sample_rate) for s in shadows] == [
        ("early-shadow", 1.0),
        ("second-shadow", 0.1),
    ]
    status = store.desired_status("early-shadow", T1)
    active = condition(status, ACTIVE)
    assert (active["status"], active["reason"]) == ("False", "Shadow")
    assert active["message"] == (
        'generation 1 shadows scheduler "kubesched" beside SchedulerPolicy "late-active"; it never binds'
    )
    assert condition(store.desired_status("late-active", T1), ACTIVE)["status"] == "True"


@pytest.mark.parametrize(
    ("spec", "error"),
    [
        ({"mode": "Passive"}, 'spec.mode: must be "Active" or "Shadow", got \'Passive\''),
        (
            {"mode": "Shadow", "shadow": {"sampleRate": 1.5}},
            "spec.shadow.sampleRate: must be a number in [0, 1]",
        ),
        ({"mode": "Shadow", "shadow": {"rate": 1}}, "spec.shadow.rate: unknown field"),
        ({"mode": "Shadow", "shadow": "all"}, "spec.shadow: must be an object"),
    ],
)
def test_invalid_shadow_settings_are_rejected_by_field(spec: Mapping[str, Any], error: str) -> None:
    store = PolicyStore(OWN)
    rejected = store.upsert(policy("p", {**PACK, **spec}))
    assert rejected is not None and str(rejected).startswith(error)


def test_the_figures_stay_in_status_while_shadow_and_go_when_the_policy_turns_active() -> None:
    figures = {"generation": 1, "evaluated": 3}
    store = PolicyStore(OWN)
    store.upsert(policy("p", {**PACK, "mode": "Shadow"}))
    store.record_status("p", {**store.desired_status("p", T0), "shadow": figures})
    assert list(store.status_patches(T1)) == []  # the reporter's figures are left alone
    store.upsert(policy("p", {**PACK, "mode": "Active"}, generation=2, status=store.get("p").status))  # type: ignore[union-attr]
    ((name, patch),) = store.status_patches(T1)
    assert name == "p" and patch["shadow"] is None


# ------------------------------------------------------------------------------------- reporter


class FakeWriter:
    def __init__(self) -> None:
        self.leader = True
        self.patches: list[tuple[str, dict[str, Any]]] = []
        self.stored: dict[str, dict[str, Any]] = {}

    def is_leader(self) -> bool:
        return self.leader

    async def write(self, name: str, patch: Mapping[str, Any]) -> Mapping[str, Any] | None:
        if not self.leader:
            return None
        self.patches.append((name, dict(patch)))
        status = self.stored.setdefault(name, {})
        for key, value in patch.items():
            status[key] = {**(status.get(key) or {}), **value}
            status[key] = {k: v for k, v in status[key].items() if v is not None}
        return dict(status)


async def test_the_reporter_writes_each_shadow_once_per_interval_and_only_as_leader() -> None:
    store = store_with(("twin", SPREAD), ("packer", PACK))
    runner = ShadowRunner(seed=1)
    profiles = store.profiles()
    runner.update(store.shadows(), store.active(), profiles)
    writer = FakeWriter()
    reporter = ShadowReporter(runner, store, writer, clock=lambda: T1)  # type: ignore[arg-type]

    assert await reporter.flush() == 2  # zeros at first: the comparison is on
    assert await reporter.flush() == 0
    schedule_batch(profiles, workload(4), cluster(), random.Random(1), 0, runner.observe)
    assert await reporter.flush() == 2
    schedule_batch(profiles, workload(4), cluster(), random.Random(1), 0, runner.observe)
    await reporter.flush()
    assert writer.stored["twin"]["shadow"]["evaluated"] == 10
    assert writer.stored["twin"]["shadow"]["agreementPercent"] == 100.0
    assert writer.stored["packer"]["shadow"]["agreementPercent"] < 100.0

    writer.leader = False
    schedule_batch(profiles, workload(4), cluster(), random.Random(1), 0, runner.observe)
    assert await reporter.flush() == 0
    assert writer.stored["twin"]["shadow"]["evaluated"] == 10


async def test_a_new_leader_carries_on_from_the_figures_in_status() -> None:
    store = store_with(("twin", SPREAD))
    written = fold_figures(
        None, Comparison("twin", 1, 'SchedulerPolicy "active" generation 1'), tally(7, 0), 1.0, T0
    )
    store.record_status("twin", {**store.desired_status("twin", T0), "shadow": written})
    runner = ShadowRunner(seed=1)
    runner.update(store.shadows(), store.active(), store.profiles())
    writer = FakeWriter()
    writer.stored["twin"] = {"shadow": dict(written)}  # what the API server holds
    reporter = ShadowReporter(runner, store, writer, clock=lambda: T1)  # type: ignore[arg-type]
    schedule_batch(store.profiles(), workload(2), cluster(), random.Random(1), 0, runner.observe)
    assert await reporter.flush() == 1
    figures = writer.stored["twin"]["shadow"]
    assert (figures["evaluated"], figures["agreed"], figures["since"]) == (10, 10, T0)


# ------------------------------------------------------------------------------------- pod groups

PACKING = {"priorities": [{"name": "MostRequestedPriority", "weight": 1}]}
SPREADING = {"priorities": [{"name": "LeastRequestedPriority", "weight": 1}]}
TRAIN = {
    "apiVersion": "scheduling.x-k8s.io/v1alpha1",
    "kind": "PodGroup",
    "metadata": {"name": "train", "namespace": "default", "uid": "pg-train"},
    "spec": {"minMember": 5},
}


def gang() -> tuple[Snapshot, list[Pod]]:
    """Two empty 4-cpu nodes and a group of five: four 1-cpu members, then one of 4 cpu. Packed, the
    small ones fill one node and the large one takes the other; spread, the large one finds no room."""
    from kubesched.model.nodeinfo import ClusterObjects, NodeInfo

    nodes = [NodeInfo(node_from_dict(make_node(f"n{i}", cpu="4", memory="8Gi"))) for i in range(2)]
    label = {"scheduling.x-k8s.io/pod-group": "train"}
    pods = [make_pod(f"small-{i}", scheduler_name=OWN, cpu="1", labels=label) for i in range(4)]
    pods.append(make_pod("large", scheduler_name=OWN, cpu="4", labels=label))
    objects = ClusterObjects(pod_groups={"default/train": TRAIN})
    return Snapshot.of(nodes, objects), [pod_from_dict(p) for p in pods]


def run_gang(active: Mapping[str, Any], shadow: Mapping[str, Any]) -> tuple[list[Any], Tally]:
    store = PolicyStore(OWN)
    store.upsert(policy("active", {**active, "schedulerName": OWN}))
    store.upsert(policy("shadow", {**shadow, "schedulerName": OWN, "mode": "Shadow"}, created=T1))
    runner = ShadowRunner(seed=99, wall_clock=lambda: T1)
    profiles: dict[str, Algorithm] = store.profiles()
    runner.update(store.shadows(), store.active(), profiles)
    snapshot, pods = gang()
    outcomes, _ = schedule_batch(profiles, pods, snapshot, random.Random(1), 0, runner.observe)
    (tally,) = runner.take().values()
    return outcomes, tally


def test_a_shadow_that_cannot_place_a_group_whole_disagrees_on_every_member() -> None:
    """algorithm/gang.py: a group is placed all or nothing, so the shadow decides it as a group: one
    by one on the active policy's snapshot, every member would fit somewhere."""
    outcomes, tally = run_gang(PACKING, SPREADING)
    assert all(isinstance(o, ScheduleResult) for o in outcomes)  # the active policy packs it
    assert tally.evaluated == 5 and tally.errors == 0
    assert tally.counts == {Verdict.SHADOW_ONLY_UNSCHEDULABLE: 5}
    why = (
        "pod group default/train: only 4 of 5 members can be placed: "
        "0/2 nodes are available: 2 Insufficient cpu."
    )
    assert [d["pod"] for d in tally.disagreements] == [f"default/small-{i}" for i in range(4)] + [
        "default/large"
    ]
    assert all(d["shadow"] == {"unschedulable": why} for d in tally.disagreements)
    assert tally.disagreements[-1]["active"]["node"] in ("n0", "n1")


def test_the_other_way_round_every_member_is_unschedulable_in_the_active_policy_only() -> None:
    outcomes, tally = run_gang(SPREADING, PACKING)
    assert all(isinstance(o, FitError) for o in outcomes)
    assert tally.counts == {Verdict.ACTIVE_ONLY_UNSCHEDULABLE: 5}


def test_an_identical_shadow_agrees_on_every_member_of_a_group() -> None:
    """Ties broken otherwise by the shadow's own random source do not count against the next members:
    each is compared where the active policy placed it."""
    _, tally = run_gang(PACKING, PACKING)
    assert tally.counts == {Verdict.SAME_NODE: 5} and tally.disagreements == []
    _, tally = run_gang(SPREADING, SPREADING)
    assert tally.counts == {Verdict.BOTH_UNSCHEDULABLE: 5}
