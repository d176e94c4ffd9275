"""The registry of legacy names and the traits the predicates declare: which reasons preemption
treats as UnschedulableAndUnresolvable (1.20's statuses, 1.17's unresolvablePredicateFailureErrors
for the older names), which predicates it re-runs per candidate node, and which cluster events
move unschedulable pods back to the active queue."""

from __future__ import annotations

import pytest

from kubesched.algorithm import preemption
from kubesched.model.objects import Taint
from kubesched.plugins import registry
from kubesched.plugins.framework import Predicate
from kubesched.plugins.inter_pod_affinity import (
    ERR_REASON_AFFINITY_NOT_MATCH,
    ERR_REASON_AFFINITY_RULES_NOT_MATCH,
    ERR_REASON_ANTI_AFFINITY_RULES_NOT_MATCH,
    ERR_REASON_EXISTING_ANTI_AFFINITY_RULES_NOT_MATCH,
    MatchInterPodAffinity,
)
from kubesched.plugins.node_affinity import ERR_REASON_NODE_AFFINITY, MatchNodeSelector
from kubesched.plugins.node_conditions import (
    ERR_REASON_DISK_PRESSURE,
    ERR_REASON_MEMORY_PRESSURE,
    ERR_REASON_NETWORK_UNAVAILABLE,
    ERR_REASON_NOT_READY,
    ERR_REASON_PID_PRESSURE,
    CheckNodeCondition,
    CheckNodeDiskPressure,
    CheckNodeMemoryPressure,
    CheckNodePIDPressure,
)
from kubesched.plugins.node_label import ERR_REASON_PRESENCE_VIOLATED, CheckNodeLabelPresence
from kubesched.plugins.node_name import ERR_REASON_HOSTNAME, HostName
from kubesched.plugins.node_ports import ERR_REASON_PORTS
from kubesched.plugins.node_resources import ERR_REASON_CPU, ERR_REASON_TOO_MANY_PODS
from kubesched.plugins.node_unschedulable import ERR_REASON_UNSCHEDULABLE, CheckNodeUnschedulable
from kubesched.plugins.node_validity import ERR_REASON_INVALID_NODE, ValidNode
from kubesched.plugins.node_volume_limits import ERR_REASON_MAX_VOLUME_COUNT_EXCEEDED
from kubesched.plugins.pod_topology_spread import (
    ERR_REASON_CONSTRAINTS_NOT_MATCH,
    ERR_REASON_NODE_LABEL_NOT_MATCH,
    EvenPodsSpread,
)
from kubesched.plugins.service_affinity import ERR_REASON_SERVICE_AFFINITY
from kubesched.plugins.taint_toleration import (
    ERR_REASON_NOT_MATCH_1_17,
    PodToleratesNodeNoExecuteTaints,
    PodToleratesNodeTaints,
    err_reason_untolerated,
)
from kubesched.plugins.volume_binding import (
    ERR_REASON_BIND_CONFLICT,
    ERR_REASON_NODE_CONFLICT,
    ERR_REASON_NOT_ENOUGH_SPACE,
    ERR_REASON_PV_NOT_EXIST,
    ERR_REASON_UNBOUND_IMMEDIATE,
    CheckVolumeBinding,
)
from kubesched.plugins.volume_restrictions import (
    ERR_REASON_DISK_CONFLICT,
    ERR_REASON_READ_WRITE_ONCE_POD_CONFLICT,
)
from kubesched.plugins.volume_zone import ERR_REASON_VOLUME_ZONE, NoVolumeZoneConflict

UNTOLERATED = err_reason_untolerated(Taint("dedicated", "gpu", "NoSchedule"))

