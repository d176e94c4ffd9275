"""KubeSchedulerConfiguration import (policy/kubescheduler_config.py) and NodeResourcesFit's 1.32
scoring strategies (plugins/node_resources/scoring_strategy.py).

Plugin sets resolve as kube-scheduler 1.32's pkg/scheduler/apis/config/v1/default_plugins.go
(getDefaultPlugins, mergePluginSet) does; score rows marked "1.32 table" are cases of
pkg/scheduler/framework/plugins/noderesources/least_allocated_test.go and most_allocated_test.go
with their expected scores, the RequestedToCapacityRatio ones are computed by hand from
requested_to_capacity_ratio.go's formula."""

from __future__ import annotations

import textwrap
from collections.abc import Mapping, Sequence
from typing import Any

import pytest
import yaml

from kubesched.plugins.node_resources.scoring_strategy import NodeResourcesFitScore, pod_request
from kubesched.policy.compile import PolicyError
from kubesched.policy.kubescheduler_config import (
    UNCONVERTED_ANNOTATION,
    ConvertedProfile,
    configuration_manifests,
    convert_configuration,
)
from kubesched.policy.store import compile_spec
from kubesched.runtime.gangs import DEFAULT_RESERVE_AFTER
from kubesched_dev.fixtures import container, model_node, model_pod, node_info, run_priority

V1 = "kubescheduler.config.k8s.io/v1"
V1BETA3 = "kubescheduler.config.k8s.io/v1beta3"

DEFAULT_PREDICATES_1_32 = [
    "CheckNodeUnschedulable",
    "HostName",
    "PodToleratesNodeTaints",
    "MatchNodeSelector",
    "PodFitsHostPorts",
    "PodFitsResources",
    "NoDiskConflict",
    "MaxCSIVolumeCountPred",
    "CheckVolumeBinding",
    "NoVolumeZoneConflict",
    "EvenPodsSpread",
    "MatchInterPodAffinity",
]
DEFAULT_PRIORITIES_1_32 = [
    ("TaintTolerationPriority", 3),
    ("NodeAffinityPriority", 2),
    ("LeastRequestedPriority", 1),
    ("EvenPodsSpreadPriority", 2),
    ("SelectorSpreadPriority", 2),
    ("InterPodAffinityPriority", 2),
    ("BalancedResourceAllocation", 1),
    ("ImageLocalityPriority", 1),
]


def configuration(text: str = "", version: str = V1) -> dict[str, Any]:
    document: dict[str, Any] = {"apiVersion": version, "kind": "KubeSchedulerConfiguration"}
    document.update(yaml.safe_load(text) or {})
    return document


def only_profile(text: str = "", version: str = V1) -> ConvertedProfile:
    profiles, _ = convert_configuration(configuration(text, version))
    (profile,) = profiles
    # Whatever convert writes, the operator accepts.
    compile_spec(profile.spec, "kubesched")
    return profile


def predicates(profile: ConvertedProfile) -> list[str]:
    return [entry["name"] for entry in profile.spec["predicates"]]


def priorities(profile: ConvertedProfile) -> list[tuple[str, int]]:
    return [(entry["name"], entry["weight"]) for entry in profile.spec["priorities"]]


def messages(profile: ConvertedProfile) -> list[str]:
    return [str(entry) for entry in profile.unconverted]


def test_an_empty_v1_configuration_is_the_1_32_default_profile() -> None:
    profile = only_profile()
    assert profile.scheduler_name == "default-scheduler"
    assert profile.spec["schedulerName"] == "default-scheduler"
    assert predicates(profile) == DEFAULT_PREDICATES_1_32
    assert priorities(profile) == DEFAULT_PRIORITIES_1_32
    assert set(profile.spec) == {"schedulerName", "predicates", "priorities"}
    assert profile.unconverted == ()


