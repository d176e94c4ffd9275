"""ElasticQuota admission (algorithm/admission.py) alone, in batches and gangs, and the cache's accounting."""

from __future__ import annotations

import dataclasses
import random
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

import pytest
from hypothesis import Phase, given, settings
from hypothesis import strategies as st

from kubesched.algorithm.admission import QuotaError, refusal
from kubesched.algorithm.batch import schedule_batch
from kubesched.algorithm.gang import GangFitError
from kubesched.algorithm.generic import Algorithm, ScheduleResult
from kubesched.algorithm.preemption import PreemptionOutcome
from kubesched.model.nodeinfo import ClusterObjects, Snapshot
from kubesched.model.objects import Pod, node_from_dict, pod_from_dict
from kubesched.model.podgroup import POD_GROUP_LABEL
from kubesched.model.quota import CLUSTER, ElasticQuota, QuotaState, elastic_quota_from_dict, request
from kubesched.policy.compile import PolicyError, compile_policy, default_algorithm
from kubesched.runtime.cache import SchedulerCache
from kubesched_dev.fixtures import make_node, make_pod, node_info

GPU = "example.com/gpu"
ALGORITHM = default_algorithm()
PROFILES: dict[str, Algorithm] = {"kubesched": ALGORITHM}


def eq(
    namespace: str, min: Mapping[str, Any] | None = None, max: Mapping[str, Any] | None = None
) -> dict[str, Any]:
    spec = {k: dict(v) for k, v in (("min", min), ("max", max)) if v is not None}
    meta = {"namespace": namespace, "name": f"eq-{namespace}", "uid": f"uid-{namespace}"}
    return {"metadata": {**meta, "creationTimestamp": "2026-01-01T00:00:00Z"}, "spec": spec}


def pod(
    name: str, namespace: str, *, gpu: int = 0, memory: str | None = None, priority: int = 0, **extra: Any
) -> Pod:
    extended = {GPU: str(gpu)} if gpu else None
    raw = make_pod(name, namespace, memory=memory, priority=priority, extended=extended, **extra)
    raw["metadata"]["uid"] = f"{namespace}-{name}"
    return pod_from_dict(raw)


def state(quotas: Mapping[str, ElasticQuota], used: Mapping[str, Mapping[str, int]]) -> QuotaState:
    return QuotaState(dict(quotas), {ns: dict(u) for ns, u in used.items()})


def memory_quota(namespace: str, low: int, high: int) -> ElasticQuota:
    return elastic_quota_from_dict(eq(namespace, {"memory": low}, {"memory": high}))


# --------------------------------------------------- upstream's TestPreFilter, ported
# kubernetes-sigs/scheduler-plugins, pkg/capacityscheduling/capacity_scheduling_test.go, TestPreFilter:
# each pod is checked against the same state (PreFilter reserves nothing).

PREFILTER_CASES = [
    pytest.param(
        [("ns1-p1", "ns1", 500), ("ns1-p2", "ns1", 1800)],
        {"ns1": (1000, 2000, 300)},
        [True, False],
        id="pod subjects to ElasticQuota",
    ),
    pytest.param(
        [("ns2-p1", "ns2", 500)],
        {"ns1": (1000, 2000, 1800), "ns2": (1000, 2000, 200)},
        [False],
        id="the sum of used is bigger than the sum of min",
    ),
    pytest.param([("ns2-p1", "ns2", 500)], {}, [True], id="without elasticQuotaInfo"),
]


@pytest.mark.parametrize(("pods", "quotas", "admitted"), PREFILTER_CASES)
def test_upstream_prefilter_cases(
    pods: Sequence[tuple[str, str, int]], quotas: Mapping[str, tuple[int, int, int]], admitted: Sequence[bool]
) -> None:
    current = state(
        {ns: memory_quota(ns, low, high) for ns, (low, high, _) in quotas.items()},
        {ns: {"memory": used} for ns, (_, _, used) in quotas.items()},
    )
    for (name, namespace, memory), expected in zip(pods, admitted, strict=True):
        key, why = refusal(current, [pod(name, namespace, memory=str(memory))])
        assert (key == "") is expected, (name, key, why)


# --------------------------------------------------- the rules and their messages


def gpu_state(a_used: int = 0, b_used: int = 0) -> QuotaState:
    quotas = {
        "a": elastic_quota_from_dict(eq("a", {GPU: 4}, {GPU: 6})),
        "b": elastic_quota_from_dict(eq("b", {GPU: 6}, {GPU: 8})),
    }
    return state(quotas, {"a": {GPU: a_used}, "b": {GPU: b_used}})