# Each predicate and the reasons it declares beyond an eviction's reach.
UNRESOLVABLE: list[tuple[type[Predicate], tuple[str, ...]]] = [
    (ValidNode, (ERR_REASON_INVALID_NODE,)),
    (MatchNodeSelector, (ERR_REASON_NODE_AFFINITY,)),
    (HostName, (ERR_REASON_HOSTNAME,)),
    (CheckNodeUnschedulable, (ERR_REASON_UNSCHEDULABLE,)),
    (PodToleratesNodeTaints, (UNTOLERATED, err_reason_untolerated(Taint("k", "", "NoExecute")))),
    (PodToleratesNodeNoExecuteTaints, (ERR_REASON_NOT_MATCH_1_17,)),
    (CheckNodeLabelPresence, (ERR_REASON_PRESENCE_VIOLATED,)),
    (EvenPodsSpread, (ERR_REASON_NODE_LABEL_NOT_MATCH,)),
    (MatchInterPodAffinity, (ERR_REASON_AFFINITY_RULES_NOT_MATCH,)),
    (NoVolumeZoneConflict, (ERR_REASON_VOLUME_ZONE,)),
    (
        CheckVolumeBinding,
        (
            ERR_REASON_BIND_CONFLICT,
            ERR_REASON_NODE_CONFLICT,
            ERR_REASON_NOT_ENOUGH_SPACE,
            ERR_REASON_PV_NOT_EXIST,
            ERR_REASON_UNBOUND_IMMEDIATE,
        ),
    ),
    (CheckNodeCondition, (ERR_REASON_NOT_READY, ERR_REASON_NETWORK_UNAVAILABLE, ERR_REASON_UNSCHEDULABLE)),
    (CheckNodeMemoryPressure, (ERR_REASON_MEMORY_PRESSURE,)),
    (CheckNodeDiskPressure, (ERR_REASON_DISK_PRESSURE,)),
    (CheckNodePIDPressure, (ERR_REASON_PID_PRESSURE,)),
]

# The reasons preemption listed itself before the predicates declared them.
UNRESOLVABLE_BEFORE = frozenset(
    {
        ERR_REASON_NODE_AFFINITY,
        ERR_REASON_HOSTNAME,
        ERR_REASON_NOT_MATCH_1_17,
        ERR_REASON_INVALID_NODE,
        ERR_REASON_NODE_LABEL_NOT_MATCH,
        ERR_REASON_VOLUME_ZONE,
        ERR_REASON_AFFINITY_RULES_NOT_MATCH,
        ERR_REASON_PRESENCE_VIOLATED,
        ERR_REASON_UNSCHEDULABLE,
        ERR_REASON_NOT_READY,
        ERR_REASON_NETWORK_UNAVAILABLE,
        ERR_REASON_MEMORY_PRESSURE,
        ERR_REASON_DISK_PRESSURE,
        ERR_REASON_PID_PRESSURE,
        ERR_REASON_BIND_CONFLICT,
        ERR_REASON_NODE_CONFLICT,
        ERR_REASON_NOT_ENOUGH_SPACE,
        ERR_REASON_PV_NOT_EXIST,
        ERR_REASON_UNBOUND_IMMEDIATE,
    }
)

RESOLVABLE = [
    ERR_REASON_CPU,
    ERR_REASON_TOO_MANY_PODS,
    ERR_REASON_PORTS,
    ERR_REASON_DISK_CONFLICT,
    ERR_REASON_READ_WRITE_ONCE_POD_CONFLICT,
    ERR_REASON_SERVICE_AFFINITY,
    ERR_REASON_AFFINITY_NOT_MATCH,
    ERR_REASON_ANTI_AFFINITY_RULES_NOT_MATCH,
    ERR_REASON_EXISTING_ANTI_AFFINITY_RULES_NOT_MATCH,
    ERR_REASON_CONSTRAINTS_NOT_MATCH,
    ERR_REASON_MAX_VOLUME_COUNT_EXCEEDED,
    "node(s) had taint {dedicated: gpu}",  # half the pattern
    "node(s) were filtered out by an extender",
]


