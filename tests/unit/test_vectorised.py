"""The vectorised filters and scores decide exactly as the per-node ones do.

The per-node path (`Algorithm(vectorised=False)`) is the reference, itself tested against
kube-scheduler's documented behaviour; here random clusters and pods go through both paths, pod
after pod on the same evolving snapshot, and every decision must be identical: the node chosen
(same seed), the nodes examined, the scores, and each failed node's reasons.
"""

from __future__ import annotations

import json
import random
from dataclasses import replace
from typing import Any

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kubesched.algorithm.generic import Algorithm, FitError
from kubesched.model.nodeinfo import ClusterObjects, NodeInfo, Snapshot
from kubesched.model.objects import node_from_dict, pod_from_dict
from kubesched.model.selectors import LabelSelector
from kubesched.model.table import LIMIT, NodeColumns, NodeUsage
from kubesched.policy.compile import compile_policy, default_algorithm
from kubesched.runtime.cache import SchedulerCache
from kubesched_dev.fixtures import SEED_POLICY, make_node, make_pod

ZONE = "topology.kubernetes.io/zone"
ZONES = ("a", "b", "c")
DISKS = ("ssd", "hdd")
TAINTS = (
    {"key": "dedicated", "value": "db", "effect": "NoSchedule"},
    {"key": "spot", "value": "yes", "effect": "PreferNoSchedule"},
    {"key": "drain", "value": "", "effect": "NoExecute"},
)

IMAGES = ("example.com/web:1", "example.com/db:2")
SIZES = (30 * 2**20, 300 * 2**20, 2 * 2**30)
PREFER_AVOID_PODS_ANNOTATION = "scheduler.alpha.kubernetes.io/preferAvoidPods"
AVOID_RS = json.dumps(
    {
        "preferAvoidPods": [
            {"podSignature": {"podController": {"kind": "ReplicaSet", "uid": "rs-1", "name": "rs"}}}
        ]
    }
)

POLICIES = {
    "seed": compile_policy(SEED_POLICY),
    "default": default_algorithm(),
    "most-requested": compile_policy(
        {
            "kind": "Policy",
            "apiVersion": "v1",
            "predicates": [{"name": "PodFitsResources"}, {"name": "MatchNodeSelector"}],
            "priorities": [
                {"name": "MostRequestedPriority", "weight": 2},
                {"name": "EvenPodsSpreadPriority", "weight": 1},
            ],
            "alwaysCheckAllPredicates": True,
        }
    ),
}


@st.composite
def nodes(draw: st.DrawFn) -> list[dict[str, Any]]:
    count = draw(st.integers(1, 12))
    made = []
    for i in range(count):
        labels: dict[str, str] = {}
        if draw(st.booleans()):
            labels[ZONE] = draw(st.sampled_from(ZONES))
        if draw(st.booleans()):
            labels["disk"] = draw(st.sampled_from(DISKS))
        node = make_node(
            f"n{i}",
            cpu=draw(st.sampled_from(["0", "500m", "1", "2", "4"])),
            memory=draw(st.sampled_from(["0", "512Mi", "1Gi", "4Gi"])),
            pods=draw(st.sampled_from(["0", "1", "3", "110"])),
            labels=labels,
            taints=draw(st.lists(st.sampled_from(TAINTS), max_size=2, unique_by=lambda t: t["key"])),
            unschedulable=draw(st.booleans()) and draw(st.booleans()),
        )
        images = draw(st.lists(st.sampled_from(IMAGES), max_size=2, unique=True))
        node["status"]["images"] = [
            {"names": [image], "sizeBytes": draw(st.sampled_from(SIZES))} for image in images
        ]
        if draw(st.integers(0, 4)) == 0:
            node["metadata"]["annotations"] = {PREFER_AVOID_PODS_ANNOTATION: AVOID_RS}
        made.append(node)
    return made


# Plain 1.20 constraints (the vectorised score path) and ones with 1.32's fields (the per-node path).
_WEB = {"matchLabels": {"app": "web"}}
SPREAD_CONSTRAINTS = (
    {"maxSkew": 1, "topologyKey": ZONE, "whenUnsatisfiable": "ScheduleAnyway", "labelSelector": _WEB},
    {"maxSkew": 2, "topologyKey": ZONE, "whenUnsatisfiable": "DoNotSchedule", "labelSelector": _WEB},
    {
        "maxSkew": 1,
        "topologyKey": ZONE,
        "whenUnsatisfiable": "ScheduleAnyway",
        "labelSelector": {},
        "matchLabelKeys": ["app"],
        "nodeTaintsPolicy": "Honor",
    },
    {
        "maxSkew": 1,
        "topologyKey": ZONE,
        "whenUnsatisfiable": "DoNotSchedule",
        "labelSelector": _WEB,
        "minDomains": 3,
        "nodeAffinityPolicy": "Ignore",
    },
)


