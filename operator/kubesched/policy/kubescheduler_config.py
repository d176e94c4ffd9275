"""A kube-scheduler KubeSchedulerConfiguration (`kubescheduler.config.k8s.io/v1`, or v1beta3) as
SchedulerPolicy specs, one per profile, keyed by the profile's schedulerName.

Pure: the caller reads the file and writes the manifests. The profile's plugins are resolved as
kube-scheduler 1.32 does (pkg/scheduler/apis/config/v1/default_plugins.go mergePluginSet, and the
framework's MultiPoint expansion): the default MultiPoint set, less what `disabled` names (`*` for
all), plus what `enabled` adds or reconfigures; a plugin enabled at `filter` or `score` itself
overrides its MultiPoint entry there, and a `disabled` there removes it from that point only.
Filters and scores then map to legacy predicates and priorities; NodeResourcesFit's
`scoringStrategy` becomes LeastRequestedPriority when it is the default one (LeastAllocated, cpu and
memory weighing 1) and the policy's `nodeResourcesScoring` otherwise; PodTopologySpread's System
defaulting becomes EvenPodsSpreadPriority with SelectorSpreadPriority (kubesched's PodTopologySpread
with the system default constraints), List defaulting `podTopologySpreadDefaultConstraints`.

Nothing is dropped silently: whatever has no SchedulerPolicy equivalent (an out-of-tree plugin,
arguments kubesched has no knob for, process settings such as leader election or backoff, which
are `kubesched run` flags) becomes an `Unconverted` entry naming the field and what to do instead,
once per plugin however many extension points name it. scheduler-plugins' Coscheduling is built in
(PodGroups), its permitWaitingTimeSeconds a PodGroup's scheduleTimeoutSeconds.
A document kube-scheduler itself would refuse (wrong kind or version, malformed plugin lists, two
profiles with one schedulerName) raises PolicyError.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

import yaml

from kubesched.model.resources import CPU, MEMORY
from kubesched.model.shape import array, integer, mapping, string
from kubesched.plugins import registry
from kubesched.plugins.node_resources.scoring_strategy import (
    LEAST_ALLOCATED,
    REQUESTED_TO_CAPACITY_RATIO,
    STRATEGIES,
)
from kubesched.policy.compile import DEFAULT_CONSTRAINTS, NODE_RESOURCES_SCORING, PolicyError
from kubesched.policy.store import policy_manifest

KIND: Final = "KubeSchedulerConfiguration"
API_V1: Final = "kubescheduler.config.k8s.io/v1"
API_V1BETA3: Final = "kubescheduler.config.k8s.io/v1beta3"
API_VERSIONS: Final = (API_V1, API_V1BETA3)
DEFAULT_SCHEDULER_NAME: Final = "default-scheduler"
UNCONVERTED_ANNOTATION: Final = "kubesched.io/unconverted"

# default_plugins.go getDefaultPlugins (1.32): the MultiPoint set with its weights (None: none given).
_DEFAULT_PLUGINS: Final[tuple[tuple[str, int | None], ...]] = (
    ("SchedulingGates", None),
    ("PrioritySort", None),
    ("NodeUnschedulable", None),
    ("NodeName", None),
    ("TaintToleration", 3),
    ("NodeAffinity", 2),
    ("NodePorts", None),
    ("NodeResourcesFit", 1),
    ("VolumeRestrictions", None),
    ("NodeVolumeLimits", None),
    ("VolumeBinding", None),
    ("VolumeZone", None),
    ("PodTopologySpread", 2),
    ("InterPodAffinity", 2),
    ("DefaultPreemption", None),
    ("NodeResourcesBalancedAllocation", 1),
    ("ImageLocality", 1),
    ("DefaultBinder", None),
)
# v1beta3 (served until 1.28) still had the in-tree volume limits, gone from the defaults in 1.31.
_V1BETA3_VOLUME_LIMITS: Final[tuple[tuple[str, int | None], ...]] = (
    ("EBSLimits", None),
    ("GCEPDLimits", None),
    ("NodeVolumeLimits", None),
    ("AzureDiskLimits", None),
)
_AT: Final = [name for name, _ in _DEFAULT_PLUGINS].index("NodeVolumeLimits")
_DEFAULT_PLUGINS_V1BETA3: Final = (
    *_DEFAULT_PLUGINS[:_AT],
    *_V1BETA3_VOLUME_LIMITS,
    *_DEFAULT_PLUGINS[_AT + 1 :],
)

# The kube-scheduler plugins whose filter or score is a legacy predicate or priority, as the
# plugins declare them (plugins/declare.py): plugin name -> legacy name. NodeResourcesFit and
# PodTopologySpread scores are mapped by their arguments (_node_resources_fit, _pod_topology_spread).
FILTERS: Final[Mapping[str, str]] = registry.FRAMEWORK_FILTERS
SCORES: Final[Mapping[str, str]] = registry.FRAMEWORK_SCORES
# What kubesched always does itself (queue order, gates, preemption, binding).
BUILT_IN: Final = frozenset({"SchedulingGates", "PrioritySort", "DefaultPreemption", "DefaultBinder"})
# Plugins kubesched knows and has no SchedulerPolicy entry for: kube-scheduler 1.32's and
# scheduler-plugins' (named once per profile, however many extension points name them).
_NO_EQUIVALENT: Final[Mapping[str, str]] = {
    "DynamicResources": "kubesched refuses pods with resourceClaims and says so in their events",
    "Coscheduling": (
        "PodGroups are built into kubesched: every profile places a group's members all or nothing"
    ),
    "CapacityScheduling": (
        "ElasticQuotas are built into kubesched: every profile admits and reclaims by them "
        "(SchedulerPolicy quotas)"
    ),
}
# How long a PodGroup without scheduleTimeoutSeconds waits before it may hold nodes
# (runtime/gangs.py DEFAULT_RESERVE_AFTER, which this layer may not import).
_GROUP_RESERVE_AFTER: Final = "30 s"
# The extension point of each built-in plugin.
_BUILT_IN_POINTS: Final[Mapping[str, str]] = {
    "preEnqueue": "SchedulingGates",
    "queueSort": "PrioritySort",
    "postFilter": "DefaultPreemption",
    "bind": "DefaultBinder",
}
_EXTENSION_POINTS: Final = (
    "preEnqueue",
    "queueSort",
    "preFilter",
    "filter",
    "postFilter",
    "preScore",
    "score",
    "reserve",
    "permit",
    "preBind",
    "bind",
    "postBind",
    "multiPoint",
)
# Top-level settings that are `kubesched run` flags or have no counterpart: field -> what to do.
_PROCESS_SETTINGS: Final[Mapping[str, tuple[str, str]]] = {
    "parallelism": ("the scoring parallelism", "kubesched scores in one process; nothing to set"),
    "leaderElection": ("leader election", "use kubesched run's --leader-elect* flags"),
    "clientConnection": (
        "the client connection",
        "use kubesched run's --kubeconfig, --kube-api-qps and --kube-api-burst",
    ),
    "healthzBindAddress": ("the healthz address", "kubesched serves /healthz on its --metrics-port"),
    "metricsBindAddress": ("the metrics address", "use kubesched run's --metrics-port"),
    "enableProfiling": ("profiling", "kubesched has no profiling endpoint"),
    "enableContentionProfiling": ("contention profiling", "kubesched has no profiling endpoint"),
    "podInitialBackoffSeconds": ("the initial pod backoff", "use kubesched run's --pod-initial-backoff"),
    "podMaxBackoffSeconds": ("the longest pod backoff", "use kubesched run's --pod-max-backoff"),
    "delayCacheUntilActive": ("delaying the cache", "kubesched followers always keep their caches warm"),
}
_TOP_LEVEL: Final = frozenset({"apiVersion", "kind", "profiles", "extenders", "percentageOfNodesToScore"})
_PROFILE_FIELDS: Final[Mapping[str, frozenset[str]]] = {
    API_V1: frozenset({"schedulerName", "plugins", "pluginConfig", "percentageOfNodesToScore"}),
    API_V1BETA3: frozenset({"schedulerName", "plugins", "pluginConfig"}),
}
_ARGS_HEADER: Final = ("apiVersion", "kind")


@dataclass(frozen=True, slots=True)
class Unconverted:
    """A setting with no SchedulerPolicy equivalent: where it is, what it is (one thing: the
    line says it "has" no equivalent), what to do instead."""

    path: str
    what: str
    instead: str

    def __str__(self) -> str:
        return f"{self.path}: {self.what} has no SchedulerPolicy equivalent ({self.instead})"


@dataclass(frozen=True, slots=True)
class ConvertedProfile:
    """One profile as a SchedulerPolicy spec, with what of it (and of the whole file) was not converted."""

    scheduler_name: str
    spec: dict[str, Any]
    unconverted: tuple[Unconverted, ...]


@dataclass(slots=True)
class _Profile:
    """The profile being converted and what it could not take."""

    unconverted: list[Unconverted] = field(default_factory=list)

    def report(self, path: str, what: str, instead: str) -> None:
        self.unconverted.append(Unconverted(path, what, instead))


def is_kubescheduler_configuration(document: Any) -> bool:
    """Whether a parsed document says it is a KubeSchedulerConfiguration."""
    return isinstance(document, Mapping) and document.get("kind") == KIND


def parse_configuration_text(text: str) -> dict[str, Any] | None:
    """The document in `text` if it is a KubeSchedulerConfiguration (YAML or JSON), else None."""
    try:
        document = yaml.safe_load(text)
    except yaml.YAMLError:
        return None
    return document if is_kubescheduler_configuration(document) else None


def _plugin_list(raw: Any, path: str) -> list[tuple[str, int | None]]:
    """A PluginSet's `enabled` or `disabled`: (name, weight or None) in order."""
    plugins: list[tuple[str, int | None]] = []
    for i, entry in enumerate(array(raw, path, null_ok=True)):
        entry = mapping(entry, f"{path}[{i}]", null_ok=True)
        name = string(entry.get("name"), f"{path}[{i}].name")
        weight = entry.get("weight")
        if weight is not None:
            weight = integer(weight, f"{path}[{i}].weight", 0, 2**31 - 1)
        plugins.append((name, weight or None))
    return plugins