def test_v1beta3_defaults_keep_the_in_tree_volume_limits_and_have_no_profile_percentage() -> None:
    profile = only_profile("profiles: [{schedulerName: s, percentageOfNodesToScore: 30}]", V1BETA3)
    assert predicates(profile) == [
        *DEFAULT_PREDICATES_1_32[:7],
        "MaxEBSVolumeCount",
        "MaxGCEPDVolumeCount",
        "MaxCSIVolumeCountPred",
        "MaxAzureDiskVolumeCount",
        *DEFAULT_PREDICATES_1_32[8:],
    ]
    assert priorities(profile) == DEFAULT_PRIORITIES_1_32
    assert "percentageOfNodesToScore" not in profile.spec
    assert messages(profile) == [
        "profiles[0].percentageOfNodesToScore: a field unknown to "
        "kubescheduler.config.k8s.io/v1beta3 has no SchedulerPolicy equivalent (remove it)"
    ]


def test_two_profiles_make_two_policies_named_after_their_scheduler_names() -> None:
    profiles, unconverted = convert_configuration(
        configuration(
            """
            profiles:
            - schedulerName: default-scheduler
            - schedulerName: no-scoring
              plugins:
                score: {disabled: [{name: "*"}]}
            """
        )
    )
    assert [p.scheduler_name for p in profiles] == ["default-scheduler", "no-scoring"]
    assert unconverted == []
    manifests = configuration_manifests(profiles)
    assert [m["metadata"] for m in manifests] == [{"name": "default-scheduler"}, {"name": "no-scoring"}]
    assert manifests[1]["spec"]["priorities"] == []
    assert [e["name"] for e in manifests[1]["spec"]["predicates"]] == DEFAULT_PREDICATES_1_32
    assert all(m["kind"] == "SchedulerPolicy" for m in manifests)
    with pytest.raises(PolicyError, match="a name can be given to one profile only"):
        configuration_manifests(profiles, name="x")