@pytest.mark.parametrize(("predicate", "reasons"), UNRESOLVABLE, ids=[p.name for p, _ in UNRESOLVABLE])
def test_each_predicate_declares_its_unresolvable_reasons(
    predicate: type[Predicate], reasons: tuple[str, ...]
) -> None:
    for reason in reasons:
        assert predicate.is_unresolvable(reason)
        assert registry.is_unresolvable(reason)
        assert preemption.is_unresolvable([ERR_REASON_CPU, reason])
    assert not predicate.is_unresolvable(ERR_REASON_CPU)


@pytest.mark.parametrize("reason", sorted(UNRESOLVABLE_BEFORE))
def test_every_reason_preemption_knew_is_still_unresolvable(reason: str) -> None:
    assert registry.is_unresolvable(reason)


def test_the_declared_reasons_are_exactly_those_preemption_knew() -> None:
    declared = frozenset().union(*(cls.unresolvable_reasons for cls in registry.PREDICATE_CLASSES))
    assert declared == UNRESOLVABLE_BEFORE


@pytest.mark.parametrize("reason", RESOLVABLE)
def test_other_reasons_leave_room_for_preemption(reason: str) -> None:
    assert not registry.is_unresolvable(reason)
    assert not preemption.is_unresolvable([reason, ERR_REASON_CPU])


def test_pod_dependent_predicates() -> None:
    pod_dependent = {cls.name for cls in registry.PREDICATE_CLASSES if cls.pod_dependent}
    assert {"MatchInterPodAffinity", "EvenPodsSpread", "CheckServiceAffinity"} == pod_dependent


def test_requeue_kinds() -> None:
    assert {
        "PersistentVolume",
        "PersistentVolumeClaim",
        "Service",
        "StorageClass",
        "CSINode",
        "CSIDriver",
        "CSIStorageCapacity",
    } == registry.REQUEUE_KINDS


def test_a_predicate_is_registered_under_its_own_name() -> None:
    names = {cls.name for cls in registry.PREDICATE_CLASSES}
    assert len(names) == len(registry.PREDICATE_CLASSES)
    for name, factory in registry.PREDICATES.items():
        if name != "GeneralPredicates":
            assert [cls.name for cls in factory.classes] == [name]


def test_argument_keys_come_from_the_declarations() -> None:
    """By key, whatever order the plugins were imported in."""
    assert list(registry.PREDICATE_ARGUMENTS.items()) == [
        ("labelsPresence", "CheckNodeLabelPresence"),
        ("serviceAffinity", "CheckServiceAffinity"),
    ]
    assert list(registry.PRIORITY_ARGUMENTS.items()) == [
        ("labelPreference", "NodeLabel"),
        ("requestedToCapacityRatioArguments", "RequestedToCapacityRatioPriority"),
        ("serviceAntiAffinity", "ServiceAntiAffinity"),
    ]


def test_every_predicate_name_has_its_place_in_the_order() -> None:
    assert set(registry.PREDICATE_ORDERING) == set(registry.PREDICATES)
    assert set(registry.DEFAULT_PREDICATES) == registry.DEFAULT_PREDICATES_1_20


# The tables as they were written by hand before the plugins declared themselves: 1.20's
# predicateOrdering and 1.16's, legacy_registry.go's defaults, aliases and mandatory predicates.
ORDERING_1_20 = [
    "CheckNodeUnschedulable",
    "GeneralPredicates",
    "HostName",
    "PodFitsHostPorts",
    "MatchNodeSelector",
    "PodFitsResources",
    "NoDiskConflict",
    "PodToleratesNodeTaints",
    "CheckNodeLabelPresence",
    "CheckServiceAffinity",
    "MaxEBSVolumeCount",
    "MaxGCEPDVolumeCount",
    "MaxCSIVolumeCountPred",
    "MaxAzureDiskVolumeCount",
    "MaxCinderVolumeCount",
    "CheckVolumeBinding",
    "NoVolumeZoneConflict",
    "EvenPodsSpread",
    "MatchInterPodAffinity",
]
ORDERING_1_16 = [
    "CheckNodeCondition",
    *ORDERING_1_20[:8],
    "PodToleratesNodeNoExecuteTaints",
    *ORDERING_1_20[8:17],
    "CheckNodeMemoryPressure",
    "CheckNodePIDPressure",
    "CheckNodeDiskPressure",
    *ORDERING_1_20[17:],
]