@dataclass(frozen=True, slots=True)
class _PluginSet:
    enabled: list[tuple[str, int | None]]
    disabled: set[str]


def _plugin_set(plugins: Mapping[str, Any], point: str, path: str) -> _PluginSet:
    raw = mapping(plugins.get(point), f"{path}.{point}", null_ok=True)
    enabled = _plugin_list(raw.get("enabled"), f"{path}.{point}.enabled")
    disabled = {name for name, _ in _plugin_list(raw.get("disabled"), f"{path}.{point}.disabled")}
    return _PluginSet(enabled, disabled)


def _merge(defaults: Sequence[tuple[str, int | None]], custom: _PluginSet) -> list[tuple[str, int | None]]:
    """mergePluginSet: defaults less the disabled, reconfigured in place, then the other enabled ones."""
    enabled = dict(custom.enabled)
    merged: list[tuple[str, int | None]] = []
    if "*" not in custom.disabled:
        for name, weight in defaults:
            if name in custom.disabled:
                continue
            merged.append((name, enabled.pop(name)) if name in enabled else (name, weight))
    merged.extend((name, weight) for name, weight in custom.enabled if name in enabled)
    return merged


def _point(
    multi_point: Sequence[tuple[str, int | None]], own: _PluginSet, implements: Mapping[str, str]
) -> dict[str, int]:
    """The plugins one extension point runs, with their weights (1 when none is given)."""
    chosen: dict[str, int] = {}
    if "*" not in own.disabled:
        for name, weight in multi_point:
            if name in implements and name not in own.disabled:
                chosen.setdefault(name, weight or 1)
    for name, weight in own.enabled:
        chosen[name] = weight or 1  # a plugin named at the point itself overrides its MultiPoint entry
    return chosen