@pytest.mark.parametrize(
    ("plugins", "expected_predicates", "expected_priorities", "reported"),
    [
        pytest.param(
            """
            multiPoint:
              enabled: [{name: NodeResourcesFit, weight: 4}, {name: ImageLocality, weight: 7}]
            """,
            DEFAULT_PREDICATES_1_32,
            [
                (name, {"LeastRequestedPriority": 4, "ImageLocalityPriority": 7}.get(name, weight))
                for name, weight in DEFAULT_PRIORITIES_1_32
            ],
            [],
            id="multiPoint weights reconfigure the defaults in place",
        ),
        pytest.param(
            """
            score:
              enabled: [{name: TaintToleration, weight: 10}]
              disabled: [{name: ImageLocality}, {name: NodeResourcesBalancedAllocation}]
            """,
            DEFAULT_PREDICATES_1_32,
            [
                ("TaintTolerationPriority", 10),
                ("NodeAffinityPriority", 2),
                ("LeastRequestedPriority", 1),
                ("EvenPodsSpreadPriority", 2),
                ("SelectorSpreadPriority", 2),
                ("InterPodAffinityPriority", 2),
            ],
            [],
            id="a score entry overrides its multiPoint weight; disabled scores keep their filters",
        ),
        pytest.param(
            """
            filter:
              disabled: [{name: InterPodAffinity}, {name: PodTopologySpread}]
            """,
            [p for p in DEFAULT_PREDICATES_1_32 if p not in ("MatchInterPodAffinity", "EvenPodsSpread")],
            DEFAULT_PRIORITIES_1_32,
            [],
            id="a filter disabled at filter only keeps its score",
        ),
        pytest.param(
            """
            multiPoint:
              enabled:
              - {name: PrioritySort}
              - {name: NodeResourcesFit, weight: 2}
              - {name: NodeUnschedulable}
              - {name: TaintToleration}
              - {name: DefaultBinder}
              - {name: DefaultPreemption}
              - {name: SchedulingGates}
              disabled: [{name: "*"}]
            """,
            ["PodFitsResources", "CheckNodeUnschedulable", "PodToleratesNodeTaints"],
            [("LeastRequestedPriority", 2), ("TaintTolerationPriority", 1)],
            [],
            id="disabled * keeps only what is enabled, weight 1 when none is given",
        ),
        pytest.param(
            """
            multiPoint:
              enabled: [{name: NodeResourcesFit}]
              disabled: [{name: "*"}]
            """,
            ["PodFitsResources"],
            [("LeastRequestedPriority", 1)],
            [
                "profiles[0].plugins: a profile without SchedulingGates",
                "profiles[0].plugins: a profile without PrioritySort",
                "profiles[0].plugins: a profile without DefaultPreemption",
                "profiles[0].plugins: a profile without DefaultBinder",
                "profiles[0].plugins: a profile without the NodeUnschedulable filter",
                "profiles[0].plugins: a profile without the TaintToleration filter",
            ],
            id="built-in and mandatory plugins cannot be turned off: reported",
        ),
        pytest.param(
            """
            multiPoint:
              enabled: [{name: CapacityScheduling, weight: 3}]
            filter:
              enabled: [{name: NodeResourcesTopology}]
            score:
              enabled: [{name: NodePorts}]
            postFilter:
              disabled: [{name: DefaultPreemption}]
            """,
            DEFAULT_PREDICATES_1_32,
            DEFAULT_PRIORITIES_1_32,
            [
                "profiles[0].plugins.multiPoint.enabled[0]: plugin CapacityScheduling",
                "profiles[0].plugins.filter.enabled[0]: plugin NodeResourcesTopology (out-of-tree or"
                " unknown)",
                "profiles[0].plugins.score.enabled[0]: plugin NodePorts at score",
                "profiles[0].plugins: a profile without DefaultPreemption",
            ],
            id="out-of-tree plugins and impossible points are reported, never dropped silently",
        ),
    ],
)
def test_plugin_sets(
    plugins: str,
    expected_predicates: list[str],
    expected_priorities: list[tuple[str, int]],
    reported: list[str],
) -> None:
    indented = textwrap.indent(textwrap.dedent(plugins).strip(), "    ")
    profile = only_profile(f"profiles:\n- schedulerName: s\n  plugins:\n{indented}\n")
    assert predicates(profile) == expected_predicates
    assert priorities(profile) == expected_priorities
    assert [m.split(" has no SchedulerPolicy equivalent")[0] for m in messages(profile)] == reported


def test_coscheduling_is_one_note_and_its_wait_becomes_each_podgroups_timeout() -> None:
    profile = only_profile(
        """
        profiles:
        - schedulerName: gangs
          plugins:
            queueSort: {enabled: [{name: Coscheduling}], disabled: [{name: "*"}]}
            preFilter: {enabled: [{name: Coscheduling}]}
            postFilter: {enabled: [{name: Coscheduling}]}
            permit: {enabled: [{name: Coscheduling}]}
            reserve: {enabled: [{name: Coscheduling}]}
            postBind: {enabled: [{name: Coscheduling}]}
          pluginConfig:
          - name: Coscheduling
            args: {permitWaitingTimeSeconds: 10, podGroupBackoffSeconds: 5}
        """
    )
    assert predicates(profile) == DEFAULT_PREDICATES_1_32
    # Coscheduling's queue order (priority, then the group's age) is kubesched's: no PrioritySort note.
    assert messages(profile) == [
        "profiles[0].plugins.queueSort.enabled[0]: plugin Coscheduling has no SchedulerPolicy equivalent "
        "(PodGroups are built into kubesched: every profile places a group's members all or nothing)",
        "profiles[0].pluginConfig[0].args.permitWaitingTimeSeconds: a 10 s wait for PodGroups without "
        "scheduleTimeoutSeconds has no SchedulerPolicy equivalent (kubesched uses each PodGroup's "
        "scheduleTimeoutSeconds: once it has passed, the group's status says ScheduleTimeout and, "
        "first in line, the group holds the nodes its members fit on; a group without one holds them "
        f"after {DEFAULT_RESERVE_AFTER:g} s and never times out; set scheduleTimeoutSeconds on the "
        "PodGroups)",
        "profiles[0].pluginConfig[0].args.podGroupBackoffSeconds: a PodGroup backoff has no "
        "SchedulerPolicy equivalent (a group backs off as a pod does: use kubesched run's "
        "--pod-initial-backoff and --pod-max-backoff)",
    ]