def test_the_declared_order_is_kube_schedulers() -> None:
    assert registry.PREDICATE_ORDERING == ORDERING_1_16
    assert registry.PREDICATE_ORDERING_1_20 == ORDERING_1_20
    assert registry.PREDICATE_ORDERING_BEFORE_1_20 == [
        "CheckNodeCondition",
        "PodToleratesNodeNoExecuteTaints",
        "CheckNodeMemoryPressure",
        "CheckNodePIDPressure",
        "CheckNodeDiskPressure",
    ]
    assert list(registry.PREDICATES) == ORDERING_1_16
    assert registry.MANDATORY_PREDICATES == ["CheckNodeUnschedulable", "PodToleratesNodeTaints"]


def test_the_declared_defaults_are_those_of_1_20() -> None:
    assert registry.DEFAULT_PREDICATES == [
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
    ]
    assert list(registry.DEFAULT_PRIORITIES.items()) == [
        ("BalancedResourceAllocation", 1),
        ("EvenPodsSpreadPriority", 2),
        ("ImageLocalityPriority", 1),
        ("InterPodAffinityPriority", 1),
        ("LeastRequestedPriority", 1),
        ("NodeAffinityPriority", 1),
        ("NodePreferAvoidPodsPriority", 10000),
        ("SelectorSpreadPriority", 1),
        ("TaintTolerationPriority", 1),
    ]


def test_the_declared_aliases() -> None:
    assert registry.PREDICATE_ALIASES == {"PodFitsPorts": "PodFitsHostPorts"}
    assert registry.PRIORITY_ALIASES == {
        "ServiceSpreadingPriority": "SelectorSpreadPriority",
        "ServiceAffinity": "ServiceAntiAffinity",
        "RequestedToCapacityRatio": "RequestedToCapacityRatioPriority",
    }


def test_the_declared_framework_plugins() -> None:
    assert registry.FRAMEWORK_FILTERS == {
        "NodeUnschedulable": "CheckNodeUnschedulable",
        "NodeName": "HostName",
        "TaintToleration": "PodToleratesNodeTaints",
        "NodeAffinity": "MatchNodeSelector",
        "NodePorts": "PodFitsHostPorts",
        "NodeResourcesFit": "PodFitsResources",
        "VolumeRestrictions": "NoDiskConflict",
        "EBSLimits": "MaxEBSVolumeCount",
        "GCEPDLimits": "MaxGCEPDVolumeCount",
        "NodeVolumeLimits": "MaxCSIVolumeCountPred",
        "AzureDiskLimits": "MaxAzureDiskVolumeCount",
        "CinderLimits": "MaxCinderVolumeCount",
        "VolumeBinding": "CheckVolumeBinding",
        "VolumeZone": "NoVolumeZoneConflict",
        "PodTopologySpread": "EvenPodsSpread",
        "InterPodAffinity": "MatchInterPodAffinity",
    }
    assert registry.FRAMEWORK_SCORES == {
        "TaintToleration": "TaintTolerationPriority",
        "NodeAffinity": "NodeAffinityPriority",
        "NodeResourcesFit": "LeastRequestedPriority",
        "PodTopologySpread": "EvenPodsSpreadPriority",
        "InterPodAffinity": "InterPodAffinityPriority",
        "NodeResourcesBalancedAllocation": "BalancedResourceAllocation",
        "ImageLocality": "ImageLocalityPriority",
    }
    assert registry.MANDATORY_FRAMEWORK_FILTERS == ["NodeUnschedulable", "TaintToleration"]