@st.composite
def pods(draw: st.DrawFn, count: int) -> list[dict[str, Any]]:
    made = []
    for i in range(count):
        selector = draw(st.sampled_from([None, {"disk": "ssd"}, {ZONE: "a"}, {ZONE: "b", "disk": "hdd"}]))
        affinity = None
        if draw(st.integers(0, 3)) == 0:
            operator = draw(st.sampled_from(["In", "NotIn", "Exists", "DoesNotExist"]))
            values = (
                []
                if operator in ("Exists", "DoesNotExist")
                else draw(st.lists(st.sampled_from(ZONES), min_size=1))
            )
            term = {"matchExpressions": [{"key": ZONE, "operator": operator, "values": values}]}
            affinity = {
                "nodeAffinity": {
                    "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [term]}
                }
            }
        tolerations = draw(
            st.sampled_from([None, [{"key": "dedicated", "operator": "Exists"}], [{"operator": "Exists"}]])
        )
        if draw(st.integers(0, 3)) == 0:
            weight = draw(st.sampled_from([1, 50, 100]))
            term = {
                "matchExpressions": [
                    {"key": "disk", "operator": "In", "values": [draw(st.sampled_from(DISKS))]}
                ]
            }
            affinity = {**(affinity or {})}
            node_affinity = {**affinity.get("nodeAffinity", {})}
            zone_term = {"matchExpressions": [{"key": ZONE, "operator": "In", "values": ["a"]}]}
            node_affinity["preferredDuringSchedulingIgnoredDuringExecution"] = [
                {"weight": weight, "preference": term},
                {"weight": 30, "preference": zone_term},
            ]
            affinity["nodeAffinity"] = node_affinity
        if draw(st.integers(0, 3)) == 0:
            kind = draw(st.sampled_from(["podAffinity", "podAntiAffinity"]))
            pod_term = {"labelSelector": {"matchLabels": {"app": "web"}}, "topologyKey": ZONE}
            namespace_selector = draw(
                st.sampled_from([None, {}, {"matchLabels": {"team": "a"}}, {"matchLabels": {"team": "b"}}])
            )
            if namespace_selector is not None:
                pod_term["namespaceSelector"] = namespace_selector
            rule = (
                {"requiredDuringSchedulingIgnoredDuringExecution": [pod_term]}
                if draw(st.booleans())
                else {
                    "preferredDuringSchedulingIgnoredDuringExecution": [
                        {"weight": 10, "podAffinityTerm": pod_term}
                    ]
                }
            )
            affinity = {**(affinity or {}), kind: rule}
        pod = make_pod(
            f"p{i}",
            "ns",
            cpu=draw(st.sampled_from([None, "100m", "500m", "1", "3"])),
            memory=draw(st.sampled_from([None, "128Mi", "1Gi", "3Gi"])),
            labels={"app": draw(st.sampled_from(["web", "db", "batch"]))},
            node_selector=selector,
            tolerations=tolerations,
            affinity=affinity,
        )
        pod["spec"]["containers"][0]["image"] = draw(st.sampled_from(IMAGES))
        spread = draw(st.sampled_from([None, *SPREAD_CONSTRAINTS]))
        if spread is not None:
            pod["spec"]["topologySpreadConstraints"] = [spread]
        if draw(st.integers(0, 3)) == 0:
            # An init container, or a sidecar (restartPolicy: Always) whose requests add up.
            init = {"name": "init", "image": IMAGES[0], "resources": {"requests": {"cpu": "500m"}}}
            if draw(st.booleans()):
                init["restartPolicy"] = "Always"
            pod["spec"]["initContainers"] = [init]
        if draw(st.booleans()):
            pod["metadata"]["ownerReferences"] = [
                {
                    "apiVersion": "apps/v1",
                    "kind": "ReplicaSet",
                    "name": "rs",
                    "uid": "rs-1",
                    "controller": True,
                }
            ]
        made.append(pod)
    return made