def test_capacity_scheduling_and_out_of_tree_plugins_are_one_note_each() -> None:
    profile = only_profile(
        """
        profiles:
        - schedulerName: quotas
          plugins:
            preFilter: {enabled: [{name: CapacityScheduling}, {name: NetworkOverhead}]}
            filter: {enabled: [{name: NetworkOverhead}]}
            score: {enabled: [{name: NetworkOverhead, weight: 5}]}
            postFilter: {enabled: [{name: CapacityScheduling}]}
            reserve: {enabled: [{name: CapacityScheduling}]}
        """
    )
    assert messages(profile) == [
        "profiles[0].plugins.preFilter.enabled[0]: plugin CapacityScheduling has no SchedulerPolicy "
        "equivalent (ElasticQuotas are built into kubesched: every profile admits and reclaims by them "
        "(SchedulerPolicy quotas))",
        "profiles[0].plugins.preFilter.enabled[1]: plugin NetworkOverhead (out-of-tree or unknown) "
        "has no SchedulerPolicy equivalent (kubesched runs in-tree plugins only)",
    ]


def test_the_arguments_of_another_plugin_read_as_one_setting() -> None:
    profile = only_profile(
        """
        profiles:
        - schedulerName: s
          pluginConfig:
          - name: DefaultPreemption
            args: {minCandidateNodesPercentage: 20}
        """
    )
    assert messages(profile) == [
        "profiles[0].pluginConfig[0].args: configuring DefaultPreemption has no SchedulerPolicy "
        "equivalent (kubesched runs the plugin with its defaults)"
    ]


def fit_profile(strategy: Mapping[str, Any], plugins: Mapping[str, Any] | None = None) -> ConvertedProfile:
    """The only profile of a v1 configuration whose NodeResourcesFit has this scoringStrategy."""
    args = {"apiVersion": V1, "kind": "NodeResourcesFitArgs", "scoringStrategy": dict(strategy)}
    raw: dict[str, Any] = {
        "schedulerName": "gpu",
        "pluginConfig": [{"name": "NodeResourcesFit", "args": args}],
    }
    if plugins is not None:
        raw["plugins"] = dict(plugins)
    profiles, _ = convert_configuration({**configuration(), "profiles": [raw]})
    (profile,) = profiles
    return profile


CPU_1 = {"name": "cpu", "weight": 1}
MEMORY_1 = {"name": "memory", "weight": 1}
BIN_PACKING = [{"utilization": 0, "score": 0}, {"utilization": 100, "score": 10}]


