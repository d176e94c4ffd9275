"""Pod (anti-)affinity fields newer than 1.20: namespaceSelector, matchLabelKeys, mismatchLabelKeys.

Rows marked "1.32 filtering_test" / "1.32 scoring_test" are cases of kube-scheduler 1.32's
pkg/scheduler/framework/plugins/interpodaffinity/filtering_test.go (TestRequiredAffinitySingleNode)
and scoring_test.go (TestPreferredAffinity, TestPreferredAffinityWithHardPodAffinitySymmetricWeight),
run against the same four labelled namespaces. Rows marked "1.32 priorities_test" are the
matchLabelKeys cases of test/integration/scheduler/scoring/priorities_test.go
(TestInterPodAffinityScoring), where the API server merges the keys before the scheduler reads the
pod; here the pods arrive unmerged, as a manifest given to `simulate` would.
The pods are dicts shaped as a 1.32 API server sends them; the local 1.20 API server would drop
these fields, so they are tested here, in the watch parser and in snapshot files.
"""

from __future__ import annotations

from typing import Any, cast

import pytest

from kubesched.kube.binding import Binder
from kubesched.kube.events import Recorder
from kubesched.model.affinity import parse_pod_affinity
from kubesched.model.nodeinfo import ClusterObjects, Snapshot
from kubesched.model.objects import Pod
from kubesched.plugins.inter_pod_affinity.filtering import (
    ERR_REASON_AFFINITY_NOT_MATCH,
    ERR_REASON_AFFINITY_RULES_NOT_MATCH,
    ERR_REASON_ANTI_AFFINITY_RULES_NOT_MATCH,
    ERR_REASON_EXISTING_ANTI_AFFINITY_RULES_NOT_MATCH,
    MatchInterPodAffinity,
)
from kubesched.plugins.inter_pod_affinity.scoring import InterPodAffinityPriority
from kubesched.policy.compile import default_algorithm
from kubesched.runtime.scheduler import Scheduler, SchedulerSettings
from kubesched.tools.explain import explain_snapshot
from kubesched.tools.snapshot import ClusterState
from kubesched_dev.fixtures import (
    make_node,
    make_pod,
    model_node,
    model_pod,
    node_info,
    run_filter,
    run_priority,
)

OK: tuple[str, ...] = ()
AFFINITY = (ERR_REASON_AFFINITY_NOT_MATCH, ERR_REASON_AFFINITY_RULES_NOT_MATCH)
ANTI = (ERR_REASON_AFFINITY_NOT_MATCH, ERR_REASON_ANTI_AFFINITY_RULES_NOT_MATCH)
EXISTING_ANTI = (ERR_REASON_AFFINITY_NOT_MATCH, ERR_REASON_EXISTING_ANTI_AFFINITY_RULES_NOT_MATCH)


def namespace(name: str, labels: dict[str, str]) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name, "labels": labels}}


TEAM1 = {"team": "team1"}
TEAM2 = {"team": "team2"}
# The namespaces of 1.32's scoring_test.go (filtering_test.go uses the same).
NAMESPACES = {
    ns["metadata"]["name"]: ns
    for ns in (
        namespace("subteam1.team1", TEAM1),
        namespace("subteam2.team1", TEAM1),
        namespace("subteam1.team2", TEAM2),
        namespace("subteam2.team2", TEAM2),
    )
}
IN_TEAM1 = {"matchExpressions": [{"key": "team", "operator": "In", "values": ["team1"]}]}


def term(key: str, operator: str, values: list[str] | None, topology: str, **fields: Any) -> dict[str, Any]:
    """A PodAffinityTerm; `fields` adds namespaces, namespaceSelector, matchLabelKeys..."""
    expression: dict[str, Any] = {"key": key, "operator": operator}
    if values is not None:
        expression["values"] = values
    return {"labelSelector": {"matchExpressions": [expression]}, "topologyKey": topology, **fields}


def weighted(weight: int, t: dict[str, Any]) -> dict[str, Any]:
    return {"weight": weight, "podAffinityTerm": t}