NAMESPACES = {
    "ns": {"metadata": {"name": "ns", "labels": {"team": "a"}}},
    "other": {"metadata": {"name": "other", "labels": {"team": "b"}}},
}
SERVICES = {
    "ns/web": {"metadata": {"name": "web", "namespace": "ns"}, "spec": {"selector": {"app": "web"}}},
    "ns/db": {"metadata": {"name": "db", "namespace": "ns"}, "spec": {"selector": {"app": "db"}}},
}


def decisions(algorithm: Algorithm, snapshot: Snapshot, pending: list[Any]) -> list[Any]:
    """Each pod's decision, placed one after another on one snapshot chain."""
    return decide(algorithm, snapshot, pending, random.Random(7), 0)[0]


def decide(
    algorithm: Algorithm, snapshot: Snapshot, pending: list[Any], rng: random.Random, start: int
) -> tuple[list[Any], int]:
    """`decisions` going on from `rng` and `start`; also where the next search starts."""
    made: list[Any] = []
    for pod in pending:
        try:
            result = algorithm.schedule(pod, snapshot, rng, start)
        except FitError as exc:
            made.append(("unschedulable", exc.summary(), dict(exc.node_reasons)))
            continue
        start = result.next_start_index
        made.append(
            (
                result.node_name,
                result.evaluated_nodes,
                result.feasible_nodes,
                dict(result.scores),
                dict(result.failed_nodes),
            )
        )
        snapshot = snapshot.with_pod_on(pod, result.node_name)
    return made, start


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    raw_nodes=nodes(),
    raw_pods=pods(8),
    policy=st.sampled_from(sorted(POLICIES)),
    percentage=st.sampled_from([0, 30, 100]),
)
def test_vectorised_and_per_node_paths_decide_alike(
    raw_nodes: list[dict[str, Any]], raw_pods: list[dict[str, Any]], policy: str, percentage: int
) -> None:
    algorithm = replace(POLICIES[policy], percentage_of_nodes_to_score=percentage)
    pending = [pod_from_dict(p) for p in raw_pods]

    def fresh() -> Snapshot:
        infos = [NodeInfo(node_from_dict(n)) for n in raw_nodes]
        return Snapshot.of(infos, ClusterObjects(services=SERVICES, namespaces=NAMESPACES))

    vectorised = fresh()
    expected = decisions(replace(algorithm, vectorised=False), fresh(), pending)
    assert decisions(algorithm, vectorised, pending) == expected
    assert vectorised.table() is not None


# Pod-to-pod constraints: kube-scheduler 1.20's interpodaffinity (filtering.go, scoring.go) and
# podtopologyspread (filtering.go, scoring.go), which the per-node path follows.
HOSTNAME = "kubernetes.io/hostname"
LABEL_VALUES = {"app": ("web", "db", "batch"), "tier": ("front", "back")}
POD_TO_POD_POLICIES = {
    "default": default_algorithm(),
    "symmetric, selector spreading, every predicate": compile_policy(
        {
            "kind": "Policy",
            "apiVersion": "v1",
            "predicates": [
                {"name": "PodFitsResources"},
                {"name": "MatchNodeSelector"},
                {"name": "MatchInterPodAffinity"},
                {"name": "EvenPodsSpread"},
            ],
            "priorities": [
                {"name": "InterPodAffinityPriority", "weight": 3},
                {"name": "EvenPodsSpreadPriority", "weight": 2},
                {"name": "SelectorSpreadPriority", "weight": 1},
                {"name": "LeastRequestedPriority", "weight": 1},
            ],
            "hardPodAffinitySymmetricWeight": 10,
            "alwaysCheckAllPredicates": True,
        },
        default_pod_topology_spread=False,  # SelectorSpreadPriority: the SelectorSpread plugin
    ),
}


@st.composite
def label_selectors(draw: st.DrawFn) -> dict[str, Any] | None:
    """None (matches nothing), {} (everything), or matchLabels and expressions with every operator."""
    if draw(st.integers(0, 9)) == 0:
        return None
    selector: dict[str, Any] = {}
    match_labels = draw(st.sampled_from([None, {"app": "web"}, {"app": "db", "tier": "front"}]))
    if match_labels:
        selector["matchLabels"] = match_labels
    expressions = []
    for _ in range(draw(st.integers(0, 2))):
        key = draw(st.sampled_from(sorted(LABEL_VALUES)))
        operator = draw(st.sampled_from(["In", "NotIn", "Exists", "DoesNotExist"]))
        values = (
            []
            if operator in ("Exists", "DoesNotExist")
            else draw(st.lists(st.sampled_from(LABEL_VALUES[key]), min_size=1, max_size=2, unique=True))
        )
        expressions.append({"key": key, "operator": operator, "values": values})
    if expressions:
        selector["matchExpressions"] = expressions
    return selector