def _args(plugin_config: Any, path: str) -> dict[str, tuple[str, Mapping[str, Any]]]:
    """pluginConfig: plugin name -> (path of its args, args without apiVersion and kind)."""
    found: dict[str, tuple[str, Mapping[str, Any]]] = {}
    for i, entry in enumerate(array(plugin_config, path, null_ok=True)):
        entry = mapping(entry, f"{path}[{i}]", null_ok=True)
        name = string(entry.get("name"), f"{path}[{i}].name")
        if name in found:
            raise PolicyError(f"{path}[{i}].name", f"repeated config for plugin {name}")
        args = mapping(entry.get("args"), f"{path}[{i}].args", null_ok=True)
        found[name] = (f"{path}[{i}].args", {k: v for k, v in args.items() if k not in _ARGS_HEADER})
    return found


def _resources(raw: Any, path: str) -> list[dict[str, Any]]:
    resources: list[dict[str, Any]] = []
    for i, entry in enumerate(array(raw, path, null_ok=True)):
        entry = mapping(entry, f"{path}[{i}]", null_ok=True)
        name = string(entry.get("name"), f"{path}[{i}].name")
        resources.append(
            {"name": name, "weight": integer(entry.get("weight"), f"{path}[{i}].weight", 1, 100)}
        )
    return resources


