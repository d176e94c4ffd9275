"""compile_policy / load_policy_file: legacy Policy semantics of 1.20 and the errors users see."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from kubesched.algorithm.policy import PolicyError, compile_policy, default_algorithm, load_policy_file

SEED_POLICY: dict[str, Any] = {
    "kind": "Policy",
    "apiVersion": "v1",
    "predicates": [
        {"name": "PodFitsHostPorts"},
        {"name": "PodFitsResources"},
        {"name": "NoDiskConflict"},
        {"name": "NoVolumeZoneConflict"},
        {"name": "MatchNodeSelector"},
        {"name": "HostName"},
    ],
    "priorities": [
        {"name": "LeastRequestedPriority", "weight": 1},
        {"name": "BalancedResourceAllocation", "weight": 1},
        {"name": "ServiceSpreadingPriority", "weight": 1},
        {"name": "EqualPriority", "weight": 1},
    ],
    "hardPodAffinitySymmetricWeight": 10,
    "alwaysCheckAllPredicates": False,
}


def filter_names(spec: dict[str, Any]) -> list[str]:
    return [p.name for p in compile_policy(spec).predicates]


def priority_weights(spec: dict[str, Any]) -> dict[str, int]:
    return {w.priority.name: w.weight for w in compile_policy(spec).priorities}


def test_seed_policy() -> None:
    algorithm = compile_policy(SEED_POLICY)
    # 1.20's predicateOrdering, mandatory ones added.
    assert [p.name for p in algorithm.predicates] == [
        "CheckNodeUnschedulable",
        "HostName",
        "PodFitsHostPorts",
        "MatchNodeSelector",
        "PodFitsResources",
        "NoDiskConflict",
        "PodToleratesNodeTaints",
        "NoVolumeZoneConflict",
    ]
    # ServiceSpreadingPriority is SelectorSpreadPriority; EqualPriority is accepted and skipped.
    assert priority_weights(SEED_POLICY) == {
        "BalancedResourceAllocation": 1,
        "LeastRequestedPriority": 1,
        "SelectorSpreadPriority": 1,
    }
    assert algorithm.priority_names == (
        "BalancedResourceAllocation",
        "EqualPriority",
        "LeastRequestedPriority",
        "SelectorSpreadPriority",
    )
    assert algorithm.hard_pod_affinity_symmetric_weight == 10
    assert algorithm.always_check_all_predicates is False
    assert algorithm.percentage_of_nodes_to_score == 0
    assert algorithm.describe()["ignoredPriorities"] == ["EqualPriority"]


def test_body_without_kind_is_accepted_and_compiles_the_same() -> None:
    body = {k: v for k, v in SEED_POLICY.items() if k not in ("kind", "apiVersion")}
    assert filter_names(body) == filter_names(SEED_POLICY)
    assert compile_policy({**SEED_POLICY, "apiVersion": "kubescheduler.config.k8s.io/v1"}).predicate_names


def test_absent_predicates_and_priorities_mean_the_defaults() -> None:
    algorithm = compile_policy({})
    assert algorithm.predicate_names == (
        "CheckNodeUnschedulable",
        "GeneralPredicates",
        "NoDiskConflict",
        "PodToleratesNodeTaints",
        "NoVolumeZoneConflict",
    )
    # GeneralPredicates = PodFitsResources + HostName + PodFitsHostPorts + MatchNodeSelector, in that order.
    assert [p.name for p in algorithm.predicates] == [
        "CheckNodeUnschedulable",
        "PodFitsResources",
        "HostName",
        "PodFitsHostPorts",
        "MatchNodeSelector",
        "NoDiskConflict",
        "PodToleratesNodeTaints",
        "NoVolumeZoneConflict",
    ]
    assert priority_weights({}) == {
        "BalancedResourceAllocation": 1,
        "LeastRequestedPriority": 1,
        "SelectorSpreadPriority": 1,
    }
    assert algorithm.hard_pod_affinity_symmetric_weight == 1
    assert default_algorithm().describe() == algorithm.describe()


def test_empty_lists_mean_mandatory_predicates_and_no_priorities() -> None:
    algorithm = compile_policy({"predicates": [], "priorities": []})
    assert [p.name for p in algorithm.predicates] == ["CheckNodeUnschedulable", "PodToleratesNodeTaints"]
    assert algorithm.priorities == ()
    # null is "absent", as in Go
    assert filter_names({"predicates": None}) == filter_names({})


def test_a_filter_enabled_twice_runs_once_where_it_first_appears() -> None:
    spec = {"predicates": [{"name": "PodFitsResources"}, {"name": "GeneralPredicates"}, {"name": "HostName"}]}
    assert filter_names(spec) == [
        "CheckNodeUnschedulable",
        "PodFitsResources",
        "HostName",
        "PodFitsHostPorts",
        "MatchNodeSelector",
        "PodToleratesNodeTaints",
    ]


def test_aliases_and_settings() -> None:
    spec = {
        "predicates": [{"name": "PodFitsPorts"}],
        "priorities": [{"name": "ServiceSpreadingPriority", "weight": 3}],
        "alwaysCheckAllPredicates": True,
        "percentageOfNodesToScore": 30,
        "hardPodAffinitySymmetricWeight": 0,
        "extenders": [],
    }
    algorithm = compile_policy(spec)
    assert "PodFitsHostPorts" in algorithm.predicate_names
    assert priority_weights(spec) == {"SelectorSpreadPriority": 3}
    assert algorithm.always_check_all_predicates is True
    assert algorithm.percentage_of_nodes_to_score == 30
    assert algorithm.hard_pod_affinity_symmetric_weight == 1  # 0 means unset in 1.20


ERRORS = [
    ({"predicates": [{"name": "Foo"}]}, "predicates[0].name", 'unknown predicate "Foo"'),
    (
        {"predicates": [{"name": "HostName"}, {"name": "PodFitsResources"}, {"name": "Foo"}]},
        "predicates[2].name",
        'unknown predicate "Foo"',
    ),
    (
        {"predicates": [{"name": "MatchInterPodAffinity"}]},
        "predicates[0].name",
        '"MatchInterPodAffinity" is not supported yet',
    ),
    ({"predicates": [{"name": "CheckVolumeBinding"}]}, "predicates[0].name", "is not supported yet"),
    ({"predicates": [{"name": "MaxEBSVolumeCount"}]}, "predicates[0].name", "is not supported yet"),
    ({"predicates": [{"name": "EvenPodsSpread"}]}, "predicates[0].name", "is not supported yet"),
    (
        {
            "predicates": [
                {"name": "ZoneLabel", "argument": {"labelsPresence": {"labels": ["zone"], "presence": True}}}
            ]
        },
        "predicates[0].name",
        'custom predicate "ZoneLabel" (labelsPresence) is not supported yet',
    ),
    (
        {"predicates": [{"name": "HostName"}, {"name": "HostName"}]},
        "predicates[1].name",
        'duplicate predicate "HostName"',
    ),
    (
        {"predicates": [{"name": "PodFitsHostPorts"}, {"name": "PodFitsPorts"}]},
        "predicates[1].name",
        'duplicate predicate "PodFitsPorts" (already given as predicates[0])',
    ),
    (
        {"predicates": [{"name": "HostName", "argument": {"labelsPresence": {}}}]},
        "predicates[0].argument",
        "takes no argument",
    ),
    ({"predicates": [{"name": "HostName", "argument": "x"}]}, "predicates[0].argument", "must be an object"),
    ({"predicates": [{"nam": "HostName"}]}, "predicates[0].nam", "unknown field"),
    ({"predicates": [{}]}, "predicates[0].name", "must be a non-empty string"),
    ({"predicates": ["HostName"]}, "predicates[0]", "must be an object"),
    ({"predicates": {"name": "HostName"}}, "predicates", "must be a list"),
    ({"priorities": [{"name": "Foo", "weight": 1}]}, "priorities[0].name", 'unknown priority "Foo"'),
    (
        {"priorities": [{"name": "InterPodAffinityPriority", "weight": 1}]},
        "priorities[0].name",
        "is not supported yet",
    ),
    (
        {"priorities": [{"name": "MostRequestedPriority", "weight": 1}]},
        "priorities[0].name",
        "is not supported yet",
    ),
    (
        {
            "priorities": [
                {"name": "Zones", "weight": 1, "argument": {"serviceAntiAffinity": {"label": "zone"}}}
            ]
        },
        "priorities[0].name",
        'custom priority "Zones" (serviceAntiAffinity) is not supported yet',
    ),
    (
        {"priorities": [{"name": "LeastRequestedPriority", "weight": 0}]},
        "priorities[0].weight",
        "positive integer weight",
    ),
    ({"priorities": [{"name": "LeastRequestedPriority", "weight": -1}]}, "priorities[0].weight", "got -1"),
    ({"priorities": [{"name": "LeastRequestedPriority"}]}, "priorities[0].weight", "got None"),
    ({"priorities": [{"name": "LeastRequestedPriority", "weight": "1"}]}, "priorities[0].weight", "got '1'"),
    (
        {"priorities": [{"name": "LeastRequestedPriority", "weight": True}]},
        "priorities[0].weight",
        "got True",
    ),
    ({"priorities": [{"name": "LeastRequestedPriority", "weight": 1.5}]}, "priorities[0].weight", "got 1.5"),
    (
        {"priorities": [{"name": "EqualPriority", "weight": 0}]},
        "priorities[0].weight",
        "positive integer weight",
    ),
    (
        {"priorities": [{"name": "LeastRequestedPriority", "weight": 2**62}]},
        "priorities[0].weight",
        "positive integer weight below",
    ),
    (
        {
            "priorities": [
                {"name": "SelectorSpreadPriority", "weight": 1},
                {"name": "ServiceSpreadingPriority", "weight": 2},
            ]
        },
        "priorities[1].name",
        'duplicate priority "ServiceSpreadingPriority" (already given as priorities[0])',
    ),
    (
        {"priorities": [{"name": "LeastRequestedPriority", "weight": 1, "argument": {"x": 1}}]},
        "priorities[0].argument",
        "takes no argument",
    ),
    ({"extenders": [{"urlPrefix": "http://x"}]}, "extenders", "extenders are not supported yet"),
    ({"extenders": {}}, "extenders", "must be a list"),
    ({"hardPodAffinitySymmetricWeight": 101}, "hardPodAffinitySymmetricWeight", "not in valid range [0-100]"),
    ({"hardPodAffinitySymmetricWeight": -1}, "hardPodAffinitySymmetricWeight", "not in valid range"),
    ({"percentageOfNodesToScore": 101}, "percentageOfNodesToScore", "not in valid range [0-100]"),
    ({"percentageOfNodesToScore": "50%"}, "percentageOfNodesToScore", "not in valid range"),
    ({"alwaysCheckAllPredicates": "yes"}, "alwaysCheckAllPredicates", "must be true or false"),
    ({"kind": "Deployment"}, "kind", 'must be "Policy"'),
    ({"apiVersion": "v2"}, "apiVersion", "must be one of v1"),
    ({"priorites": []}, "priorites", "unknown field"),
]


@pytest.mark.parametrize(("spec", "field", "message"), ERRORS, ids=[e[1] + ":" + e[2][:30] for e in ERRORS])
def test_policy_errors(spec: dict[str, Any], field: str, message: str) -> None:
    with pytest.raises(PolicyError) as caught:
        compile_policy(spec)
    assert caught.value.field == field
    assert str(caught.value).startswith(f"{field}: ")
    assert message in str(caught.value)
    assert isinstance(caught.value, ValueError)


def test_not_an_object() -> None:
    with pytest.raises(PolicyError, match=r"^policy: must be an object"):
        compile_policy(["predicates"])  # type: ignore[arg-type]


def test_load_json_and_yaml(tmp_path: Path) -> None:
    as_json = tmp_path / "policy.json"
    as_json.write_text(json.dumps(SEED_POLICY))
    as_yaml = tmp_path / "policy.yaml"
    as_yaml.write_text(
        "kind: Policy\napiVersion: v1\npredicates:\n- name: HostName\npriorities:\n"
        "- name: LeastRequestedPriority\n  weight: 2\n"
    )
    assert load_policy_file(as_json) == SEED_POLICY
    loaded = load_policy_file(str(as_yaml))
    assert priority_weights(loaded) == {"LeastRequestedPriority": 2}
    # JSON under another name is read as YAML, which is fine
    other = tmp_path / "policy.cfg"
    other.write_text(json.dumps(SEED_POLICY))
    assert load_policy_file(other) == SEED_POLICY


@pytest.mark.parametrize(
    ("name", "content", "field", "message"),
    [
        ("bad.json", '{"predicates": [', "bad.json", "not valid JSON"),
        ("bad.yaml", "predicates: [\n", "bad.yaml", "not valid YAML"),
        ("list.yaml", "- a\n- b\n", "list.yaml", "must hold an object, got list"),
        ("empty.yaml", "", "empty.yaml", "must hold an object, got NoneType"),
        ("kind.yaml", "kind: Pod\n", "kind.yaml: kind", "must be \"Policy\", got 'Pod'"),
        (
            "version.json",
            '{"kind": "Policy", "apiVersion": "v9"}',
            "version.json: apiVersion",
            "must be one of",
        ),
    ],
)
def test_load_errors(tmp_path: Path, name: str, content: str, field: str, message: str) -> None:
    path = tmp_path / name
    path.write_text(content)
    with pytest.raises(PolicyError) as caught:
        load_policy_file(path)
    assert caught.value.field == str(tmp_path / field)
    assert message in str(caught.value)


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(PolicyError, match="cannot read policy file"):
        load_policy_file(tmp_path / "nope.json")