@st.composite
def pod_terms(draw: st.DrawFn) -> dict[str, Any]:
    term: dict[str, Any] = {"topologyKey": draw(st.sampled_from([HOSTNAME, ZONE]))}
    selector = draw(label_selectors())
    if selector is not None:
        term["labelSelector"] = selector
    namespaces = draw(st.sampled_from([None, ["ns"], ["other"], ["ns", "other"]]))
    if namespaces:
        term["namespaces"] = namespaces
    namespace_selector = draw(
        st.sampled_from(
            [
                None,
                {},
                {"matchLabels": {"team": "a"}},
                {"matchExpressions": [{"key": "team", "operator": "NotIn", "values": ["a"]}]},
            ]
        )
    )
    if namespace_selector is not None:
        term["namespaceSelector"] = namespace_selector
    return term


@st.composite
def pod_affinities(draw: st.DrawFn) -> dict[str, Any] | None:
    affinity = {}
    for kind in ("podAffinity", "podAntiAffinity"):
        rule: dict[str, Any] = {}
        if draw(st.integers(0, 2)) == 0:
            rule["requiredDuringSchedulingIgnoredDuringExecution"] = draw(
                st.lists(pod_terms(), min_size=1, max_size=2)
            )
        if draw(st.integers(0, 2)) == 0:
            rule["preferredDuringSchedulingIgnoredDuringExecution"] = [
                {"weight": draw(st.sampled_from([1, 10, 100])), "podAffinityTerm": term}
                for term in draw(st.lists(pod_terms(), min_size=1, max_size=2))
            ]
        if rule:
            affinity[kind] = rule
    return affinity or None


@st.composite
def spread_constraints(draw: st.DrawFn) -> list[dict[str, Any]]:
    return [
        {
            "maxSkew": draw(st.integers(1, 2)),
            "topologyKey": draw(st.sampled_from([HOSTNAME, ZONE])),
            "whenUnsatisfiable": draw(st.sampled_from(["DoNotSchedule", "ScheduleAnyway"])),
            "labelSelector": draw(label_selectors()) or {},
        }
        for _ in range(draw(st.integers(0, 2)))
    ]


@st.composite
def pods_with_terms(draw: st.DrawFn, name: str) -> dict[str, Any]:
    labels = {
        key: draw(st.sampled_from(values)) for key, values in LABEL_VALUES.items() if draw(st.booleans())
    }
    pod = make_pod(
        name,
        draw(st.sampled_from(["ns", "ns", "other"])),
        cpu=draw(st.sampled_from([None, "100m", "500m"])),
        labels=labels,
        node_selector=draw(st.sampled_from([None, None, {"disk": "ssd"}])),
        affinity=draw(pod_affinities()),
    )
    constraints = draw(spread_constraints())
    if constraints:
        pod["spec"]["topologySpreadConstraints"] = constraints
    return pod


