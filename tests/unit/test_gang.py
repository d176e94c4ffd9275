"""Gangs: a PodGroup's members placed all or nothing within one batch (algorithm/gang.py, through
`schedule_batch`), with coscheduling's semantics (scheduler-plugins pkg/coscheduling/coscheduling.go
and pkg/coscheduling/core/core.go): the PreFilter checks, minMember counted with the members
already bound, minResources against the cluster's free resources, preemption and reservation."""

from __future__ import annotations

import dataclasses
import pickle
import random
from collections.abc import Iterable, Mapping, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kubesched.algorithm.batch import Outcome, schedule_batch
from kubesched.algorithm.gang import GangFitError, GangState, free_resources, schedule_gang, shortfall
from kubesched.algorithm.generic import Algorithm, FitError, ScheduleResult
from kubesched.algorithm.preemption import PreemptionOutcome
from kubesched.model.nodeinfo import ClusterObjects, Snapshot
from kubesched.model.objects import Node, Pod, node_from_dict, pod_from_dict
from kubesched.model.podgroup import LEGACY_POD_GROUP_LABEL, POD_GROUP_LABEL, pod_group_from_dict
from kubesched.model.resources import Resource
from kubesched.plugins.framework import SKIP, Predicate
from kubesched.policy.compile import default_algorithm
from kubesched_dev.fixtures import make_node, make_pod, node_info

SCHEDULER = "kubesched"  # make_pod's default schedulerName
ALGORITHM = default_algorithm()
PROFILES: dict[str, Algorithm] = {SCHEDULER: ALGORITHM}
NS = "ns"
EPOCH = datetime(2024, 1, 1, tzinfo=UTC)
SEED_NODES = [f"n{i}" for i in range(1, 4)]


def node(name: str, cpu: str = "4", pods: str = "110", extended: Mapping[str, str] | None = None) -> Node:
    return node_from_dict(make_node(name, cpu=cpu, pods=pods, extended=extended))


def pod(
    name: str,
    cpu: str = "1",
    *,
    group: str = "",
    priority: int | None = None,
    on: str | None = None,
    scheduler_name: str = SCHEDULER,
    created: int = 0,
    extended: Mapping[str, str] | None = None,
) -> Pod:
    """A pod in NS asking for `cpu`, a member of `group` when given, bound to `on` when given;
    `created` minutes after EPOCH."""
    labels = {POD_GROUP_LABEL: group} if group else None
    raw = make_pod(
        name,
        NS,
        scheduler_name,
        cpu=cpu,
        labels=labels,
        priority=priority,
        node_name=on,
        extended=extended,
    )
    raw["metadata"]["creationTimestamp"] = (EPOCH + timedelta(minutes=created)).strftime("%Y-%m-%dT%H:%M:%SZ")
    if on is not None:
        raw["status"]["phase"] = "Running"
    return pod_from_dict(raw)


def members(group: str, count: int, cpu: str = "1", **kwargs: Any) -> list[Pod]:
    return [pod(f"{group}-{i}", cpu, group=group, **kwargs) for i in range(count)]


def pod_group(
    name: str = "g", min_member: int = 3, min_resources: Mapping[str, str] | None = None, created: int = 0
) -> dict[str, Any]:
    """A PodGroup as the API server returns it (apis/scheduling/v1alpha1/types.go)."""
    spec: dict[str, Any] = {"minMember": min_member}
    if min_resources is not None:
        spec["minResources"] = dict(min_resources)
    return {
        "apiVersion": "scheduling.x-k8s.io/v1alpha1",
        "kind": "PodGroup",
        "metadata": {
            "namespace": NS,
            "name": name,
            "uid": f"uid-{name}",
            "creationTimestamp": (EPOCH + timedelta(minutes=created)).strftime("%Y-%m-%dT%H:%M:%SZ"),
        },
        "spec": spec,
    }


def cluster(
    nodes: Sequence[Node], bound: Iterable[Pod] = (), groups: Iterable[dict[str, Any]] = ()
) -> Snapshot:
    """The nodes, in this order, running the `bound` pods, with these PodGroups."""
    on: dict[str, list[Pod]] = {}
    for p in bound:
        on.setdefault(p.node_name, []).append(p)
    raw = {f"{g['metadata']['namespace']}/{g['metadata']['name']}": g for g in groups}
    infos = [node_info(n, on.get(n.name, ())) for n in nodes]
    return Snapshot.of(infos, ClusterObjects(pod_groups=raw))