def test_over_max_names_the_quota_the_resource_and_the_amounts() -> None:
    assert refusal(gpu_state(a_used=6), [pod("p", "a", gpu=2)]) == (
        "a/eq-a",
        f"over max: {GPU} 8 > 6",
    )
    error = QuotaError(pod("p", "a", gpu=2), 1, "a/eq-a", f"over max: {GPU} 8 > 6")
    assert error.summary() == f"0/1 nodes are available: ElasticQuota a/eq-a: over max: {GPU} 8 > 6."


def test_borrowing_is_bounded_by_the_others_unused_mins_unless_cluster() -> None:
    # a at 4 (its min), b at 5 of 6: a may borrow b's one unused unit, not two.
    assert refusal(gpu_state(4, 5), [pod("p", "a", gpu=1)]) == ("", "")
    key, why = refusal(gpu_state(4, 5), [pod("p", "a", gpu=2)])
    assert key == "a/eq-a" and why == f"the quotas' total use would pass the sum of their mins: {GPU} 11 > 10"
    assert refusal(gpu_state(4, 5), [pod("p", "a", gpu=2)], borrowing=CLUSTER) == ("", "")
    # Max still holds with Cluster.
    assert refusal(gpu_state(6, 0), [pod("p", "a", gpu=1)], borrowing=CLUSTER)[0] == "a/eq-a"


def test_a_namespace_without_quota_is_never_refused() -> None:
    assert refusal(gpu_state(6, 8), [pod("p", "elsewhere", gpu=100)]) == ("", "")


def test_nominated_pods_count_as_upstream_counts_them() -> None:
    incoming = pod("p", "a", gpu=1, priority=10)
    # Same quota: only those of equal or higher priority hold room.
    assert refusal(gpu_state(4), [incoming], [pod("hi", "a", gpu=2, priority=10)])[0] == "a/eq-a"
    assert refusal(gpu_state(4), [incoming], [pod("lo", "a", gpu=2, priority=5)]) == ("", "")
    # Another quota's nominated pods count towards the mins only while that quota is within its min.
    assert refusal(gpu_state(4, 4), [incoming], [pod("b1", "b", gpu=2)])[0] == "a/eq-a"
    # b over its min (7 of 6): its nominated pod is not counted, yet the total (4 + 7 + 1) passes 10.
    assert refusal(gpu_state(4, 7), [incoming], [pod("b1", "b", gpu=2)])[0] == "a/eq-a"
    assert refusal(gpu_state(2, 7), [incoming], [pod("b1", "b", gpu=2)]) == ("", "")
    assert refusal(gpu_state(2, 5), [incoming], [pod("b1", "b", gpu=3)])[0] == "a/eq-a"
    # The pod itself, nominated already, is not counted twice.
    assert refusal(gpu_state(4, 5), [incoming], [incoming]) == ("", "")


# --------------------------------------------------- in a batch: each decision sees the previous


def gpu_cluster(bound: Sequence[Pod] = (), quotas: Sequence[dict[str, Any]] = (), gpus: int = 10) -> Snapshot:
    node = node_from_dict(make_node("n1", cpu="64", extended={GPU: str(gpus)}))
    objects = ClusterObjects(elastic_quotas={f"{q['metadata']['namespace']}/x": q for q in quotas})
    return Snapshot.of([node_info(node, bound)], objects)


KEP_QUOTAS = [eq("a", {GPU: 4}, {GPU: 6}), eq("b", {GPU: 6}, {GPU: 8})]


def kind(outcome: object) -> str:
    """The outcome's class; "QuotaError" for a refusal preemption found no victims for."""
    if isinstance(outcome, PreemptionOutcome) and isinstance(outcome.error, QuotaError):
        assert not outcome.preemption.node_name and not outcome.preemption.victims, outcome.preemption
        return "QuotaError"
    return type(outcome).__name__


def refused(outcome: object) -> QuotaError:
    """The QuotaError of a refused pod (preemption, which it went to, found no victims)."""
    assert kind(outcome) == "QuotaError", outcome
    assert isinstance(outcome, PreemptionOutcome) and isinstance(outcome.error, QuotaError)
    return outcome.error


