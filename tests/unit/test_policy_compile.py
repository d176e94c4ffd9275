"""compile_policy / load_policy_file: legacy Policy semantics of 1.20 and the errors users see."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from kubesched.kube.extender_transport import HTTPTransport
from kubesched.plugins.inter_pod_affinity.scoring import InterPodAffinityPriority
from kubesched.plugins.node_label.filtering import CheckNodeLabelPresence
from kubesched.plugins.node_resources.fit import PodFitsResources
from kubesched.plugins.pod_topology_spread.scoring import PodTopologySpreadPriority
from kubesched.plugins.selector_spread.scoring import SelectorSpreadPriority
from kubesched.policy.compile import PolicyError, compile_policy, default_algorithm, parse_policy_text
from kubesched.policy.files import load_policy_file
from kubesched_dev.fixtures import SEED_POLICY, model_pod


def filter_names(spec: dict[str, Any]) -> list[str]:
    return [p.name for p in compile_policy(spec).predicates]


def priority_weights(spec: dict[str, Any]) -> dict[str, int]:
    return {w.label: w.weight for w in compile_policy(spec).priorities}


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
    # ServiceSpreadingPriority is SelectorSpreadPriority (run as PodTopologySpread with system
    # defaults, 1.20's default); EqualPriority is accepted and skipped.
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
    """LegacyRegistry.DefaultPredicates / DefaultPriorities (framework/plugins/legacy_registry.go)."""
    algorithm = compile_policy({})
    assert algorithm.predicate_names == (
        "CheckNodeUnschedulable",
        "GeneralPredicates",
        "NoDiskConflict",
        "PodToleratesNodeTaints",
        "MaxEBSVolumeCount",
        "MaxGCEPDVolumeCount",
        "MaxCSIVolumeCountPred",
        "MaxAzureDiskVolumeCount",
        "CheckVolumeBinding",
        "NoVolumeZoneConflict",
        "EvenPodsSpread",
        "MatchInterPodAffinity",
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
        "MaxEBSVolumeCount",
        "MaxGCEPDVolumeCount",
        "MaxCSIVolumeCountPred",
        "MaxAzureDiskVolumeCount",
        "CheckVolumeBinding",
        "NoVolumeZoneConflict",
        "EvenPodsSpread",
        "MatchInterPodAffinity",
    ]
    # SelectorSpreadPriority (1) and EvenPodsSpreadPriority (2) are one PodTopologySpread plugin in
    # 1.20, with the larger weight.
    assert priority_weights({}) == {
        "BalancedResourceAllocation": 1,
        "EvenPodsSpreadPriority+SelectorSpreadPriority": 2,
        "ImageLocalityPriority": 1,
        "InterPodAffinityPriority": 1,
        "LeastRequestedPriority": 1,
        "NodeAffinityPriority": 1,
        "NodePreferAvoidPodsPriority": 10000,
        "TaintTolerationPriority": 1,
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


RTCR = {"shape": [{"utilization": 0, "score": 0}, {"utilization": 100, "score": 10}]}

ERRORS = [
    (
        {"predicates": [{"name": "Foo"}]},
        "predicates[0].name",
        'unknown predicate "Foo" (accepted: CheckNodeCondition',
    ),
    (
        {"predicates": [{"name": "HostName"}, {"name": "PodFitsResources"}, {"name": "Foo"}]},
        "predicates[2].name",
        'unknown predicate "Foo"',
    ),
    (
        {"predicates": [{"name": "Foo", "argument": {"labelsPresence": None}}]},
        "predicates[0].argument",
        "exactly 1 predicate argument is required",
    ),
    (
        {"predicates": [{"name": "Foo", "argument": {"labelPresence": {"labels": ["a"]}}}]},
        "predicates[0].argument.labelPresence",
        "unknown field (accepted: labelsPresence, serviceAffinity)",
    ),
    (
        {
            "predicates": [
                {
                    "name": "Both",
                    "argument": {"labelsPresence": {"labels": ["a"]}, "serviceAffinity": {"labels": ["b"]}},
                }
            ]
        },
        "predicates[0].argument",
        "exactly 1 predicate argument is required (labelsPresence, serviceAffinity), got 2",
    ),
    (
        {"predicates": [{"name": "Zone", "argument": {"labelsPresence": {"labels": [], "presence": True}}}]},
        "predicates[0].argument.labelsPresence.labels",
        "must be a non-empty list of label keys",
    ),
    (
        {
            "predicates": [
                {"name": "Zone", "argument": {"labelsPresence": {"labels": ["a"], "presence": "yes"}}}
            ]
        },
        "predicates[0].argument.labelsPresence.presence",
        "must be true or false",
    ),
    (
        {
            "predicates": [
                {"name": "Zone", "argument": {"labelsPresence": {"labels": ["a"], "present": True}}}
            ]
        },
        "predicates[0].argument.labelsPresence.present",
        "unknown field (accepted: labels, presence)",
    ),
    (
        {
            "predicates": [
                {"name": "HasA", "argument": {"labelsPresence": {"labels": ["a"], "presence": True}}},
                {"name": "NoA", "argument": {"labelsPresence": {"labels": ["a"], "presence": False}}},
            ]
        },
        "predicates[1].argument",
        "exist in both the present(['a']) and absent(['a']) label list",
    ),
    (
        {"predicates": [{"name": "CheckNodeLabelPresence"}]},
        "predicates[0].argument",
        "this predicate needs an argument with labelsPresence",
    ),
    (
        {"predicates": [{"name": "CheckServiceAffinity", "argument": {"labelsPresence": {"labels": ["a"]}}}]},
        "predicates[0].argument",
        'predicate "CheckServiceAffinity" takes argument serviceAffinity, got labelsPresence',
    ),
    (
        {
            "predicates": [
                {"name": "Zone", "argument": {"labelsPresence": {"labels": ["a"]}}},
                {"name": "Zone", "argument": {"labelsPresence": {"labels": ["b"]}}},
            ]
        },
        "predicates[1].name",
        'duplicate predicate "Zone"',
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
        {"predicates": [{"name": "HostName", "argument": {"labelsPresence": {"labels": ["a"]}}}]},
        "predicates[0].argument",
        'predicate "HostName" takes no argument, got labelsPresence',
    ),
    ({"predicates": [{"name": "HostName", "argument": "x"}]}, "predicates[0].argument", "must be an object"),
    ({"predicates": [{"nam": "HostName"}]}, "predicates[0].nam", "unknown field"),
    ({"predicates": [{}]}, "predicates[0].name", "must be a non-empty string"),
    ({"predicates": ["HostName"]}, "predicates[0]", "must be an object"),
    ({"predicates": {"name": "HostName"}}, "predicates", "must be a list"),
    ({"priorities": [{"name": "Foo", "weight": 1}]}, "priorities[0].name", 'unknown priority "Foo"'),
    (
        {"priorities": [{"name": "Foo", "weight": 1}]},
        "priorities[0].name",
        "accepted: BalancedResourceAllocation, EqualPriority, EvenPodsSpreadPriority,",
    ),
    (
        {"priorities": [{"name": "NodeLabel", "weight": 1}]},
        "priorities[0].argument",
        "this priority needs an argument with labelPreference",
    ),
    (
        {
            "priorities": [
                {
                    "name": "ssd",
                    "weight": 1,
                    "argument": {"labelPreference": {"label": "ssd", "presence": True}},
                },
                {
                    "name": "gpu",
                    "weight": 2,
                    "argument": {"labelPreference": {"label": "gpu", "presence": True}},
                },
            ]
        },
        "priorities[1].weight",
        'NodeLabel priority "gpu" has a different weight with "ssd"',
    ),
    (
        {
            "priorities": [
                {"name": "zone", "weight": 1, "argument": {"serviceAntiAffinity": {"label": "zone"}}},
                {"name": "rack", "weight": 3, "argument": {"serviceAntiAffinity": {"label": "rack"}}},
            ]
        },
        "priorities[1].weight",
        'ServiceAffinity priority "rack" has a different weight with "zone"',
    ),
    (
        {"priorities": [{"name": "zone", "weight": 1, "argument": {"serviceAntiAffinity": {"label": ""}}}]},
        "priorities[0].argument.serviceAntiAffinity.label",
        "must be a non-empty string",
    ),
    (
        {
            "priorities": [
                {"name": "a", "weight": 1, "argument": {"requestedToCapacityRatioArguments": RTCR}},
                {"name": "b", "weight": 1, "argument": {"requestedToCapacityRatioArguments": RTCR}},
            ]
        },
        "priorities[1].argument",
        'priority "b" redeclares custom priority "RequestedToCapacityRatio", from: "a"',
    ),
    (
        {"priorities": [{"name": "r", "weight": 1, "argument": {"requestedToCapacityRatioArguments": {}}}]},
        "priorities[0].argument.requestedToCapacityRatioArguments.shape",
        "at least one point must be specified",
    ),
    (
        {
            "priorities": [
                {
                    "name": "r",
                    "weight": 1,
                    "argument": {
                        "requestedToCapacityRatioArguments": {
                            "shape": [{"utilization": 50, "score": 1}, {"utilization": 40, "score": 2}]
                        }
                    },
                }
            ]
        },
        "priorities[0].argument.requestedToCapacityRatioArguments.shape[1].utilization",
        "utilization values must be sorted: 50 then 40",
    ),
    (
        {
            "priorities": [
                {
                    "name": "r",
                    "weight": 1,
                    "argument": {
                        "requestedToCapacityRatioArguments": {"shape": [{"utilization": 0, "score": 11}]}
                    },
                }
            ]
        },
        "priorities[0].argument.requestedToCapacityRatioArguments.shape[0].score",
        "must be in 0..10, got 11",
    ),
    (
        {
            "priorities": [
                {
                    "name": "r",
                    "weight": 1,
                    "argument": {
                        "requestedToCapacityRatioArguments": {
                            "shape": [{"utilization": 0, "score": 1}],
                            "resources": [{"name": "cpu"}],
                        }
                    },
                }
            ]
        },
        "priorities[0].argument.requestedToCapacityRatioArguments.resources[0].weight",
        "resource cpu weight 0 must not be less than 1",
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
        "priorities[0].argument.x",
        "unknown field (accepted: labelPreference, requestedToCapacityRatioArguments, serviceAntiAffinity)",
    ),
    (
        {"priorities": [{"name": "EqualPriority", "weight": 1, "argument": {"labelPreference": {}}}]},
        "priorities[0].argument",
        "this priority takes no argument",
    ),
    ({"extenders": [{"urlPrefix": "x"}]}, "extenders[0].urlPrefix", "must be an http:// or https:// URL"),
    ({"extenders": [{}]}, "extenders[0].urlPrefix", "must be a non-empty string"),
    (
        {"extenders": [{"urlPrefix": "http://x", "prioritizeVerb": "p"}]},
        "extenders[0].weight",
        "must have a positive weight applied to it, got 0",
    ),
    (
        {
            "extenders": [
                {"urlPrefix": "http://x", "bindVerb": "b"},
                {"urlPrefix": "http://y", "bindVerb": "b"},
            ]
        },
        "extenders",
        "only one extender can implement bind",
    ),
    (
        {"extenders": [{"urlPrefix": "http://x", "managedResources": [{"name": "cpu"}]}]},
        "extenders[0].managedResources[0].name",
        "cpu is an invalid extended resource name",
    ),
    (
        {
            "extenders": [
                {"urlPrefix": "http://x", "managedResources": [{"name": "example.com/gpu"}]},
                {"urlPrefix": "http://y", "managedResources": [{"name": "example.com/gpu"}]},
            ]
        },
        "extenders[1].managedResources",
        "duplicate extender managed resource name 'example.com/gpu'",
    ),
    (
        {"extenders": [{"urlPrefix": "http://x", "httpTimeout": "soon"}]},
        "extenders[0].httpTimeout",
        "duration",
    ),
    (
        {"extenders": [{"urlPrefix": "http://x", "filterverb": 3}]},
        "extenders[0].filterVerb",
        "non-empty string",
    ),
    ({"extenders": [{"urlPrefix": "http://x", "timeout": 3}]}, "extenders[0].timeout", "unknown field"),
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


def test_policy_text_is_read_without_a_file() -> None:
    """The parse is pure; only load_policy_file touches the disk."""
    assert parse_policy_text(json.dumps(SEED_POLICY), "seed.json") == SEED_POLICY
    inline = parse_policy_text("kind: Policy\npredicates: []\n", "inline")
    assert inline == {"kind": "Policy", "predicates": []}
    with pytest.raises(PolicyError) as caught:
        parse_policy_text("predicates: [\n", "inline")
    assert caught.value.field == "inline" and "not valid YAML" in caught.value.message


def test_a_kubescheduler_configuration_as_a_policy_file_points_at_policy_convert() -> None:
    """`kubesched run --policy-config-file` and explain read Policy files only."""
    text = "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n"
    with pytest.raises(PolicyError) as caught:
        parse_policy_text(text, "scheduler-config.yaml")
    assert caught.value.field == "scheduler-config.yaml: kind"
    assert caught.value.message == (
        "must be \"Policy\", got 'KubeSchedulerConfiguration' (kubesched policy convert turns it "
        "into SchedulerPolicies)"
    )


def test_custom_predicates_of_one_kind_make_one_filter_in_1_20_order() -> None:
    """ProcessPredicatePolicy + AppendPredicateConfigs (framework/plugins/legacy_registry.go): every
    labelsPresence entry feeds one NodeLabel filter, placed where CheckNodeLabelPresence runs."""
    spec = {
        "predicates": [
            {"name": "MatchInterPodAffinity"},
            {"name": "zone", "argument": {"labelsPresence": {"labels": ["zone"], "presence": True}}},
            {"name": "not-retiring", "argument": {"labelsPresence": {"labels": ["retiring"]}}},
            {"name": "by-rack", "argument": {"serviceAffinity": {"labels": ["rack"]}}},
            {"name": "HostName"},
        ]
    }
    algorithm = compile_policy(spec)
    assert [p.name for p in algorithm.predicates] == [
        "CheckNodeUnschedulable",
        "HostName",
        "PodToleratesNodeTaints",
        "CheckNodeLabelPresence",
        "CheckServiceAffinity",
        "MatchInterPodAffinity",
    ]
    label_filter = algorithm.predicates[3]
    assert isinstance(label_filter, CheckNodeLabelPresence)
    assert (label_filter.present, label_filter.absent) == (("zone",), ("retiring",))


def test_custom_priorities_weigh_the_common_weight_times_their_number() -> None:
    """legacy_registry.go's NodeLabel and ServiceAffinity producers: weight * number of entries."""
    spec = {
        "priorities": [
            {"name": "ssd", "weight": 2, "argument": {"labelPreference": {"label": "ssd", "presence": True}}},
            {
                "name": "old",
                "weight": 2,
                "argument": {"labelPreference": {"label": "old", "presence": False}},
            },
            {"name": "spread-zone", "weight": 3, "argument": {"serviceAntiAffinity": {"label": "zone"}}},
            {"name": "binpack", "weight": 5, "argument": {"requestedToCapacityRatioArguments": RTCR}},
        ]
    }
    assert priority_weights(spec) == {"binpack": 5, "old+ssd": 4, "spread-zone": 3}