_DEFAULT_RESOURCES: Final = [{"name": CPU, "weight": 1}, {"name": MEMORY, "weight": 1}]


def _node_resources_fit(
    args: tuple[str, Mapping[str, Any]] | None, weight: int | None, profile: _Profile
) -> tuple[dict[str, Any] | None, dict[str, Any] | None]:
    """NodeResourcesFitArgs: (the legacy priority entry, or the `nodeResourcesScoring` field)."""
    path, raw = args if args is not None else ("", {})
    for key, value in raw.items():
        if key in ("ignoredResources", "ignoredResourceGroups"):
            if value:
                profile.report(
                    f"{path}.{key}",
                    "ignoring resources in the fit check",
                    "an extender's managedResources with ignoredByScheduler: true does this",
                )
        elif key != "scoringStrategy":
            profile.report(f"{path}.{key}", "this NodeResourcesFit argument", "not converted")
    if weight is None:
        return None, None
    strategy = mapping(raw.get("scoringStrategy"), f"{path}.scoringStrategy", null_ok=True)
    kind = strategy.get("type") or LEAST_ALLOCATED
    if kind not in STRATEGIES:
        raise PolicyError(
            f"{path}.scoringStrategy.type", f"must be one of {', '.join(STRATEGIES)}, got {kind!r}"
        )
    resources = _resources(strategy.get("resources"), f"{path}.scoringStrategy.resources")
    resources = resources or list(_DEFAULT_RESOURCES)
    for key in strategy:
        if key not in ("type", "resources", "requestedToCapacityRatio"):
            profile.report(f"{path}.scoringStrategy.{key}", "this scoringStrategy field", "not converted")
    if kind == LEAST_ALLOCATED and resources == _DEFAULT_RESOURCES:
        return {"name": SCORES["NodeResourcesFit"], "weight": weight}, None
    scoring: dict[str, Any] = {"weight": weight, "type": kind, "resources": resources}
    if kind == REQUESTED_TO_CAPACITY_RATIO:
        ratio_path = f"{path}.scoringStrategy.requestedToCapacityRatio"
        ratio = mapping(strategy.get("requestedToCapacityRatio"), ratio_path, null_ok=True)
        scoring["shape"] = [
            dict(mapping(p, ratio_path, null_ok=True))
            for p in array(ratio.get("shape"), f"{ratio_path}.shape", null_ok=True)
        ]
    return None, scoring