@st.composite
def pod_to_pod_clusters(
    draw: st.DrawFn,
) -> tuple[list[dict[str, Any]], list[dict[str, Any]], list[dict[str, Any]]]:
    """Nodes (zones "a", "b" and the empty value, or none; now and then two sharing a hostname
    label), pods bound to them (some terminating), and pending pods."""
    raw_nodes = []
    for i in range(draw(st.integers(1, 8))):
        labels: dict[str, str] = {}
        zone = draw(st.sampled_from(["a", "b", "", None]))
        if zone is not None:
            labels[ZONE] = zone
        if draw(st.booleans()):
            labels["disk"] = "ssd"
        if draw(st.integers(0, 5)) == 0:
            labels[HOSTNAME] = "shared"
        raw_nodes.append(make_node(f"n{i}", cpu="4", labels=labels))
    bound = []
    for j in range(draw(st.integers(0, 10))):
        pod = draw(pods_with_terms(f"b{j}"))
        pod["spec"]["nodeName"] = f"n{draw(st.integers(0, len(raw_nodes) - 1))}"
        if draw(st.integers(0, 5)) == 0:
            pod["metadata"]["deletionTimestamp"] = "2024-01-01T00:00:00Z"
        bound.append(pod)
    pending = [draw(pods_with_terms(f"p{k}")) for k in range(draw(st.integers(1, 8)))]
    return raw_nodes, bound, pending


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    cluster=pod_to_pod_clusters(),
    policy=st.sampled_from(sorted(POD_TO_POD_POLICIES)),
    percentage=st.sampled_from([0, 100]),
    batch=st.integers(1, 4),
)
def test_pod_to_pod_constraints_decide_alike_along_a_snapshot_chain_and_from_batch_to_batch(
    cluster: tuple[list[dict[str, Any]], list[dict[str, Any]], list[dict[str, Any]]],
    policy: str,
    percentage: int,
    batch: int,
) -> None:
    """The reference places every pending pod on one snapshot chain from the full listing; the
    vectorised path decides them in batches as the scheduler does: each batch a chain on the
    cache's snapshot (its indexes carried over and updated pod by pod), the decisions then
    assumed in the cache."""
    raw_nodes, bound, raw_pending = cluster
    algorithm = replace(POD_TO_POD_POLICIES[policy], percentage_of_nodes_to_score=percentage)
    objects = ClusterObjects(services=SERVICES, namespaces=NAMESPACES)
    pending = [pod_from_dict(p) for p in raw_pending]
    infos = {n["metadata"]["name"]: NodeInfo(node_from_dict(n)) for n in raw_nodes}
    for raw in bound:
        pod = pod_from_dict(raw)
        infos[pod.node_name] = infos[pod.node_name].with_pod(pod)
    expected = decisions(
        replace(algorithm, vectorised=False), Snapshot.of(list(infos.values()), objects), pending
    )

    cache = SchedulerCache()
    for raw in raw_nodes:
        cache.set_node(node_from_dict(raw))
    for raw in bound:
        cache.set_pod(pod_from_dict(raw))
    for name, namespace in NAMESPACES.items():
        cache.set_object("Namespace", name, namespace)
    for key, service in SERVICES.items():
        cache.set_object("Service", key, service)
    rng, start, made = random.Random(7), 0, []
    for first in range(0, len(pending), batch):
        snapshot = cache.snapshot()
        assert isinstance(snapshot.usage, NodeUsage)
        chunk = pending[first : first + batch]
        decided, start = decide(algorithm, snapshot, chunk, rng, start)
        for pod, decision in zip(chunk, decided, strict=True):
            if decision[0] != "unschedulable":
                cache.assume(pod, decision[0])
        made += decided
    assert made == expected


# Volume restrictions: 1.20's disk conflicts (per node) and 1.32's ReadWriteOncePod claims (a claim
# in use fails every node at once in the vectorised path).
CLAIM_MODES = {"solo-1": "ReadWriteOncePod", "solo-2": "ReadWriteOncePod", "shared": "ReadWriteMany"}
VOLUME_POLICIES = {
    "default": default_algorithm(),
    "volumes, every predicate": compile_policy(
        {
            "kind": "Policy",
            "apiVersion": "v1",
            "predicates": [{"name": "PodFitsResources"}, {"name": "NoDiskConflict"}],
            "priorities": [{"name": "LeastRequestedPriority", "weight": 1}],
            "alwaysCheckAllPredicates": True,
        }
    ),
}


def bound_claims() -> ClusterObjects:
    """Each claim of CLAIM_MODES bound to a PV of its own, which every node accepts."""
    claims: dict[str, Any] = {}
    volumes: dict[str, Any] = {}
    for name, mode in CLAIM_MODES.items():
        claims[f"ns/{name}"] = {
            "metadata": {
                "name": name,
                "namespace": "ns",
                "annotations": {"pv.kubernetes.io/bind-completed": "yes"},
            },
            "spec": {"accessModes": [mode], "volumeName": f"pv-{name}"},
        }
        volumes[f"pv-{name}"] = {
            "metadata": {"name": f"pv-{name}"},
            "spec": {"accessModes": [mode], "claimRef": {"name": name, "namespace": "ns"}},
            "status": {"phase": "Bound"},
        }
    return ClusterObjects(persistent_volume_claims=claims, persistent_volumes=volumes)