@pytest.mark.parametrize(
    ("strategy", "legacy", "scoring"),
    [
        pytest.param({"type": "LeastAllocated"}, ("LeastRequestedPriority", 1), None, id="default strategy"),
        pytest.param(
            {"type": "LeastAllocated", "resources": [CPU_1, MEMORY_1]},
            ("LeastRequestedPriority", 1),
            None,
            id="default strategy spelt out",
        ),
        pytest.param(
            {
                "type": "LeastAllocated",
                "resources": [CPU_1, MEMORY_1, {"name": "nvidia.com/gpu", "weight": 3}],
            },
            None,
            {
                "weight": 1,
                "type": "LeastAllocated",
                "resources": [CPU_1, MEMORY_1, {"name": "nvidia.com/gpu", "weight": 3}],
            },
            id="LeastAllocated with a gpu weight",
        ),
        pytest.param(
            {"type": "MostAllocated", "resources": [{"name": "nvidia.com/gpu", "weight": 5}, CPU_1]},
            None,
            {
                "weight": 1,
                "type": "MostAllocated",
                "resources": [{"name": "nvidia.com/gpu", "weight": 5}, CPU_1],
            },
            id="MostAllocated with a gpu weight",
        ),
        pytest.param(
            {"type": "MostAllocated"},
            None,
            {"weight": 1, "type": "MostAllocated", "resources": [CPU_1, MEMORY_1]},
            id="MostAllocated on its defaults keeps 1.32's formula",
        ),
        pytest.param(
            {
                "type": "RequestedToCapacityRatio",
                "resources": [{"name": "nvidia.com/gpu", "weight": 4}],
                "requestedToCapacityRatio": {"shape": BIN_PACKING},
            },
            None,
            {
                "weight": 1,
                "type": "RequestedToCapacityRatio",
                "resources": [{"name": "nvidia.com/gpu", "weight": 4}],
                "shape": BIN_PACKING,
            },
            id="RequestedToCapacityRatio with a gpu weight",
        ),
    ],
)
def test_scoring_strategies(
    strategy: Mapping[str, Any], legacy: tuple[str, int] | None, scoring: dict[str, Any] | None
) -> None:
    profile = fit_profile(strategy)
    fit_priorities = [p for p in priorities(profile) if p[0] == "LeastRequestedPriority"]
    assert fit_priorities == ([legacy] if legacy else [])
    assert profile.spec.get("nodeResourcesScoring") == scoring
    algorithm = compile_spec(profile.spec, "kubesched")[1]
    assert ("NodeResourcesFit" in algorithm.priority_names) == (scoring is not None)
    assert profile.unconverted == ()


def test_the_pod_overhead_counts_once_in_the_1_32_scoring_request() -> None:
    """resource_allocation.go calculatePodResourceRequest (1.32): resourcehelper.PodRequests adds
    the overhead once, in millicores for cpu."""
    pod = model_pod(cpu="500m", memory="100Mi", overhead={"cpu": "250m", "memory": "10Mi"})
    assert pod_request(pod, "cpu") == 750
    assert pod_request(pod, "memory") == 110 * 2**20


def test_a_weighted_node_resources_fit_score_keeps_its_profile_weight() -> None:
    score_weight = {"score": {"enabled": [{"name": "NodeResourcesFit", "weight": 6}]}}
    profile = fit_profile({"type": "MostAllocated"}, score_weight)
    assert profile.spec["nodeResourcesScoring"]["weight"] == 6
    (fit,) = [w for w in compile_spec(profile.spec, "k")[1].priorities if w.label == "NodeResourcesFit"]
    assert fit.weight == 6


def test_plugin_arguments_hard_pod_affinity_weight_and_default_constraints() -> None:
    profile = only_profile(
        """
        profiles:
        - schedulerName: spread
          pluginConfig:
          - name: InterPodAffinity
            args: {hardPodAffinityWeight: 10, ignorePreferredTermsOfExistingPods: true}
          - name: PodTopologySpread
            args:
              defaultingType: List
              defaultConstraints:
              - {maxSkew: 1, topologyKey: topology.kubernetes.io/zone, whenUnsatisfiable: ScheduleAnyway}
          - name: NodeResourcesFit
            args: {ignoredResources: [example.com/foo]}
          - name: VolumeBinding
            args: {bindTimeoutSeconds: 30}
        """
    )
    assert profile.spec["hardPodAffinitySymmetricWeight"] == 10
    assert profile.spec["podTopologySpreadDefaultConstraints"] == [
        {"maxSkew": 1, "topologyKey": "topology.kubernetes.io/zone", "whenUnsatisfiable": "ScheduleAnyway"}
    ]
    # List defaulting: no system default constraints, so no SelectorSpreadPriority.
    assert ("EvenPodsSpreadPriority", 2) in priorities(profile)
    assert "SelectorSpreadPriority" not in [name for name, _ in priorities(profile)]
    args = "profiles[0].pluginConfig"
    assert [m.split(" has no")[0] for m in messages(profile)] == [
        f"{args}[2].args.ignoredResources: ignoring resources in the fit check",
        f"{args}[0].args.ignorePreferredTermsOfExistingPods: ignoring existing pods' preferred terms",
        f"{args}[3].args: configuring VolumeBinding",
    ]