def _pod_topology_spread(
    args: tuple[str, Mapping[str, Any]] | None, profile: _Profile
) -> tuple[bool, list[Any]]:
    """PodTopologySpreadArgs: (whether the system default constraints apply, the listed defaults)."""
    path, raw = args if args is not None else ("", {})
    for key in raw:
        if key not in ("defaultConstraints", "defaultingType"):
            profile.report(f"{path}.{key}", "this PodTopologySpread argument", "not converted")
    defaulting = raw.get("defaultingType") or "System"
    if defaulting not in ("System", "List"):
        raise PolicyError(f"{path}.defaultingType", f'must be "System" or "List", got {defaulting!r}')
    constraints = array(raw.get("defaultConstraints"), f"{path}.defaultConstraints", null_ok=True)
    if defaulting == "System" and constraints:
        raise PolicyError(f"{path}.defaultConstraints", 'must be empty for defaultingType "System"')
    return defaulting == "System", constraints


def _other_args(name: str, path: str, raw: Mapping[str, Any], profile: _Profile) -> None:
    if name == "NodeResourcesBalancedAllocation":
        resources = _resources(raw.get("resources"), f"{path}.resources")
        if resources and resources != _DEFAULT_RESOURCES:
            profile.report(
                f"{path}.resources",
                "BalancedAllocation over other resources than cpu and memory",
                "BalancedResourceAllocation balances cpu and memory",
            )
        return
    if name == "Coscheduling":
        _coscheduling_args(path, raw, profile)
    elif raw:
        profile.report(path, f"configuring {name}", "kubesched runs the plugin with its defaults")


def _coscheduling_args(path: str, raw: Mapping[str, Any], profile: _Profile) -> None:
    """CoschedulingArgs: a PodGroup's wait and backoff, which kubesched takes elsewhere."""
    for key, value in raw.items():
        if key == "permitWaitingTimeSeconds":
            profile.report(
                f"{path}.{key}",
                f"a {value} s wait for PodGroups without scheduleTimeoutSeconds",
                "kubesched uses each PodGroup's scheduleTimeoutSeconds: once it has passed, the group's "
                "status says ScheduleTimeout and, first in line, the group holds the nodes its members "
                f"fit on; a group without one holds them after {_GROUP_RESERVE_AFTER} and never times "
                "out; set scheduleTimeoutSeconds on the PodGroups",
            )
        elif key == "podGroupBackoffSeconds":
            profile.report(
                f"{path}.{key}",
                "a PodGroup backoff",
                "a group backs off as a pod does: use kubesched run's --pod-initial-backoff and "
                "--pod-max-backoff",
            )
        else:
            profile.report(f"{path}.{key}", "this Coscheduling argument", "not converted")