def pod(
    labels: dict[str, str] | None = None,
    *,
    namespace: str = "default",
    required: list[Any] | None = None,
    anti: list[Any] | None = None,
    preferred: list[Any] | None = None,
    preferred_anti: list[Any] | None = None,
) -> Pod:
    affinity: dict[str, Any] = {}
    if required or preferred:
        affinity["podAffinity"] = {
            "requiredDuringSchedulingIgnoredDuringExecution": required or [],
            "preferredDuringSchedulingIgnoredDuringExecution": preferred or [],
        }
    if anti or preferred_anti:
        affinity["podAntiAffinity"] = {
            "requiredDuringSchedulingIgnoredDuringExecution": anti or [],
            "preferredDuringSchedulingIgnoredDuringExecution": preferred_anti or [],
        }
    spec: dict[str, Any] = {"affinity": affinity} if affinity else {}
    return model_pod("p", namespace, labels=labels, **spec)


def cluster(
    nodes: dict[str, dict[str, str]],
    pods: list[tuple[str, Pod]],
    namespaces: dict[str, Any] | None = None,
) -> Snapshot:
    infos = [
        node_info(model_node(name, labels=labels), [p for on, p in pods if on == name])
        for name, labels in nodes.items()
    ]
    return Snapshot.of(infos, ClusterObjects(namespaces=NAMESPACES if namespaces is None else namespaces))


SCAN = {"service": "securityscan"}
S1 = {"security": "S1"}
NODE1 = {"node1": {"region": "r1", "zone": "z11"}}
SCAN_IN_TEAM1 = {"namespaceSelector": IN_TEAM1}


@pytest.mark.parametrize(
    ("incoming", "pods", "expected"),
    [
        pytest.param(
            pod(S1, required=[term("service", "In", ["securityscan", "value2"], "region", **SCAN_IN_TEAM1)]),
            [pod(SCAN, namespace="subteam1.team1")],
            OK,
            id="1.32 filtering_test: affinity with NamespaceSelector",
        ),
        pytest.param(
            pod(S1, required=[term("service", "In", ["securityscan", "value2"], "region", **SCAN_IN_TEAM1)]),
            [pod(SCAN, namespace="subteam1.team2")],
            AFFINITY,
            id="1.32 filtering_test: affinity with non-matching NamespaceSelector",
        ),
        pytest.param(
            pod(
                S1,
                namespace="subteam1.team1",
                anti=[term("service", "In", ["securityscan", "value2"], "zone", **SCAN_IN_TEAM1)],
            ),
            [pod(SCAN, namespace="subteam2.team1")],
            ANTI,
            id="1.32 filtering_test: anti-affinity with matching NamespaceSelector",
        ),
        pytest.param(
            pod(
                S1,
                namespace="subteam1.team1",
                anti=[term("service", "In", ["securityscan", "value2"], "zone", namespaceSelector={})],
            ),
            [pod(SCAN, namespace="subteam2.team1")],
            ANTI,
            id="1.32 filtering_test: anti-affinity with matching all NamespaceSelector",
        ),
        pytest.param(
            pod(
                S1,
                namespace="subteam1.team1",
                anti=[term("service", "In", ["securityscan", "value2"], "zone", **SCAN_IN_TEAM1)],
            ),
            [pod(SCAN, namespace="subteam1.team2")],
            OK,
            id="1.32 filtering_test: anti-affinity with non-matching NamespaceSelector",
        ),
        pytest.param(
            pod(SCAN, namespace="subteam1.team1"),
            [
                pod(
                    S1,
                    namespace="other",
                    anti=[term("service", "In", ["securityscan"], "zone", **SCAN_IN_TEAM1)],
                )
            ],
            EXISTING_ANTI,
            id="an existing pod's namespaceSelector is matched against the incoming pod's namespace labels",
        ),
        pytest.param(
            pod(SCAN, namespace="subteam1.team2"),
            [
                pod(
                    S1,
                    namespace="other",
                    anti=[term("service", "In", ["securityscan"], "zone", **SCAN_IN_TEAM1)],
                )
            ],
            OK,
            id="an existing pod's namespaceSelector that does not pick the incoming pod's namespace",
        ),
    ],
)
def test_namespace_selector_filter(incoming: Pod, pods: list[Pod], expected: tuple[str, ...]) -> None:
    snap = cluster(NODE1, [("node1", p) for p in pods])
    assert run_filter(MatchInterPodAffinity(), incoming, snap.nodes[0], snap) == expected