def test_percentage_of_nodes_to_score_global_and_per_profile() -> None:
    profiles, _ = convert_configuration(
        configuration(
            """
            percentageOfNodesToScore: 40
            profiles:
            - schedulerName: a
            - schedulerName: b
              percentageOfNodesToScore: 70
            """
        )
    )
    assert [p.spec["percentageOfNodesToScore"] for p in profiles] == [40, 70]


def test_process_settings_and_extenders() -> None:
    profiles, unconverted = convert_configuration(
        configuration(
            """
            parallelism: 16
            podInitialBackoffSeconds: 2
            leaderElection: {leaderElect: true}
            clientConnection: {qps: 100}
            extenders:
            - {urlPrefix: "http://127.0.0.1:8888/", filterVerb: filter, weight: 1, httpTimeout: 30s}
            profiles: [{schedulerName: a}, {schedulerName: b}]
            """
        )
    )
    assert [str(u) for u in unconverted] == [
        "parallelism: the scoring parallelism has no SchedulerPolicy equivalent "
        "(kubesched scores in one process; nothing to set)",
        "podInitialBackoffSeconds: the initial pod backoff has no SchedulerPolicy equivalent "
        "(use kubesched run's --pod-initial-backoff)",
        "leaderElection: leader election has no SchedulerPolicy equivalent "
        "(use kubesched run's --leader-elect* flags)",
        "clientConnection: the client connection has no SchedulerPolicy equivalent "
        "(use kubesched run's --kubeconfig, --kube-api-qps and --kube-api-burst)",
    ]
    for profile in profiles:
        assert profile.unconverted == tuple(unconverted)
        assert profile.spec["extenders"][0]["urlPrefix"] == "http://127.0.0.1:8888/"
        assert compile_spec(profile.spec, "k")[1].extenders
    (manifest, _) = configuration_manifests(profiles)
    assert (
        manifest["metadata"]["annotations"][UNCONVERTED_ANNOTATION]
        .splitlines()[0]
        .startswith("parallelism: the scoring parallelism")
    )


@pytest.mark.parametrize(
    ("document", "field"),
    [
        ({"apiVersion": "kubescheduler.config.k8s.io/v1beta2"}, "apiVersion"),
        ({"profiles": [{"schedulerName": "a"}, {"schedulerName": "a"}]}, "profiles[1].schedulerName"),
        (
            {"profiles": [{"plugins": {"score": {"enabled": [{"weight": 1}]}}}]},
            "profiles[0].plugins.score.enabled[0].name",
        ),
        (
            {
                "profiles": [
                    {
                        "pluginConfig": [
                            {"name": "NodeResourcesFit", "args": {"scoringStrategy": {"type": "Most"}}}
                        ]
                    }
                ]
            },
            "profiles[0].pluginConfig[0].args.scoringStrategy.type",
        ),
        (
            {
                "profiles": [
                    {
                        "pluginConfig": [
                            {
                                "name": "PodTopologySpread",
                                "args": {"defaultConstraints": [{"maxSkew": 1, "topologyKey": "z"}]},
                            }
                        ]
                    }
                ]
            },
            "profiles[0].pluginConfig[0].args.defaultConstraints",
        ),
        ({"percentageOfNodesToScore": 101}, "percentageOfNodesToScore"),
    ],
)
def test_what_kube_scheduler_would_refuse_is_an_error(document: Mapping[str, Any], field: str) -> None:
    with pytest.raises(PolicyError) as caught:
        convert_configuration({"apiVersion": V1, "kind": "KubeSchedulerConfiguration", **document})
    assert caught.value.field == field


# ------------------------------------------------------------------ NodeResourcesFit 1.32 scoring

GPU = "abc.com/xyz"  # extendedRes of the Go tests
EXTENDED_RESOURCE_SET = (("cpu", 1), ("memory", 1), (GPU, 1))