def _convert_profile(
    raw_profile: Any, index: int, version: str, global_percentage: Any
) -> tuple[str, dict[str, Any], list[Unconverted]]:
    path = f"profiles[{index}]"
    raw = mapping(raw_profile, path, null_ok=True)
    profile = _Profile()
    for key in raw:
        if key not in _PROFILE_FIELDS[version]:
            profile.report(f"{path}.{key}", f"a field unknown to {version}", "remove it")
    scheduler_name = raw.get("schedulerName") or DEFAULT_SCHEDULER_NAME
    if not isinstance(scheduler_name, str):
        raise PolicyError(f"{path}.schedulerName", f"must be a string, got {scheduler_name!r}")

    plugins_path = f"{path}.plugins"
    plugins = mapping(raw.get("plugins"), plugins_path, null_ok=True)
    for key in plugins:
        if key not in _EXTENSION_POINTS:
            profile.report(
                f"{plugins_path}.{key}", "an extension point unknown to kube-scheduler", "remove it"
            )
    defaults = _DEFAULT_PLUGINS if version == API_V1 else _DEFAULT_PLUGINS_V1BETA3
    multi_point = _merge(defaults, _plugin_set(plugins, "multiPoint", plugins_path))
    filter_set = _plugin_set(plugins, "filter", plugins_path)
    score_set = _plugin_set(plugins, "score", plugins_path)
    filters = _point(multi_point, filter_set, FILTERS)
    scores = _point(multi_point, score_set, SCORES)

    # Every plugin named anywhere must be one kubesched knows, or be reported (in the file's order).
    named: set[str] = set()
    for point in plugins:
        if point not in _EXTENSION_POINTS:
            continue
        for i, (name, _) in enumerate(_plugin_set(plugins, point, plugins_path).enabled):
            where = f"{plugins_path}.{point}.enabled[{i}]"
            _check_plugin(name, point, where, profile, named)
    # Built-in plugins cannot be turned off: say so when a profile goes without one.
    enabled_anywhere = {name for name, _ in multi_point}
    for point, name in _BUILT_IN_POINTS.items():
        own = _plugin_set(plugins, point, plugins_path)
        enabled_anywhere |= {n for n, _ in own.enabled}
        if name not in {n for n, _ in defaults}:
            continue
        if name == "PrioritySort" and "Coscheduling" in named:
            continue  # its queue order (priority, then the group's age) is kubesched's
        if name not in enabled_anywhere or name in own.disabled or "*" in own.disabled:
            profile.report(
                plugins_path,
                f"a profile without {name}",
                "kubesched always queues by priority, honours scheduling gates, preempts and binds",
            )
    for name in registry.MANDATORY_FRAMEWORK_FILTERS:
        if name not in filters:
            profile.report(
                f"{plugins_path}",
                f"a profile without the {name} filter",
                f"kubesched always runs {FILTERS[name]}, as 1.20 did",
            )

    args = _args(raw.get("pluginConfig"), f"{path}.pluginConfig")
    spec: dict[str, Any] = {"schedulerName": scheduler_name}
    spec["predicates"] = [{"name": FILTERS[name]} for name in filters if name in FILTERS]

    priorities: list[dict[str, Any]] = []
    fit_entry, scoring = _node_resources_fit(
        args.get("NodeResourcesFit"), scores.get("NodeResourcesFit"), profile
    )
    spread_uses = "PodTopologySpread" in filters or "PodTopologySpread" in scores
    system_defaults, constraints = _pod_topology_spread(args.get("PodTopologySpread"), profile)
    for name, weight in scores.items():
        if name not in SCORES:
            continue
        if name == "NodeResourcesFit":
            if fit_entry is not None:
                priorities.append(fit_entry)
            continue
        priorities.append({"name": SCORES[name], "weight": weight})
        if name == "PodTopologySpread" and system_defaults:
            # One PodTopologySpread priority with the system default constraints (compile.py).
            priorities.append({"name": "SelectorSpreadPriority", "weight": weight})
    spec["priorities"] = priorities
    if scoring is not None:
        spec[NODE_RESOURCES_SCORING] = scoring
    if spread_uses and constraints:
        spec[DEFAULT_CONSTRAINTS] = [dict(c) if isinstance(c, Mapping) else c for c in constraints]

    if "InterPodAffinity" in args:
        affinity_path, affinity = args["InterPodAffinity"]
        for key, value in affinity.items():
            if key == "hardPodAffinityWeight":
                spec["hardPodAffinitySymmetricWeight"] = integer(value, f"{affinity_path}.{key}", 0, 100)
            elif key == "ignorePreferredTermsOfExistingPods":
                if value:
                    profile.report(
                        f"{affinity_path}.{key}",
                        "ignoring existing pods' preferred terms",
                        "InterPodAffinityPriority always weighs them, as 1.20 did",
                    )
            else:
                profile.report(f"{affinity_path}.{key}", "this InterPodAffinity argument", "not converted")
    for name, (args_path, raw_args) in args.items():
        if name not in ("NodeResourcesFit", "PodTopologySpread", "InterPodAffinity"):
            _other_args(name, args_path, raw_args, profile)

    percentage = raw.get("percentageOfNodesToScore") if version == API_V1 else None
    if percentage is None:
        percentage = global_percentage
        where = "percentageOfNodesToScore"
    else:
        where = f"{path}.percentageOfNodesToScore"
    if percentage is not None:
        spec["percentageOfNodesToScore"] = integer(percentage, where, 0, 100)
    return scheduler_name, spec, profile.unconverted