def run(
    pods: Sequence[Pod],
    snap: Snapshot,
    *,
    seed: int = 0,
    start: int = 0,
    profiles: Mapping[str, Algorithm] = PROFILES,
    gangs: Mapping[str, GangState] | None = None,
) -> tuple[list[Outcome], int]:
    return schedule_batch(profiles, pods, snap, random.Random(seed), start, gangs=gangs)


def placements(pods: Sequence[Pod], outcomes: Sequence[Outcome]) -> dict[str, str]:
    """Pod name -> node, for the pods placed."""
    return {
        p.name: outcome.node_name
        for p, outcome in zip(pods, outcomes, strict=True)
        if isinstance(outcome, ScheduleResult)
    }


def overcommitted(snap: Snapshot, pods: Sequence[Pod], outcomes: Sequence[Outcome]) -> dict[str, int]:
    """The nodes whose cpu requests (bound pods and those placed) exceed allocatable, with the excess."""
    load = {info.name: info.requested.milli_cpu for info in snap.nodes}
    for p, outcome in zip(pods, outcomes, strict=True):
        if isinstance(outcome, ScheduleResult):
            load[outcome.node_name] += p.requests.milli_cpu
    excess = {}
    for info in snap.nodes:
        over = load[info.name] - info.node.allocatable.milli_cpu
        if over > 0:
            excess[info.name] = over
    return excess


def describe(pods: Sequence[Pod], outcomes: Sequence[Outcome]) -> str:
    lines = []
    for p, outcome in zip(pods, outcomes, strict=True):
        what = (
            outcome.node_name
            if isinstance(outcome, ScheduleResult)
            else f"{type(outcome).__name__}: {outcome}"
        )
        lines.append(f"  {p.name} ({p.requests.milli_cpu}m): {what}")
    return "\n".join(lines)


def gang_error(outcome: Outcome) -> GangFitError | None:
    """The GangFitError behind an outcome (bare, or inside a PreemptionOutcome), else None."""
    if isinstance(outcome, PreemptionOutcome):
        outcome = outcome.error
    return outcome if isinstance(outcome, GangFitError) else None


# ----------------------------------------------------------------------------- all or nothing


def test_a_group_that_fits_is_placed_whole_each_member_seeing_the_previous() -> None:
    """coscheduling.go Permit: the group goes when minMember of its members are assumed. Three
    members of 3 cpu on three nodes of 4: one per node, or some node would be overcommitted."""
    gang = members("g", 3, "3")
    snap = cluster([node(n) for n in SEED_NODES], groups=[pod_group()])
    for seed in range(10):
        outcomes, _ = run(gang, snap, seed=seed)
        assert all(isinstance(o, ScheduleResult) for o in outcomes), describe(gang, outcomes)
        assert sorted(placements(gang, outcomes).values()) == SEED_NODES, describe(gang, outcomes)
        assert not overcommitted(snap, gang, outcomes)


def short_cluster() -> Snapshot:
    """n1 has 4 cpu free, n2 3, n3 0.5: two members of 3 cpu fit, a third does not; a 2-cpu pod goes
    to n1 on this cluster, and fits nowhere once two members are on it."""
    bound = [pod("other-1", "1", on="n2"), pod("other-2", "3500m", on="n3")]
    return cluster([node(n) for n in SEED_NODES], bound, [pod_group()])


def test_a_group_one_member_short_places_none_and_each_member_says_why() -> None:
    """core.go PreFilter / coscheduling.go Permit: fewer than minMember can be placed, so none is;
    every member gets the same message, with the first failing member's reasons."""
    gang = members("g", 3, "3")
    outcomes, _ = run(gang, short_cluster())
    expected = (
        "pod group ns/g: only 2 of 3 members can be placed: 0/3 nodes are available: 3 Insufficient cpu."
    )
    for outcome in outcomes:
        error = gang_error(outcome)
        assert error is not None and not isinstance(outcome, PreemptionOutcome), describe(gang, outcomes)
        assert error.key == "ns/g"
        assert error.summary() == expected
        assert str(error) == expected