def score(
    strategy: str,
    resources: Sequence[tuple[str, int]],
    pod_containers: Sequence[dict[str, Any]],
    nodes: Sequence[Mapping[str, str]],
    existing: Sequence[Sequence[Mapping[str, str]]] = (),
    shape: Sequence[tuple[int, int]] = (),
) -> list[int]:
    priority = NodeResourcesFitScore.from_argument(
        {
            "type": strategy,
            "resources": [{"name": n, "weight": w} for n, w in resources],
            **({"shape": [{"utilization": u, "score": s} for u, s in shape]} if shape else {}),
        }
    )
    pod = model_pod(containers=list(pod_containers))
    infos = []
    for i, allocatable in enumerate(nodes):
        running = existing[i] if i < len(existing) else ()
        pods = [model_pod(containers=[container(**requests)]) for requests in running]
        infos.append(node_info(model_node(f"node{i + 1}", allocatable=dict(allocatable)), pods))
    return run_priority(priority, pod, infos)


TWO_CONTAINERS = [container(cpu="1000", memory="2000"), container(cpu="2000", memory="3000")]


@pytest.mark.parametrize(
    ("strategy", "resources", "pod", "nodes", "expected"),
    [
        pytest.param(
            "LeastAllocated",
            (("memory", 2), ("cpu", 1)),
            TWO_CONTAINERS,
            [{"cpu": "4000", "memory": "10000"}, {"cpu": "6000", "memory": "10000"}],
            [41, 50],
            id="1.32 table least: different weights on cpu and memory, differently sized nodes",
        ),
        pytest.param(
            "LeastAllocated",
            EXTENDED_RESOURCE_SET,
            TWO_CONTAINERS,
            [{"cpu": "6000", "memory": "10000"}, {"cpu": "6000", "memory": "10000", GPU: "4"}],
            [50, 50],
            id="1.32 table least: bypass extended resource if the pod does not request",
        ),
        pytest.param(
            "LeastAllocated",
            EXTENDED_RESOURCE_SET,
            [container(cpu="3000", memory="5000", extra={GPU: "2"})],
            [{"cpu": "6000", "memory": "10000", GPU: "4"}, {"cpu": "6000", "memory": "10000", GPU: "10"}],
            [50, 60],
            id="1.32 table least: honor extended resource if the pod requests",
        ),
        pytest.param(
            "LeastAllocated",
            ((GPU, 2), ("cpu", 1), ("memory", 1)),
            [container(cpu="3000", memory="4000")],
            [{"cpu": "6000", "memory": "10000"}, {"cpu": "6000", "memory": "10000", GPU: "4"}],
            [55, 55],
            id="1.32 table least: if the node doesn't have a resource",
        ),
        pytest.param(
            "MostAllocated",
            (("memory", 2), ("cpu", 1)),
            TWO_CONTAINERS,
            [{"cpu": "4000", "memory": "10000"}, {"cpu": "6000", "memory": "10000"}],
            [58, 50],
            id="1.32 table most: different weights on cpu and memory",
        ),
        pytest.param(
            "MostAllocated",
            EXTENDED_RESOURCE_SET,
            [container(cpu="3000", memory="5000", extra={GPU: "2"})],
            [{"cpu": "6000", "memory": "10000", GPU: "4"}, {"cpu": "6000", "memory": "10000", GPU: "10"}],
            [50, 40],
            id="1.32 table most: honor extended resource if the pod requests",
        ),
        pytest.param(
            "MostAllocated",
            ((GPU, 2), ("cpu", 1), ("memory", 1)),
            [container(cpu="3000", memory="4000")],
            [{"cpu": "6000", "memory": "10000"}, {"cpu": "6000", "memory": "10000", GPU: "4"}],
            [45, 45],
            id="1.32 table most: if the node doesn't have a resource",
        ),
    ],
)
def test_weighted_scores_match_1_32(
    strategy: str,
    resources: Sequence[tuple[str, int]],
    pod: Sequence[dict[str, Any]],
    nodes: Sequence[Mapping[str, str]],
    expected: list[int],
) -> None:
    assert score(strategy, resources, pod, nodes) == expected