def test_an_unknown_namespace_has_no_labels() -> None:
    """GetNamespaceLabelsSnapshot: a namespace the cache does not hold matches as one without labels."""
    existing = pod(
        S1,
        namespace="other",
        anti=[
            term(
                "service",
                "In",
                ["securityscan"],
                "zone",
                namespaceSelector={"matchExpressions": [{"key": "team", "operator": "DoesNotExist"}]},
            )
        ],
    )
    snap = cluster(NODE1, [("node1", existing)], namespaces={})
    assert (
        run_filter(MatchInterPodAffinity(), pod(SCAN, namespace="nowhere"), snap.nodes[0], snap)
        == EXISTING_ANTI
    )


CHINA = {"region": "China"}
INDIA = {"region": "India"}
AZ1 = {"az": "az1"}
STAY_S2_REGION = [weighted(6, term("security", "In", ["S2"], "region"))]
NS_TERM = term("security", "In", ["S1"], "region", namespaces=["subteam2.team2"], namespaceSelector=IN_TEAM1)


def in_ns(ns: str, labels: dict[str, str] = S1) -> Pod:
    return pod(labels, namespace=ns)


@pytest.mark.parametrize(
    ("incoming", "nodes", "pods", "expected"),
    [
        pytest.param(
            pod(S1, namespace="subteam1.team1"),
            {"node1": CHINA, "node2": INDIA, "node3": AZ1},
            [
                ("node1", pod(S1, preferred=[weighted(5, NS_TERM)])),
                ("node2", pod({"security": "S2"}, preferred=STAY_S2_REGION)),
            ],
            [100, 0, 0],
            id="1.32 scoring_test: Affinity symmetry with namespace selector",
        ),
        pytest.param(
            pod(S1, namespace="subteam1.team1"),
            {"node1": CHINA, "node2": INDIA, "node3": AZ1},
            [
                ("node1", pod(S1, preferred_anti=[weighted(5, NS_TERM)])),
                ("node2", pod({"security": "S2"}, preferred=STAY_S2_REGION)),
            ],
            [0, 100, 100],
            id="1.32 scoring_test: AntiAffinity symmetry with namespace selector",
        ),
        pytest.param(
            pod(S1, namespace="subteam1.team1", preferred=[weighted(5, NS_TERM)]),
            {"node1": CHINA, "node2": INDIA},
            [
                ("node1", in_ns("subteam1.team1")),
                ("node1", in_ns("subteam1.team1")),
                ("node1", in_ns("subteam1.team2")),
                ("node2", in_ns("subteam2.team1")),
            ],
            [100, 50],  # 1.32: [100, 0]
            id="1.32 scoring_test: Affinity with pods matching NamespaceSelector",
        ),
        pytest.param(
            pod(S1, namespace="subteam1.team1", preferred=[weighted(5, NS_TERM)]),
            {"node1": CHINA, "node2": INDIA},
            [
                ("node1", in_ns("subteam1.team1")),
                ("node1", in_ns("subteam1.team1")),
                ("node1", in_ns("subteam2.team2")),
                ("node2", in_ns("subteam2.team1")),
            ],
            [100, 33],  # 1.32: [100, 0]
            id="1.32 scoring_test: Affinity with pods matching both NamespaceSelector and Namespaces fields",
        ),
        pytest.param(
            pod(S1, namespace="subteam1.team1", preferred_anti=[weighted(5, NS_TERM)]),
            {"node1": CHINA, "node2": INDIA},
            [
                ("node1", in_ns("subteam1.team1")),
                ("node1", in_ns("subteam1.team1")),
                ("node1", in_ns("subteam1.team2")),
                ("node2", in_ns("subteam2.team1")),
            ],
            [0, 50],  # 1.32: [0, 100]
            id="1.32 scoring_test: anti-affinity with pods matching NamespaceSelector",
        ),
        pytest.param(
            pod(S1, namespace="subteam1.team1", preferred_anti=[weighted(5, NS_TERM)]),
            {"node1": CHINA, "node2": INDIA},
            [
                ("node1", in_ns("subteam1.team1")),
                ("node1", in_ns("subteam1.team1")),
                ("node1", in_ns("subteam2.team2")),
                ("node2", in_ns("subteam2.team1")),
            ],
            [0, 66],  # 1.32: [0, 100]
            id="1.32 scoring_test: anti-affinity with pods matching both NamespaceSelector and Namespaces",
        ),
    ],
)
def test_namespace_selector_priority(
    incoming: Pod, nodes: dict[str, dict[str, str]], pods: list[tuple[str, Pod]], expected: list[int]
) -> None:
    """The same node ranks first as in 1.32. Where 1.32's figures differ (noted by the row), it is
    the scaling, not namespaceSelector: 1.20's NormalizeScore, which kubesched keeps, scales from
    min(0, lowest) to max(0, highest), 1.32's from the lowest to the highest score."""
    snap = cluster(nodes, pods)
    assert run_priority(InterPodAffinityPriority(1), incoming, list(snap.nodes), snap) == expected