@st.composite
def volume_users(draw: st.DrawFn, name: str) -> dict[str, Any]:
    pod = make_pod(name, "ns", cpu=draw(st.sampled_from([None, "100m", "1"])))
    volumes: list[dict[str, Any]] = [
        {"name": claim, "persistentVolumeClaim": {"claimName": claim}}
        for claim in draw(st.lists(st.sampled_from(sorted(CLAIM_MODES)), max_size=2, unique=True))
    ]
    if draw(st.booleans()):
        pd = {"pdName": draw(st.sampled_from(["pd-a", "pd-b"])), "readOnly": draw(st.booleans())}
        volumes.append({"name": "disk", "gcePersistentDisk": pd})
    if volumes:
        pod["spec"]["volumes"] = volumes
    return pod


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    node_count=st.integers(1, 6),
    placed=st.lists(st.tuples(st.integers(0, 5), st.booleans()), max_size=6),
    pending_count=st.integers(1, 6),
    data=st.data(),
    policy=st.sampled_from(sorted(VOLUME_POLICIES)),
)
def test_volume_restrictions_decide_alike(
    node_count: int,
    placed: list[tuple[int, bool]],
    pending_count: int,
    data: st.DataObject,
    policy: str,
) -> None:
    """Bound pods (some terminating) and pending ones with ReadWriteOncePod and shared claims and GCE
    disks: the pending pods go one after another, each seeing the claims the earlier ones took."""
    raw_nodes = [make_node(f"n{i}", cpu="4") for i in range(node_count)]
    bound = []
    for j, (node, deleting) in enumerate(placed):
        raw = data.draw(volume_users(f"b{j}"))
        raw["spec"]["nodeName"] = f"n{node % node_count}"
        if deleting:
            raw["metadata"]["deletionTimestamp"] = "2024-01-01T00:00:00Z"
        bound.append(pod_from_dict(raw))
    pending = [pod_from_dict(data.draw(volume_users(f"p{k}"))) for k in range(pending_count)]
    algorithm = VOLUME_POLICIES[policy]

    def fresh() -> Snapshot:
        infos = {n["metadata"]["name"]: NodeInfo(node_from_dict(n)) for n in raw_nodes}
        for pod in bound:
            infos[pod.node_name] = infos[pod.node_name].with_pod(pod)
        return Snapshot.of(list(infos.values()), bound_claims())

    expected = decisions(replace(algorithm, vectorised=False), fresh(), pending)
    assert decisions(algorithm, fresh(), pending) == expected


def test_a_thousand_nodes_with_minimum_feasible_search_match() -> None:
    """Above 100 nodes the search stops early (numFeasibleNodesToFind): both paths stop at the same node."""
    rng = random.Random(3)
    raw = [
        make_node(f"n{i}", cpu=rng.choice(["1", "2"]), labels={ZONE: rng.choice(ZONES)}) for i in range(1000)
    ]
    pending = [pod_from_dict(make_pod(f"p{i}", "ns", cpu="600m", labels={"app": "web"})) for i in range(300)]
    for policy in POLICIES.values():
        algorithm = replace(policy, percentage_of_nodes_to_score=0)

        def fresh() -> Snapshot:
            return Snapshot.of([NodeInfo(node_from_dict(n)) for n in raw], ClusterObjects(services=SERVICES))

        assert decisions(algorithm, fresh(), pending) == decisions(
            replace(algorithm, vectorised=False), fresh(), pending
        )


def test_amounts_too_large_for_int64_fall_back_to_the_per_node_path() -> None:
    huge = node_from_dict(make_node("huge", cpu=str(LIMIT), memory="1Gi"))
    assert NodeColumns.build([huge]) is None
    pod = pod_from_dict(make_pod("p", cpu="1"))
    snapshot = Snapshot.of([NodeInfo(huge)])
    assert snapshot.table() is None
    assert POLICIES["seed"].schedule(pod, snapshot, random.Random(1)).node_name == "huge"


def test_usage_counts_requests_and_label_sets_pod_by_pod() -> None:
    pods = [
        pod_from_dict(make_pod(f"p{i}", "ns", cpu="250m", memory="1Gi", labels={"app": "web"}))
        for i in range(3)
    ]
    usage = NodeUsage.build([{}, {}])
    assert usage is not None
    for i, pod in enumerate(pods):
        next_usage = usage.with_pod(i % 2, pod)
        assert next_usage is not None
        usage = next_usage
    assert usage.requested_cpu.tolist() == [500, 250]
    assert usage.pod_count.tolist() == [2, 1]
    web = LabelSelector.from_map({"app": "web"})
    assert np.array_equal(usage.selected("ns", web), [2, 1])
    assert usage.selected("other", LabelSelector()).tolist() == [0, 0]