def test_most_allocated_counts_requests_beyond_capacity_as_full() -> None:
    """1.32 table most: "no resources requested, pods scheduled, nonzero request for resource":
    three pods at the non-zero defaults (100m, 200Mi) on 250m: cpu 100, not 0 as 1.20 had it."""
    nodes = [{"cpu": "250m", "memory": "1000Mi"}, {"cpu": "250m", "memory": "1000Mi"}]
    assert score("MostAllocated", (("cpu", 1), ("memory", 1)), [container()], nodes, [[{}, {}]]) == [80, 30]


@pytest.mark.parametrize(
    ("resources", "pod", "nodes", "expected"),
    [
        pytest.param(
            (("cpu", 1), ("memory", 1), (GPU, 3)),
            [container(cpu="3000", memory="5000", extra={GPU: "2"})],
            [{"cpu": "6000", "memory": "10000", GPU: "4"}, {"cpu": "6000", "memory": "10000", GPU: "10"}],
            # node1: (50 + 50 + 3 * 50) / 5 = 50; node2: (50 + 50 + 3 * 20) / 5 = 32
            [50, 32],
            id="bin packing weighs the gpu",
        ),
        pytest.param(
            (("cpu", 1), ("memory", 1)),
            [container(cpu="100m", memory="5000")],
            [{"cpu": "1000000", "memory": "10000"}],
            # cpu utilization 0 scores 0 and is left out: 50, not (0 + 50) / 2
            [50],
            id="zero scores are left out of the average",
        ),
        pytest.param(
            (("cpu", 1), (GPU, 2)),
            [container(cpu="3000", extra={GPU: "1"})],
            [{"cpu": "6000", "memory": "10000", GPU: "4"}],
            # (50 + 2 * 25) / 3 = 33.3 -> 33 (math.Round)
            [33],
            id="rounded to the nearest",
        ),
    ],
)
def test_requested_to_capacity_ratio_with_extended_resources(
    resources: Sequence[tuple[str, int]],
    pod: Sequence[dict[str, Any]],
    nodes: Sequence[Mapping[str, str]],
    expected: list[int],
) -> None:
    shape = ((0, 0), (100, 10))
    assert score("RequestedToCapacityRatio", resources, pod, nodes, shape=shape) == expected


@pytest.mark.parametrize(
    ("spec", "field"),
    [
        (
            {"weight": 1, "type": "LeastAllocated", "resources": [{"name": "memory", "weight": -1}]},
            "resources[0].weight",
        ),
        (
            {"weight": 1, "type": "LeastAllocated", "resources": [{"name": "cpu", "weight": 0}]},
            "resources[0].weight",
        ),
        (
            {"weight": 1, "type": "MostAllocated", "resources": [{"name": "memory", "weight": 101}]},
            "resources[0].weight",
        ),
        ({"weight": 1, "type": "MostAllocated", "resources": []}, "resources"),
        ({"weight": 1, "type": "RequestedToCapacityRatio"}, "shape"),
        ({"weight": 1, "type": "LeastAllocated", "shape": [{"utilization": 0, "score": 0}]}, "shape"),
        ({"weight": 1, "type": "Balanced"}, "type"),
        ({"weight": 0, "type": "LeastAllocated"}, "weight"),
        ({"weight": 1, "type": "LeastAllocated", "resource": []}, "resource"),
    ],
)
def test_node_resources_scoring_is_validated(spec: dict[str, Any], field: str) -> None:
    """Weights outside [1, 100] as in least_allocated_test.go's and most_allocated_test.go's error rows."""
    with pytest.raises(PolicyError) as caught:
        compile_spec({"nodeResourcesScoring": spec}, "k")
    assert caught.value.field == f"spec.nodeResourcesScoring.{field}"