HARD = [
    term(
        "service",
        "In",
        ["S1"],
        "region",
        namespaces=["default", "subteam2.team2"],
        namespaceSelector=IN_TEAM1,
    )
]


@pytest.mark.parametrize(
    ("incoming_namespace", "expected"),
    [
        pytest.param("default", [100, 100, 0], id="1.32 scoring_test: with default weight"),
        pytest.param("subteam1.team2", [0, 0, 0], id="1.32 scoring_test: with no matching namespace"),
        pytest.param(
            "subteam1.team1", [100, 100, 0], id="1.32 scoring_test: with matching NamespaceSelector"
        ),
        pytest.param("subteam2.team2", [100, 100, 0], id="1.32 scoring_test: with matching Namespaces"),
    ],
)
def test_hard_pod_affinity_symmetry_with_namespace_selector(
    incoming_namespace: str, expected: list[int]
) -> None:
    """TestPreferredAffinityWithHardPodAffinitySymmetricWeight (its "" namespace is our "default")."""
    snap = cluster(
        {"node1": CHINA, "node2": INDIA, "node3": AZ1},
        [("node1", pod(required=HARD)), ("node2", pod(required=HARD))],
    )
    incoming = pod({"service": "S1"}, namespace=incoming_namespace)
    assert run_priority(InterPodAffinityPriority(1), incoming, list(snap.nodes), snap) == expected


# test/integration/scheduler/scoring/priorities_test.go: nodes in three topology domains.
TOPOLOGY = "kubernetes.io/topologykey"
DOMAINS = {f"node{i + 1}": {TOPOLOGY: f"value{i % 3}"} for i in range(6)}
FOO_EXISTS = term("foo", "Exists", None, TOPOLOGY)
BAR_HOGE = weighted(10, term("bar", "In", ["hoge"], TOPOLOGY))


def best(scores: list[int], names: list[str]) -> set[str]:
    return {name for name, score in zip(names, scores, strict=True) if score == max(scores)}