def test_a_group_short_leaves_the_snapshot_as_it_was_for_the_next_pod() -> None:
    snap = short_cluster()
    plain = pod("plain", "2")
    (alone,), _ = run([plain], snap)
    assert isinstance(alone, ScheduleResult) and alone.node_name == "n1"

    gang = members("g", 3, "3")
    for seed in range(5):
        outcomes, _ = run([*gang, plain], snap, seed=seed)
        assert isinstance(outcomes[-1], ScheduleResult), describe([*gang, plain], outcomes)
        assert outcomes[-1].node_name == "n1"
        assert not placements(gang, outcomes[:3])


def test_schedule_gang_returns_the_snapshot_and_start_it_was_given_when_short() -> None:
    snap = short_cluster()
    gang = members("g", 3, "3")
    state = GangState(pod_group_from_dict(pod_group()), 3)
    calls: list[str] = []

    def place(p: Pod, view: Snapshot, at: int) -> tuple[Any, Snapshot, int]:
        calls.append(p.name)
        try:
            result = ALGORITHM.schedule(p, view, random.Random(0), at)
        except FitError as error:
            return error, view, at
        return result, view.with_pod_on(p, result.node_name), at + 7

    nominated: dict[str, tuple[Pod, str]] = {}
    outcomes, after, start = schedule_gang(gang, state, PROFILES, snap, random.Random(0), 5, place, nominated)
    assert calls == ["g-0", "g-1", "g-2"]
    assert after is snap
    assert start == 5
    assert nominated == {}
    assert all(gang_error(o) for o in outcomes)


def test_a_group_short_gives_back_the_start_index_it_was_given() -> None:
    """With 200 nodes a placement moves the start index (numFeasibleNodesToFind: 100 of them); a
    group not placed must not, so the next pod starts where it would have without the group."""
    nodes = [node(f"n{i:03}") for i in range(200)]
    snap = cluster(nodes, groups=[pod_group(min_member=2)])
    gang = [pod("g-small", "1", group="g"), pod("g-huge", "64", group="g")]
    plain = pod("plain", "1")

    (placed,), moved = run([pod("lone", "1")], snap, start=7)
    assert isinstance(placed, ScheduleResult) and moved != 7  # so the check below can fail

    outcomes, start = run(gang, snap, start=7)
    assert not placements(gang, outcomes) and start == 7
    _, expected = run([plain], snap, start=7)
    outcomes, start = run([*gang, plain], snap, start=7)
    assert isinstance(outcomes[-1], ScheduleResult) and start == expected


# ----------------------------------------------------------------------------------- contention


@dataclasses.dataclass
class Contest:
    """Groups of equal priority that each fit the empty cluster alone and no two of which fit
    together: each asks for more than half the cluster's cpu, in pods of one size that divides a
    node's 4 cpu, so any placement of one group alone packs."""

    nodes: list[Node]
    groups: list[dict[str, Any]]
    members: dict[str, list[Pod]]
    order: list[Pod]  # every member, the groups interleaved at random
    seed: int

    def snapshot(self) -> Snapshot:
        return cluster(self.nodes, groups=self.groups)