def usage_figures(usage: NodeUsage | bool | None) -> dict[str, Any]:
    assert isinstance(usage, NodeUsage)
    groups = {key: counts.tolist() for key, counts in usage.groups.items()}
    arrays = ("requested_cpu", "requested_memory", "pod_count", "non_zero_cpu", "non_zero_memory")
    # The placed terms, and those the index offers to a pod of each label set.
    terms = {repr(key): dict(rows) for key, rows in usage.terms.items()}
    offered = {
        name: sorted(repr(key) for key, _ in usage.placed_terms(labels))
        for name, labels in (("web", {"app": "web"}), ("db", {"app": "db"}), ("none", {}))
    }
    return {
        "groups": groups,
        "terms": terms,
        "offered": offered,
        **{name: getattr(usage, name).tolist() for name in arrays},
    }


@settings(max_examples=60, deadline=None)
@given(
    steps=st.lists(
        st.tuples(st.sampled_from(["bind", "assume", "forget", "delete", "node"]), st.integers(0, 5)),
        max_size=40,
    )
)
def test_the_caches_usage_follows_every_change_and_never_changes_a_snapshot_taken(
    steps: list[tuple[str, int]],
) -> None:
    cache = SchedulerCache()
    for i in range(3):
        cache.set_node(node_from_dict(make_node(f"n{i}", labels={ZONE: ZONES[i]})))
    apart = {"labelSelector": {"matchLabels": {"app": "web"}}, "topologyKey": ZONE}
    near = {
        "labelSelector": {"matchExpressions": [{"key": "app", "operator": "Exists"}]},
        "topologyKey": ZONE,
    }
    terms = [
        None,
        {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [apart]}},
        {
            "podAffinity": {
                "preferredDuringSchedulingIgnoredDuringExecution": [{"weight": 5, "podAffinityTerm": near}]
            }
        },
    ]
    pods = [
        pod_from_dict(
            make_pod(
                f"p{i}",
                "ns",
                cpu=f"{100 * (i + 1)}m",
                labels={"app": ["web", "db"][i % 2]},
                affinity=terms[i % 3],
            )
        )
        for i in range(6)
    ]
    taken: list[tuple[Snapshot, dict[str, Any]]] = []
    for action, k in steps:
        pod = pods[k]
        if action == "bind":
            cache.set_pod(replace(pod, node_name=f"n{k % 3}"))
        elif action == "assume":
            cache.assume(pod, f"n{(k + 1) % 3}")
        elif action == "forget":
            cache.forget(pod.uid)
        elif action == "delete":
            cache.remove_pod(pod.uid)
        else:
            cache.set_node(node_from_dict(make_node(f"n{k % 4}", cpu=str(k + 1))))
        snapshot = cache.snapshot()
        rebuilt = NodeUsage.build([n.pods for n in snapshot.nodes])
        assert usage_figures(snapshot.usage) == usage_figures(rebuilt)
        taken.append((snapshot, usage_figures(snapshot.usage)))
    for snapshot, figures in taken:
        assert usage_figures(snapshot.usage) == figures


def test_the_caches_columns_survive_a_relisting_and_a_heartbeat_but_not_a_new_label() -> None:
    cache = SchedulerCache()
    raw = make_node("n0", labels={ZONE: "a"})
    cache.set_node(node_from_dict(raw))
    columns = cache.snapshot().columns
    cache.set_node(node_from_dict(raw))  # the same node listed again
    heartbeat = json.loads(json.dumps(raw))
    heartbeat["status"]["conditions"][0]["lastHeartbeatTime"] = "2030-01-01T00:00:00Z"
    cache.set_node(node_from_dict(heartbeat))
    assert cache.snapshot().columns is columns
    assert cache.node_info("n0").node.raw_status == heartbeat["status"]  # type: ignore[union-attr]
    relabelled = make_node("n0", labels={ZONE: "b"})
    cache.set_node(node_from_dict(relabelled))
    table = cache.snapshot().table()
    assert table is not None and table.columns is not columns
    codes, values = table.columns.label_codes(ZONE)
    assert [values[c] for c in codes] == ["b"]