def test_story_1_a_borrows_up_to_its_max_then_waits_naming_its_quota() -> None:
    """KEP 9, story 1: a (min 4, max 6) borrows from b (min 6, max 8, using 3)."""
    b_bound = [pod("b", "b", gpu=3, node_name="n1")]
    snap = gpu_cluster(b_bound, KEP_QUOTAS)
    assert snap.quotas.used_by("b") == {GPU: 3}
    pods = [pod(f"a{i}", "a", gpu=2) for i in range(4)]
    outcomes, _ = schedule_batch(PROFILES, pods, snap, random.Random(0), 0)
    assert [kind(o) for o in outcomes] == ["ScheduleResult"] * 3 + ["QuotaError"], outcomes
    message = f"0/1 nodes are available: ElasticQuota a/eq-a: over max: {GPU} 8 > 6."
    assert refused(outcomes[3]).summary() == message
    assert outcomes[3].summary() == message  # what FailedScheduling says


def test_a_refused_pod_evicts_no_pod_of_no_quota() -> None:
    """Evicting pods of no quota frees nothing of a's max: the refusal stands, with no victims."""
    low = [pod(f"x{i}", "x", gpu=2, priority=0, node_name="n1") for i in range(5)]
    snap = gpu_cluster([*low, pod("a0", "a", gpu=6, node_name="n1")], KEP_QUOTAS)
    outcomes, _ = schedule_batch(PROFILES, [pod("a1", "a", gpu=2, priority=100)], snap, random.Random(0), 0)
    assert refused(outcomes[0]).quota == "a/eq-a"
    message = f"0/1 nodes are available: ElasticQuota a/eq-a: over max: {GPU} 8 > 6."
    assert outcomes[0].summary().startswith(message)


# --------------------------------------------------- gangs: admitted as a unit


def member(name: str, gpu: int = 1) -> Pod:
    return pod(name, "a", gpu=gpu, labels={POD_GROUP_LABEL: "g"})


def group(min_member: int) -> dict[str, Any]:
    meta = {"namespace": "a", "name": "g", "uid": "uid-g", "creationTimestamp": "2026-01-01T00:00:00Z"}
    return {"metadata": meta, "spec": {"minMember": min_member}}


def gang_cluster(min_member: int, maximum: int) -> Snapshot:
    node = node_from_dict(make_node("n1", cpu="64", extended={GPU: "10"}))
    objects = ClusterObjects(
        pod_groups={"a/g": group(min_member)},
        elastic_quotas={"a/eq-a": eq("a", {GPU: maximum}, {GPU: maximum})},
    )
    return Snapshot.of([node_info(node)], objects)


def test_a_gang_its_quota_cannot_hold_places_nothing() -> None:
    outcomes, _ = schedule_batch(
        PROFILES, [member(f"m{i}") for i in range(4)], gang_cluster(4, 3), random.Random(0), 0
    )
    assert all(isinstance(o, GangFitError) for o in outcomes), outcomes
    assert {o.summary() for o in outcomes if isinstance(o, GangFitError)} == {
        f"pod group a/g: ElasticQuota a/eq-a refuses its 4 members still needed: over max: {GPU} 4 > 3."
    }


def test_a_gang_within_its_quota_places_min_member_and_the_rest_wait() -> None:
    outcomes, _ = schedule_batch(
        PROFILES, [member(f"m{i}") for i in range(4)], gang_cluster(3, 3), random.Random(0), 0
    )
    assert [kind(o) for o in outcomes] == ["ScheduleResult"] * 3 + ["QuotaError"], outcomes


# --------------------------------------------------- the property: max is never passed, use is exact

REQUESTS = ("cpu", "memory", GPU)