@pytest.mark.parametrize(
    ("incoming", "nodes", "pods", "expected"),
    [
        pytest.param(
            pod(
                {"foo": "", "bar": "a"},
                namespace="ns1",
                preferred_anti=[weighted(50, {**FOO_EXISTS, "matchLabelKeys": ["bar"]})],
            ),
            {"node1": {TOPOLOGY: "value0"}, "node2": {TOPOLOGY: "value1"}},
            [
                ("node1", in_ns("ns1", {"foo": "", "bar": "fuga"})),
                ("node2", in_ns("ns1", {"foo": "", "bar": "a"})),
            ],
            {"node1"},
            id="1.32 priorities_test: anti affinity: matchLabelKeys is merged into LabelSelector with In",
        ),
        pytest.param(
            pod(
                {"foo": "", "bar": "a"},
                namespace="ns1",
                preferred_anti=[weighted(50, {**FOO_EXISTS, "mismatchLabelKeys": ["bar"]})],
            ),
            {"node1": {TOPOLOGY: "value0"}, "node2": {TOPOLOGY: "value1"}},
            [
                ("node1", in_ns("ns1", {"foo": "", "bar": "fuga"})),
                ("node2", in_ns("ns1", {"foo": "", "bar": "a"})),
            ],
            {"node2"},
            id="1.32 priorities_test: anti affinity: mismatchLabelKeys is merged into LabelSelector, NotIn",
        ),
        pytest.param(
            pod(
                {"foo": "", "bar": "a"},
                namespace="ns1",
                preferred=[weighted(50, {**FOO_EXISTS, "matchLabelKeys": ["bar"]}), BAR_HOGE],
            ),
            DOMAINS,
            [
                ("node1", in_ns("ns1", {"foo": "", "bar": "hoge"})),
                ("node2", in_ns("ns1", {"foo": "", "bar": "hoge"})),
                ("node3", in_ns("ns1", {"foo": "", "bar": "a"})),
            ],
            {"node3", "node6"},
            id="1.32 priorities_test: affinity: matchLabelKeys is merged into LabelSelector with In operator",
        ),
        pytest.param(
            pod(
                {"foo": "", "bar": "a"},
                namespace="ns1",
                preferred=[weighted(50, {**FOO_EXISTS, "mismatchLabelKeys": ["bar"]}), BAR_HOGE],
            ),
            DOMAINS,
            [
                ("node1", in_ns("ns1", {"foo": "", "bar": "a"})),
                ("node2", in_ns("ns1", {"foo": "", "bar": "a"})),
                ("node3", in_ns("ns1", {"foo": "", "bar": "hoge"})),
            ],
            {"node3", "node6"},
            id="1.32 priorities_test: affinity: mismatchLabelKeys is merged into LabelSelector with NotIn",
        ),
    ],
)
def test_label_keys_priority(
    incoming: Pod, nodes: dict[str, dict[str, str]], pods: list[tuple[str, Pod]], expected: set[str]
) -> None:
    snap = cluster(nodes, pods)
    scores = run_priority(InterPodAffinityPriority(1), incoming, list(snap.nodes), snap)
    assert best(scores, list(nodes)) == expected


# The rolling update KEP-3633 is for: a new revision spreads away from its own revision only.
HOST = "kubernetes.io/hostname"
APART = term("app", "In", ["web"], HOST, matchLabelKeys=["rev"])
TWO_HOSTS = {"n1": {HOST: "n1"}, "n2": {HOST: "n2"}}


@pytest.mark.parametrize(
    ("incoming", "expected"),
    [
        pytest.param(
            pod({"app": "web", "rev": "2"}, anti=[APART]), [OK, OK], id="a new revision ignores the old one"
        ),
        pytest.param(
            pod({"app": "web", "rev": "1"}, anti=[APART]), [ANTI, OK], id="the same revision keeps apart"
        ),
        pytest.param(
            pod({"app": "web", "rev": "2"}), [OK, OK], id="the existing pod's term uses its own labels"
        ),
        pytest.param(
            pod({"app": "web", "rev": "1"}), [EXISTING_ANTI, OK], id="and still repels its revision"
        ),
    ],
)
def test_match_label_keys_filter(incoming: Pod, expected: list[tuple[str, ...]]) -> None:
    """Required anti-affinity with matchLabelKeys, both ways (merged as the API server does in
    pkg/registry/core/pod/strategy.go, each pod's term with its own labels)."""
    snap = cluster(TWO_HOSTS, [("n1", pod({"app": "web", "rev": "1"}, anti=[APART]))])
    assert [run_filter(MatchInterPodAffinity(), incoming, info, snap) for info in snap.nodes] == expected


def selector_matches(owner_labels: dict[str, str], raw_term: dict[str, Any], labels: dict[str, str]) -> bool:
    (parsed,) = parse_pod_affinity(pod(owner_labels, anti=[raw_term])).required_anti_affinity
    return parsed.selector.matches(labels)


def test_an_already_merged_selector_is_used_as_stored() -> None:
    """The API server merged `rev in (1)` at creation; the pod's label changed to 2 since."""
    merged = {
        "labelSelector": {
            "matchLabels": {"app": "web"},
            "matchExpressions": [{"key": "rev", "operator": "In", "values": ["1"]}],
        },
        "matchLabelKeys": ["rev"],
        "topologyKey": HOST,
    }
    assert selector_matches({"app": "web", "rev": "2"}, merged, {"app": "web", "rev": "1"})
    assert not selector_matches({"app": "web", "rev": "2"}, merged, {"app": "web", "rev": "2"})