def test_selector_spread_and_even_pods_spread_are_one_priority() -> None:
    """Both names configure plugin PodTopologySpread; appendToPluginSet keeps the larger weight."""
    spec = {
        "priorities": [
            {"name": "ServiceSpreadingPriority", "weight": 5},
            {"name": "EvenPodsSpreadPriority", "weight": 2},
        ]
    }
    algorithm = compile_policy(spec)
    (weighted,) = algorithm.priorities
    assert (weighted.label, weighted.weight) == ("EvenPodsSpreadPriority+SelectorSpreadPriority", 5)
    assert isinstance(weighted.priority, PodTopologySpreadPriority) and weighted.priority.system_defaults
    alone = compile_policy({"priorities": [{"name": "EvenPodsSpreadPriority", "weight": 2}]})
    assert isinstance(alone.priorities[0].priority, PodTopologySpreadPriority)
    assert not alone.priorities[0].priority.system_defaults
    # With the DefaultPodTopologySpread gate off, the older SelectorSpread plugin.
    gate_off = compile_policy(spec, default_pod_topology_spread=False)
    assert {type(w.priority) for w in gate_off.priorities} == {
        SelectorSpreadPriority,
        PodTopologySpreadPriority,
    }


def test_names_1_20_refuses_run_where_1_16_ordered_them() -> None:
    spec = {
        "predicates": [
            {"name": "CheckNodePIDPressure"},
            {"name": "MatchInterPodAffinity"},
            {"name": "CheckNodeCondition"},
            {"name": "PodToleratesNodeNoExecuteTaints"},
            {"name": "NoVolumeZoneConflict"},
        ],
        "priorities": [{"name": "ResourceLimitsPriority", "weight": 1}],
    }
    algorithm = compile_policy(spec)
    assert [p.name for p in algorithm.predicates] == [
        "CheckNodeCondition",
        "CheckNodeUnschedulable",
        "PodToleratesNodeTaints",
        "PodToleratesNodeNoExecuteTaints",
        "NoVolumeZoneConflict",
        "CheckNodePIDPressure",
        "MatchInterPodAffinity",
    ]
    assert priority_weights(spec) == {"ResourceLimitsPriority": 1}