def _check_plugin(name: str, point: str, where: str, profile: _Profile, named: set[str]) -> None:
    """Report a plugin kubesched has no entry for where it is first `named`, once per profile."""
    if name in BUILT_IN:
        return
    if name in FILTERS or name in SCORES:
        if (point == "filter" and name not in FILTERS) or (point == "score" and name not in SCORES):
            profile.report(where, f"plugin {name} at {point}", f"{name} has no {point} in kube-scheduler")
        return
    if name in named:
        return
    named.add(name)
    if name in _NO_EQUIVALENT:
        profile.report(where, f"plugin {name}", _NO_EQUIVALENT[name])
    else:
        profile.report(
            where, f"plugin {name} (out-of-tree or unknown)", "kubesched runs in-tree plugins only"
        )


def convert_configuration(document: Mapping[str, Any]) -> tuple[list[ConvertedProfile], list[Unconverted]]:
    """Every profile of a KubeSchedulerConfiguration as a SchedulerPolicy spec, and everything not
    converted (the file's own settings first); raises PolicyError for a document kube-scheduler
    would refuse."""
    if document.get("kind") != KIND:
        raise PolicyError("kind", f'must be "{KIND}", got {document.get("kind")!r}')
    version = document.get("apiVersion")
    if version not in API_VERSIONS:
        raise PolicyError("apiVersion", f"must be one of {', '.join(API_VERSIONS)}, got {version!r}")
    common: list[Unconverted] = []
    for key in document:
        if key in _PROCESS_SETTINGS:
            common.append(Unconverted(key, *_PROCESS_SETTINGS[key]))
        elif key not in _TOP_LEVEL:
            common.append(Unconverted(key, f"a field unknown to {version}", "remove it"))
    global_percentage = document.get("percentageOfNodesToScore")
    if global_percentage is not None:
        integer(global_percentage, "percentageOfNodesToScore", 0, 100)
    # Extenders have the legacy Policy's shape (httpTimeout as a duration string is accepted too).
    extenders = [
        dict(mapping(e, f"extenders[{i}]", null_ok=True))
        for i, e in enumerate(array(document.get("extenders"), "extenders", null_ok=True))
    ]

    raw_profiles = array(document.get("profiles"), "profiles", null_ok=True) or [{}]
    converted: list[ConvertedProfile] = []
    every: list[Unconverted] = list(common)
    seen: dict[str, int] = {}
    for i, raw_profile in enumerate(raw_profiles):
        name, spec, unconverted = _convert_profile(raw_profile, i, version, global_percentage)
        if name in seen:
            raise PolicyError(
                f"profiles[{i}].schedulerName", f"duplicate profile {name!r} (also profiles[{seen[name]}])"
            )
        seen[name] = i
        if extenders:
            spec["extenders"] = [dict(e) for e in extenders]
        converted.append(ConvertedProfile(name, spec, (*common, *unconverted)))
        every.extend(unconverted)
    return converted, every


def configuration_manifests(
    profiles: Sequence[ConvertedProfile], name: str | None = None, scheduler_name: str | None = None
) -> list[dict[str, Any]]:
    """The SchedulerPolicy manifests of converted profiles, each named after its schedulerName (`name`
    and `scheduler_name` override them for a single profile), what was not converted in an annotation."""
    if len(profiles) > 1 and (name or scheduler_name):
        raise PolicyError("profiles", f"{len(profiles)} profiles: a name can be given to one profile only")
    manifests = []
    for profile in profiles:
        spec = dict(profile.spec)
        if scheduler_name:
            spec["schedulerName"] = scheduler_name
        manifest = policy_manifest(spec, name or spec["schedulerName"])
        if profile.unconverted:
            annotation = "\n".join(str(entry) for entry in profile.unconverted)
            manifest["metadata"]["annotations"] = {UNCONVERTED_ANNOTATION: annotation}
        manifests.append(manifest)
    return manifests