def test_label_keys_merge_as_the_api_server_does() -> None:
    """applyMatchLabelKeysAndMismatchLabelKeys: keys the pod lacks are skipped; a null selector stays null."""
    keys = {"labelSelector": {"matchLabels": {"app": "web"}}, "topologyKey": HOST}
    both = {**keys, "matchLabelKeys": ["rev", "absent"], "mismatchLabelKeys": ["tenant"]}
    owner = {"app": "web", "rev": "1", "tenant": "a"}
    assert selector_matches(owner, both, {"app": "web", "rev": "1", "tenant": "b"})
    assert not selector_matches(owner, both, {"app": "web", "rev": "1", "tenant": "a"})
    assert not selector_matches(owner, both, {"app": "web", "rev": "2", "tenant": "b"})
    assert selector_matches(owner, both, {"app": "web", "rev": "1"})  # notin matches an absent key
    null = {"topologyKey": HOST, "matchLabelKeys": ["rev"]}
    assert not selector_matches(owner, null, {"app": "web", "rev": "1"})


def test_malformed_label_keys_fail_parsing() -> None:
    info = parse_pod_affinity(pod({"a": "b"}, anti=[{**APART, "matchLabelKeys": "rev"}]))
    assert info.parse_error is not None and "matchLabelKeys" in info.parse_error


def test_terms_without_the_new_fields_are_read_as_before() -> None:
    """1.20 shape: the term's namespaces are the pod's own, and nothing is resolved per cycle."""
    info = parse_pod_affinity(pod(S1, anti=[term("service", "In", ["x"], "zone")], preferred=STAY_S2_REGION))
    assert info.with_namespaces(NAMESPACES) is info
    (anti,) = info.required_anti_affinity
    assert anti.namespaces == frozenset({"default"}) and anti.namespace_selector.nothing
    selected = parse_pod_affinity(pod(S1, anti=[term("service", "In", ["x"], "zone", **SCAN_IN_TEAM1)]))
    (resolved,) = selected.with_namespaces(NAMESPACES).required_anti_affinity
    assert resolved.namespaces == frozenset({"subteam1.team1", "subteam2.team1"})


def test_a_namespace_watch_event_reaches_the_cluster_objects() -> None:
    """Kopf hands Namespace events to Scheduler.on_object (app/handlers.py); their labels are what
    namespaceSelector matches."""
    scheduler = Scheduler(
        SchedulerSettings("kubesched"), default_algorithm(), cast(Binder, None), cast(Recorder, None)
    )
    raw = {
        **namespace("team-a", {"team": "a"}),
        "metadata": {"name": "team-a", "labels": {"team": "a"}, "resourceVersion": "7"},
    }
    scheduler.on_object("Namespace", "ADDED", raw)
    assert scheduler.cache.snapshot().objects.namespaces["team-a"]["metadata"]["labels"] == {"team": "a"}
    scheduler.on_object("Namespace", "DELETED", raw)
    assert scheduler.cache.snapshot().objects.namespaces == {}


def test_explain_reads_namespaces_from_a_snapshot_file() -> None:
    """A snapshot file holding Namespace objects with labels: explain --snapshot honours a
    namespaceSelector against them."""
    avoid_team1 = {
        "podAntiAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": [
                {
                    "labelSelector": {"matchLabels": {"app": "db"}},
                    "namespaceSelector": IN_TEAM1,
                    "topologyKey": HOST,
                }
            ]
        }
    }
    nodes = [
        make_node("n1", labels={HOST: "n1"}),
        make_node("n2", labels={HOST: "n2"}),
        make_node("n3", labels={HOST: "n3"}),
    ]
    pods = [
        make_pod("db-1", "subteam1.team1", labels={"app": "db"}, node_name="n1"),
        make_pod("db-2", "subteam1.team2", labels={"app": "db"}, node_name="n2"),
        make_pod("web", "default", labels={"app": "web"}, affinity=avoid_team1),
    ]
    document = ClusterState(nodes, pods).document()
    document["objects"] = {"Namespace": list(NAMESPACES.values())}
    state = ClusterState.from_document(document)
    explanation = explain_snapshot(state, "default", "web", None, None)
    assert [r.node for r in explanation.rejected] == ["n1"]
    assert ("MatchInterPodAffinity", ERR_REASON_ANTI_AFFINITY_RULES_NOT_MATCH) in explanation.rejected[
        0
    ].reasons
    assert {s.node for s in explanation.feasible} == {"n2", "n3"}