@settings(max_examples=5, deadline=None, phases=[Phase.explicit, Phase.generate])
@given(
    bounds=st.lists(
        st.tuples(st.integers(0, 40), st.integers(0, 40), st.integers(0, 12)), min_size=5, max_size=5
    ),
    seed=st.integers(0, 2**32 - 1),
    borrowing=st.sampled_from(["Guarantees", CLUSTER]),
)
def test_random_arrivals_and_departures_never_pass_a_max(
    bounds: list[tuple[int, int, int]], seed: int, borrowing: str
) -> None:
    """10,000 arrivals and departures over 5 quotas through admission and QuotaState."""
    rng = random.Random(seed)
    quotas = {}
    for i, (low, extra, gpu_max) in enumerate(bounds):
        ns = f"ns{i}"
        quotas[ns] = elastic_quota_from_dict(
            eq(ns, {"cpu": f"{low}00m", GPU: gpu_max // 2}, {"cpu": f"{low + extra}00m", GPU: gpu_max})
        )
    current = QuotaState(quotas, {})
    templates = [
        pod(f"t{i}", f"ns{i % 6}", gpu=rng.randint(0, 3), cpu=f"{rng.randint(0, 9)}00m", memory="1Mi")
        for i in range(60)
    ]
    placed: dict[str, Pod] = {}
    admitted = 0
    expected: dict[str, Counter[str]] = {}
    for step in range(10_000):
        if placed and rng.random() < 0.45:
            uid = rng.choice(sorted(placed))
            gone = placed.pop(uid)
            current = current.without_pod(gone)
            expected.setdefault(gone.namespace, Counter()).subtract(request(gone))
        else:
            template = rng.choice(templates)
            arriving = dataclasses.replace(template, uid=f"u{step}", node_name="n1")
            if refusal(current, [arriving], borrowing=borrowing)[0]:
                continue
            current = current.with_pod(arriving)
            placed[arriving.uid] = arriving
            admitted += 1
            expected.setdefault(arriving.namespace, Counter()).update(request(arriving))
        for ns, quota in quotas.items():
            used = current.used_by(ns)
            assert used == {k: v for k, v in expected.get(ns, Counter()).items() if v}, (step, ns)
            for name, limit in quota.max.items():
                assert used.get(name, 0) <= limit, (step, ns, name, used, quota.max)
    assert admitted  # the walk did place pods (those of the namespace without a quota at least)


# --------------------------------------------------- the cache keeps the use pod by pod


def test_the_cache_counts_bound_and_assumed_pods_and_forgets_them() -> None:
    cache = SchedulerCache()
    cache.set_node(node_from_dict(make_node("n1", extended={GPU: "10"})))
    cache.set_pod(pod("b1", "a", gpu=2, node_name="n1"))
    assert not cache.snapshot().quotas  # no quota yet: nothing limits anyone
    cache.set_object("ElasticQuota", "a/eq-a", eq("a", {GPU: 4}, {GPU: 6}))
    assert cache.snapshot().quotas.used_by("a") == {GPU: 2}  # the pods before the quota count too
    cache.assume(pod("p2", "a", gpu=3), "n1")
    assert cache.snapshot().quotas.used_by("a") == {GPU: 5}
    cache.forget("a-p2")
    cache.remove_pod("a-b1")
    assert cache.snapshot().quotas.used_by("a") == {}
    cache.set_object("ElasticQuota", "a/eq-a", None)
    assert not cache.snapshot().quotas


def test_the_oldest_quota_of_a_namespace_is_in_force() -> None:
    cache = SchedulerCache()
    young = eq("a", None, {GPU: 1})
    young["metadata"].update(name="young", creationTimestamp="2026-02-01T00:00:00Z")
    cache.set_object("ElasticQuota", "a/young", young)
    cache.set_object("ElasticQuota", "a/eq-a", eq("a", None, {GPU: 6}))
    in_force = cache.quotas().of("a")
    assert in_force is not None and in_force.name == "eq-a"


# --------------------------------------------------- the policy setting


def test_the_policy_sets_borrowing_and_refuses_a_misspelt_value() -> None:
    assert default_algorithm().quota_borrowing == "Guarantees"
    algorithm = compile_policy({"quotas": {"borrowing": "Cluster"}})
    assert algorithm.quota_borrowing == CLUSTER
    assert algorithm.describe()["quotas"] == {"borrowing": "Cluster"}
    with pytest.raises(PolicyError) as caught:
        compile_policy({"quotas": {"borrowing": "cluster"}})
    assert caught.value.field == "quotas.borrowing"
    with pytest.raises(PolicyError) as caught:
        compile_policy({"quotas": {"borow": "Cluster"}})
    assert caught.value.field == "quotas.borow"


def test_cluster_borrowing_admits_what_guarantees_refuses_in_a_batch() -> None:
    snap = gpu_cluster([pod("b", "b", gpu=5, node_name="n1")], KEP_QUOTAS, gpus=20)
    pods = [pod(f"a{i}", "a", gpu=1) for i in range(7)]
    guarded, _ = schedule_batch(PROFILES, pods, snap, random.Random(0), 0)
    assert sum(isinstance(o, ScheduleResult) for o in guarded) == 5  # its min 4 + b's one unused unit
    lenient = {"kubesched": dataclasses.replace(ALGORITHM, quota_borrowing=CLUSTER)}
    free, _ = schedule_batch(lenient, pods, snap, random.Random(0), 0)
    assert sum(isinstance(o, ScheduleResult) for o in free) == 6  # up to its max