@st.composite
def contests(draw: st.DrawFn) -> Contest:
    count = draw(st.integers(2, 5))
    names = draw(st.permutations([f"n{i}" for i in range(count)]))
    nodes = [node(n) for n in names]
    groups: list[dict[str, Any]] = []
    gang: dict[str, list[Pod]] = {}
    for g in ("a", "b", "c")[: draw(st.integers(2, 3))]:
        size = draw(st.sampled_from([1, 2, 4]))
        # More than half of the 4 * count cpus, at most all of them.
        number = draw(st.integers(2 * count // size + 1, 4 * count // size))
        groups.append(pod_group(g, number, created=draw(st.integers(0, 1000))))
        gang[g] = [
            pod(f"{g}-{i}", str(size), group=g, created=draw(st.integers(0, 1000))) for i in range(number)
        ]
    order = draw(st.permutations([p for ps in gang.values() for p in ps]))
    return Contest(nodes, groups, gang, list(order), draw(st.integers(0, 2**32)))


def check_one_group_placed(
    contest: Contest, decided: Mapping[str, Outcome], snap: Snapshot, first: str, seen: str
) -> None:
    placed = []
    for g, pods in contest.members.items():
        outcomes = [decided[p.uid] for p in pods]
        count = sum(isinstance(o, ScheduleResult) for o in outcomes)
        assert count in (0, len(pods)), f"group {g} placed {count} of {len(pods)}:\n{seen}"
        if count:
            placed.append(g)
            continue
        for outcome in outcomes:
            error = gang_error(outcome)
            assert error is not None and error.key == f"{NS}/{g}", seen
            assert error.summary().startswith(f"pod group {NS}/{g}: only "), error.summary()
            assert not isinstance(outcome, PreemptionOutcome) or not outcome.preemption.victims, seen
    assert placed == [first], f"placed {placed}, expected only {first}:\n{seen}"
    everyone = [p for ps in contest.members.values() for p in ps]
    assert not overcommitted(snap, everyone, [decided[p.uid] for p in everyone]), seen


@settings(max_examples=200, deadline=None)
@given(contests())
def test_of_groups_that_do_not_fit_together_exactly_one_is_placed_in_one_batch(contest: Contest) -> None:
    """coscheduling.go: a group's members are held at Permit until minMember arrive, and a race
    there can leave two groups each partly placed, both stuck. Decided together in one batch, the
    first group in the batch gets the room and the others wait whole."""
    snap = contest.snapshot()
    outcomes, _ = run(contest.order, snap, seed=contest.seed)
    decided = {p.uid: o for p, o in zip(contest.order, outcomes, strict=True)}
    first = contest.order[0].labels[POD_GROUP_LABEL]
    check_one_group_placed(contest, decided, snap, first, describe(contest.order, outcomes))


@settings(max_examples=200, deadline=None)
@given(contests(), st.randoms(use_true_random=False))
def test_of_groups_that_do_not_fit_together_the_first_batch_wins(
    contest: Contest, shuffle: random.Random
) -> None:
    """The same with each group in a batch of its own: the first batch's placements are assumed
    on the snapshot before the next, as the runtime's cache does."""
    snap = contest.snapshot()
    turns = list(contest.members)
    shuffle.shuffle(turns)
    decided: dict[str, Outcome] = {}
    seen = []
    current = snap
    for g in turns:
        batch = [p for p in contest.order if p.labels[POD_GROUP_LABEL] == g]
        outcomes, _ = run(batch, current, seed=contest.seed)
        seen.append(describe(batch, outcomes))
        for p, outcome in zip(batch, outcomes, strict=True):
            decided[p.uid] = outcome
            if isinstance(outcome, ScheduleResult):
                current = current.with_pod_on(
                    dataclasses.replace(p, node_name=outcome.node_name), outcome.node_name
                )
    check_one_group_placed(contest, decided, snap, turns[0], "\n".join(seen))


# ------------------------------------------------------------------------------ minMember counts


def test_members_beyond_min_member_are_ordinary_pods_once_the_group_is_placed() -> None:
    """coscheduling.go Permit: once minMember members are placed the others are allowed one by one;
    a member that does not fit then fails as any pod does, not for its group."""
    gang = members("g", 4, "4")
    snap = cluster([node(n) for n in SEED_NODES], groups=[pod_group(min_member=2)])
    outcomes, _ = run(gang, snap)
    assert len(placements(gang, outcomes)) == 3, describe(gang, outcomes)
    assert sorted(placements(gang, outcomes).values()) == SEED_NODES
    (last,) = [o for o in outcomes if not isinstance(o, ScheduleResult)]
    assert isinstance(last, FitError) and gang_error(last) is None, describe(gang, outcomes)
    assert last.summary() == "0/3 nodes are available: 3 Insufficient cpu."


def test_members_already_bound_count_toward_min_member() -> None:
    """core.go PreFilter/Permit count the group's pods already assumed or bound."""
    bound = [pod("g-0", "4", group="g", on="n1"), pod("g-1", "4", group="g", on="n2")]
    snap = cluster([node(n) for n in SEED_NODES], bound, [pod_group()])
    pending = pod("g-2", "4", group="g")
    (outcome,), _ = run([pending], snap)
    assert isinstance(outcome, ScheduleResult) and outcome.node_name == "n3", outcome


def test_a_short_group_counts_its_bound_members_in_the_message() -> None:
    bound = [pod("g-0", "4", group="g", on="n1")]
    snap = cluster([node("n1"), node("n2")], bound, [pod_group(min_member=4)])
    gang = [pod("g-1", "4", group="g"), pod("g-2", "4", group="g"), pod("g-3", "4", group="g")]
    outcomes, _ = run(gang, snap)
    for outcome in outcomes:
        error = gang_error(outcome)
        assert error is not None, describe(gang, outcomes)
        assert error.summary().startswith("pod group ns/g: only 2 of 4 members can be placed: 0/2 nodes"), (
            error
        )


def test_too_few_members_are_not_tried() -> None:
    """core.go PreFilter: "pre-filter pod ... cannot find enough sibling pods" when fewer than
    minMember pods of the group exist."""
    gang = members("g", 2)
    snap = cluster([node(n) for n in SEED_NODES], groups=[pod_group()])
    outcomes, _ = run(gang, snap)
    assert [str(o) for o in outcomes] == ["pod group ns/g: 2 of 3 members exist."] * 2
    assert all(gang_error(o) for o in outcomes)


def test_the_runtimes_count_of_members_wins_over_the_batchs() -> None:
    """A third member exists (gated, or still in the queue's backoff): the group passes the count and
    is short of room instead; and a stale lower count never holds back members the batch holds."""
    gang = members("g", 2)
    group = pod_group_from_dict(pod_group())
    snap = cluster([node(n) for n in SEED_NODES], groups=[pod_group()])
    outcomes, _ = run(gang, snap, gangs={"ns/g": GangState(group, exist=3)})
    assert [str(o) for o in outcomes] == ["pod group ns/g: only 2 of 3 members can be placed."] * 2

    three = members("g", 3)
    outcomes, _ = run(three, snap, gangs={"ns/g": GangState(group, exist=1)})
    assert len(placements(three, outcomes)) == 3, describe(three, outcomes)


def test_the_legacy_label_makes_a_member_too() -> None:
    raw = make_pod("old", NS, cpu="1", labels={LEGACY_POD_GROUP_LABEL: "g"})
    old = pod_from_dict(raw)
    snap = cluster([node(n) for n in SEED_NODES], groups=[pod_group()])
    outcomes, _ = run([*members("g", 2), old], snap)
    assert all(isinstance(o, ScheduleResult) for o in outcomes), outcomes


# ---------------------------------------------------------------------------- PreFilter checks


@pytest.mark.parametrize(
    ("groups", "pods", "message"),
    [
        pytest.param(
            [], members("g", 3), "the PodGroup does not exist; its members wait for it", id="missing"
        ),
        pytest.param(
            [pod_group(min_member=0)],
            members("g", 3),
            "the PodGroup is invalid: spec.minMember must be at least 1, got 0",
            id="invalid",
        ),
        pytest.param(
            [pod_group()],
            [*members("g", 2), pod("g-other", group="g", scheduler_name="other")],
            "its members use different scheduler names (kubesched, other), so none is placed",
            id="two-profiles",
        ),
    ],
)
def test_a_group_that_cannot_be_tried_places_nothing_and_says_why(
    groups: list[dict[str, Any]], pods: list[Pod], message: str
) -> None:
    """core.go PreFilter: the PodGroup must exist and be usable; coscheduling runs in one profile,
    so members split between two schedulers could never reach minMember in either."""
    snap = cluster([node(n) for n in SEED_NODES], groups=groups)
    profiles = {SCHEDULER: ALGORITHM, "other": ALGORITHM}
    outcomes, _ = run(pods, snap, profiles=profiles)
    assert [str(o) for o in outcomes] == [f"pod group ns/g: {message}."] * len(pods), describe(pods, outcomes)
    assert not placements(pods, outcomes)


def test_a_member_of_another_scheduler_outside_the_batch_holds_the_group() -> None:
    gang = members("g", 3)
    group = pod_group_from_dict(pod_group())
    snap = cluster([node(n) for n in SEED_NODES], groups=[pod_group()])
    state = GangState(group, exist=4, scheduler_names=frozenset({"other"}))
    outcomes, _ = run(gang, snap, gangs={"ns/g": state})
    assert not placements(gang, outcomes)
    assert "different scheduler names (kubesched, other)" in str(outcomes[0])


def ten_nodes(bound: Iterable[Pod] = (), **group: Any) -> Snapshot:
    return cluster([node(f"n{i}") for i in range(10)], bound, [pod_group(**group)])


def test_min_resources_beyond_the_clusters_free_resources_is_not_tried() -> None:
    """core.go CheckClusterResource: the nodes' free resources, summed, must cover minResources."""
    gang = members("g", 2, "100m")
    outcomes, _ = run(gang, ten_nodes(min_member=2, min_resources={"cpu": "64", "memory": "1Gi"}))
    assert [str(o) for o in outcomes] == [
        "pod group ns/g: the cluster's free resources cannot cover minResources (cpu 64 needed, 40 free)."
    ] * 2


def test_min_resources_counts_what_bound_members_hold() -> None:
    """core.go getNodeResource: the group's own pods on a node are taken off it before its free
    resources are counted, so what they hold counts toward minResources."""
    gang = [pod("g-1", "1", group="g")]
    member_bound = pod("g-0", "4", group="g", on="n0")
    outcomes, _ = run(gang, ten_nodes([member_bound], min_member=2, min_resources={"cpu": "40"}))
    assert isinstance(outcomes[0], ScheduleResult), outcomes

    stranger = pod("stranger", "4", on="n0")
    outcomes, _ = run(gang, ten_nodes([stranger], min_member=1, min_resources={"cpu": "40"}))
    assert str(outcomes[0]) == (
        "pod group ns/g: the cluster's free resources cannot cover minResources (cpu 40 needed, 36 free)."
    )


def test_min_resources_counts_free_pod_slots() -> None:
    """core.go getNodeResource: a node's free pods are its allowed pods less the pods it runs."""
    bound = [pod("a", "100m", on="n1"), pod("b", "100m", on="n1")]
    snap = cluster([node("n1", pods="3")], bound, [pod_group(min_member=2, min_resources={"pods": "2"})])
    gang = members("g", 2, "100m")
    outcomes, _ = run(gang, snap)
    assert [str(o) for o in outcomes] == [
        "pod group ns/g: the cluster's free resources cannot cover minResources (pods 2 needed, 1 free)."
    ] * 2


def test_an_overcommitted_node_frees_nothing_but_takes_nothing_from_the_others() -> None:
    """A node whose device plugin went away reports 0 GPUs while its pods still hold 2: its
    shortfall counts as nothing free there, not as GPUs taken from the other nodes."""
    gpu = "example.com/gpu"
    nodes = [node("n1", extended={gpu: "0"}), node("n2", extended={gpu: "4"})]
    bound = [pod("trainer", "1", on="n1", extended={gpu: "2"})]
    assert free_resources(cluster(nodes, bound)).scalar.get(gpu) == 4
    snap = cluster(nodes, bound, [pod_group(min_member=2, min_resources={gpu: "4"})])
    gang = members("g", 2, "1", extended={gpu: "2"})
    outcomes, _ = run(gang, snap)
    assert sorted(placements(gang, outcomes).values()) == ["n2", "n2"], describe(gang, outcomes)


def test_shortfall_names_each_resource_it_cannot_cover() -> None:
    needed = Resource(milli_cpu=64_000, memory=2048, scalar={"example.com/gpu": 2})
    free = Resource(milli_cpu=40_500, memory=4096, scalar={})
    assert shortfall(needed, free) == ["cpu 64000m needed, 40500m free", "example.com/gpu 2 needed, 0 free"]
    assert shortfall(free, free) == []


def test_shortfall_writes_needed_and_free_in_one_unit() -> None:
    """ "cpu 100 needed, 14900m free" read as 100 millicores; bytes read as nothing at all."""
    needed = Resource(milli_cpu=100_000, memory=2 << 30, ephemeral_storage=3 << 30)
    free = Resource(milli_cpu=14_900, memory=512 << 20, ephemeral_storage=1_000_000_000)
    assert shortfall(needed, free) == [
        "cpu 100000m needed, 14900m free",
        "memory 2048Mi needed, 512Mi free",
        f"ephemeral-storage {3 << 30} needed, 1000000000 free",
    ]
    assert shortfall(Resource(milli_cpu=2000, memory=1 << 30), Resource()) == [
        "cpu 2 needed, 0 free",
        "memory 1Gi needed, 0Gi free",
    ]


# ----------------------------------------------------------------------------------- preemption


def test_a_gang_preempts_only_for_the_members_that_need_it_and_places_nothing_yet() -> None:
    """The group evicts when, after the evictions, every member it still needs fits: the member that
    needs room names its victims, the others are nominated where they fit (coscheduling.go
    PostFilter gives up on the group when even that cannot place minMember). Nothing is bound in
    this cycle: the victims must go first."""
    low = pod("low", "4", priority=0, on="n3")
    snap = cluster([node(n) for n in SEED_NODES], [low], [pod_group()])
    gang = members("g", 3, "4", priority=100)
    for seed in range(5):
        outcomes, _ = run(gang, snap, seed=seed)
        assert not placements(gang, outcomes), describe(gang, outcomes)
        nominated: dict[str, tuple[str, ...]] = {}
        for outcome in outcomes:
            assert isinstance(outcome, PreemptionOutcome) and gang_error(outcome), describe(gang, outcomes)
            step = outcome.preemption
            nominated[step.node_name] = tuple(v.name for v in step.victims)
        assert nominated == {"n1": (), "n2": (), "n3": ("low",)}, describe(gang, outcomes)


def test_a_gang_that_would_not_fit_even_after_evictions_evicts_nobody() -> None:
    low = pod("low", "4", priority=0, on="n2")
    snap = cluster([node("n1"), node("n2")], [low], [pod_group()])
    gang = members("g", 3, "4", priority=100)
    outcomes, _ = run(gang, snap)
    assert not placements(gang, outcomes)
    for outcome in outcomes:
        assert gang_error(outcome) is not None, describe(gang, outcomes)
        assert not isinstance(outcome, PreemptionOutcome) or not outcome.preemption.node_name, outcome
        assert str(outcome).startswith("pod group ns/g: only 1 of 3 members can be placed: ")


def test_a_gang_does_not_preempt_for_room_a_higher_priority_pod_is_nominated_to() -> None:
    """The room preemption frees on n3 is already promised to a pod of higher priority nominated
    there (1.20's RunFilterPluginsWithNominatedPods counts it): the gang cannot use it, so it evicts
    nobody, as a plain pod would not."""
    low = pod("low", "4", priority=0, on="n3")
    snap = cluster([node(n) for n in SEED_NODES], [low], [pod_group()])
    gang = members("g", 3, "4", priority=100)
    urgent = pod("urgent", "4", priority=200)
    outcomes, _ = schedule_batch(
        PROFILES, gang, snap, random.Random(0), 0, nominated={urgent.uid: (urgent, "n3")}
    )
    seen = describe(gang, outcomes)
    assert not placements(gang, outcomes), seen
    victims = [v.name for o in outcomes if isinstance(o, PreemptionOutcome) for v in o.preemption.victims]
    assert victims == [], seen
    # Without the nomination the same gang does evict `low`: the test can tell the two apart.
    outcomes, _ = run(gang, snap)
    assert [v.name for o in outcomes if isinstance(o, PreemptionOutcome) for v in o.preemption.victims] == [
        "low"
    ], describe(gang, outcomes)


def test_lower_priority_pods_later_in_the_batch_leave_room_for_a_preempting_gang() -> None:
    low = pod("low", "4", priority=0, on="n3")
    snap = cluster([node(n) for n in SEED_NODES], [low], [pod_group()])
    gang = members("g", 3, "4", priority=100)
    small = pod("small", "1", priority=0)
    outcomes, _ = run([*gang, small], snap)
    assert not isinstance(outcomes[-1], ScheduleResult), describe([*gang, small], outcomes)


# ---------------------------------------------------------------------------------- reservation


@pytest.mark.parametrize("may_reserve", [True, False])
def test_a_reserving_group_holds_the_nodes_its_members_fit(may_reserve: bool) -> None:
    """A short group allowed to reserve has its members that fit nominated (no victims); pods of
    equal priority later in the batch see those nodes as taken, as kube-scheduler 1.20 counts
    nominated pods in RunFilterPluginsWithNominatedPods. Without it the small pod takes a node."""
    snap = cluster([node("n1"), node("n2")], groups=[pod_group()])
    gang = members("g", 3, "4")
    small = pod("small", "1")
    state = GangState(pod_group_from_dict(pod_group()), 3, may_reserve=may_reserve)
    outcomes, _ = run([*gang, small], snap, gangs={"ns/g": state})
    seen = describe([*gang, small], outcomes)
    assert not placements(gang, outcomes[:3]), seen
    reserved = [
        o.preemption for o in outcomes[:3] if isinstance(o, PreemptionOutcome) and o.preemption.node_name
    ]
    if may_reserve:
        assert sorted(r.node_name for r in reserved) == ["n1", "n2"], seen
        assert all(r.victims == () for r in reserved), seen
        assert all(gang_error(o) for o in outcomes[:3]), seen
        assert not isinstance(outcomes[-1], ScheduleResult), seen
    else:
        assert reserved == [], seen
        assert isinstance(outcomes[-1], ScheduleResult), seen


# ------------------------------------------------------------------------------------------- bugs


class Explodes(Predicate):
    """A filter with a bug that one pod, `boom`, runs into."""

    name = "Explodes"

    def prefilter(self, pod: Pod, snapshot: Snapshot) -> Any:
        if pod.name.endswith("boom"):
            raise RuntimeError("bug in a filter")
        return SKIP


BUGGY = {SCHEDULER: dataclasses.replace(ALGORITHM, predicates=(*ALGORITHM.predicates, Explodes()))}


def test_a_bug_for_one_member_of_a_placed_group_is_its_outcome_alone() -> None:
    gang = [*members("g", 2), pod("g-boom", group="g")]
    snap = cluster([node(n) for n in SEED_NODES], groups=[pod_group(min_member=2)])
    plain = pod("plain", "1")
    outcomes, _ = run([*gang, plain], snap, profiles=BUGGY)
    seen = describe([*gang, plain], outcomes)
    assert isinstance(outcomes[0], ScheduleResult) and isinstance(outcomes[1], ScheduleResult), seen
    assert isinstance(outcomes[2], RuntimeError) and not isinstance(outcomes[2], FitError), seen
    assert isinstance(outcomes[3], ScheduleResult), seen


def test_a_bug_for_one_member_of_a_short_group_stays_a_bug_and_the_batch_goes_on() -> None:
    gang = [*members("g", 2), pod("g-boom", group="g")]
    snap = cluster([node(n) for n in SEED_NODES], groups=[pod_group()])
    plain = pod("plain", "1")
    outcomes, _ = run([*gang, plain], snap, profiles=BUGGY)
    seen = describe([*gang, plain], outcomes)
    assert [str(o) for o in outcomes[:2]] == ["pod group ns/g: only 2 of 3 members can be placed."] * 2, seen
    assert isinstance(outcomes[2], RuntimeError) and str(outcomes[2]) == "bug in a filter", seen
    assert isinstance(outcomes[3], ScheduleResult), seen


def test_a_gang_fit_error_survives_a_round_trip_through_pickle() -> None:
    """Outcomes may cross a process boundary (FitError and PreemptionOutcome define __reduce__)."""
    low = pod("low", "4", priority=0, on="n3")
    snap = cluster([node(n) for n in SEED_NODES], [low], [pod_group()])
    gang = members("g", 3, "4", priority=100)
    short = members("g", 3, "3")
    outcomes = [*run(gang, snap)[0], *run(short, short_cluster())[0]]
    for outcome in outcomes:
        assert isinstance(outcome, FitError), outcome
        copy = pickle.loads(pickle.dumps(outcome))
        assert type(copy) is type(outcome) and copy.summary() == outcome.summary()
        error = gang_error(copy)
        assert error is not None and error.key == "ns/g", copy