def test_hard_pod_affinity_weight_reaches_the_priority() -> None:
    spec = {
        "priorities": [{"name": "InterPodAffinityPriority", "weight": 1}],
        "hardPodAffinitySymmetricWeight": 7,
    }
    (weighted,) = compile_policy(spec).priorities
    assert isinstance(weighted.priority, InterPodAffinityPriority)
    assert weighted.priority.hard_pod_affinity_weight == 7


def test_extenders_are_parsed_ignorable_last_and_their_ignored_resources_reach_the_fit_filter() -> None:
    """validateExtenders (apis/config/validation/validation.go), factory.go's extender ordering."""
    spec = {
        "predicates": [{"name": "PodFitsResources"}],
        "extenders": [
            {"urlPrefix": "http://a:1/x", "filterVerb": "filter", "ignorable": True},
            {
                # LegacyExtender decodes its keys case-insensitively.
                "URLPrefix": "https://b:2",
                "prioritizeVerb": "prioritize",
                "Weight": 3,
                "bindVerb": "bind",
                "enableHttps": True,
                "httpTimeout": 1_500_000_000,
                "nodeCacheCapable": True,
                "managedResources": [{"name": "example.com/gpu", "ignoredByScheduler": True}],
            },
        ],
    }
    algorithm = compile_policy(spec)
    assert [e.name for e in algorithm.extenders] == ["https://b:2", "http://a:1/x"]
    second = algorithm.extenders[0].config
    assert (second.weight, second.http_timeout, second.node_cache_capable) == (3, 1.5, True)
    assert algorithm.extenders[1].config.http_timeout == 5.0  # the 1.20 default
    assert algorithm.describe()["extenders"] == ["https://b:2", "http://a:1/x"]
    fit = algorithm.predicates[1]
    assert isinstance(fit, PodFitsResources) and fit.ignored_resources == frozenset({"example.com/gpu"})
    gpu_pod = model_pod(extra={"example.com/gpu": "1"})
    assert algorithm.binder_for(gpu_pod) is algorithm.extenders[0]
    assert algorithm.binder_for(model_pod()) is None  # not interested: no managed resource
    string_timeout = compile_policy({"extenders": [{"urlPrefix": "http://x", "httpTimeout": "250ms"}]})
    assert string_timeout.extenders[0].config.http_timeout == 0.25


def test_tls_material_is_loaded_by_the_transport(tmp_path: Path) -> None:
    """Without a transport the entry is validated, not its files; the HTTP transport loads them
    when the policy is compiled, before any call, and a file it cannot use is a policy error."""
    tls = {"caFile": str(tmp_path / "ca")}
    spec = {"extenders": [{"urlPrefix": "https://x:8443", "filterVerb": "filter", "tlsConfig": tls}]}
    (extender,) = compile_policy(spec).extenders
    assert extender.config.tls is not None and extender.config.tls.ca_file == str(tmp_path / "ca")
    with pytest.raises(PolicyError) as caught:
        compile_policy(spec, transport=HTTPTransport)
    assert caught.value.field == "extenders"
    assert caught.value.message.startswith("cannot set up TLS: ")


@pytest.mark.parametrize(("nodes", "percentage", "expected"), [(50, 0, 50), (1000, 0, 420), (5000, 0, 500),
                                                                 (1000, 100, 1000), (5000, 30, 1500),
                                                                 (150, 10, 100)])  # fmt: skip
def test_percentage_of_nodes_to_score(nodes: int, percentage: int, expected: int) -> None:
    """numFeasibleNodesToFind (core/generic_scheduler.go): adaptive by default, 100 means every node."""
    algorithm = compile_policy({"percentageOfNodesToScore": percentage})
    assert algorithm.num_feasible_nodes_to_find(nodes) == expected
