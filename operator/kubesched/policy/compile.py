"""Validate a legacy kube-scheduler Policy and compile it into an Algorithm.

The field names are those of kube-scheduler's Policy file (`predicates`, `priorities`,
`weight`, `argument`, `hardPodAffinitySymmetricWeight`, `alwaysCheckAllPredicates`,
`extenders`), plus `percentageOfNodesToScore` from its component config and
`nodeResourcesScoring`, 1.32's NodeResourcesFit scoring strategy with weighted resources, and
`quotas.borrowing` (ElasticQuota borrowing: Guarantees, the default, or Cluster). Either the whole
document (`kind: Policy`, `apiVersion: v1`) or just its body is accepted. Pure: files are read
by policy/files.py, extenders are called through the transport the caller passes.

As in 1.20: `predicates` absent means the default set, `[]` means the mandatory ones only
(CheckNodeUnschedulable and PodToleratesNodeTaints are always added); `priorities` absent means
the default priorities, `[]` none; filters run in kube-scheduler's fixed order whatever the
order in the policy; EqualPriority is accepted and ignored; weights must be positive. An entry
with an `argument` is a custom predicate or priority of any name, configured by the argument's
key (labelsPresence, serviceAffinity; labelPreference, serviceAntiAffinity,
requestedToCapacityRatioArguments); entries of one kind make one filter or priority, as 1.20
makes one plugin of them (NodeLabel and ServiceAntiAffinity priorities need equal weights and
weigh their sum; RequestedToCapacityRatio may appear once). SelectorSpreadPriority (alias
ServiceSpreadingPriority) and EvenPodsSpreadPriority are one PodTopologySpread priority weighted
by the larger weight, the former adding the system default constraints: 1.20's mapping with its
DefaultPodTopologySpread feature gate on, the default (`compile_policy(...,
default_pod_topology_spread=False)` gives the older SelectorSpread plugin instead).

Names 1.20 refuses but older releases had (CheckNodeCondition, CheckNodeMemoryPressure,
CheckNodeDiskPressure, CheckNodePIDPressure, PodToleratesNodeNoExecuteTaints,
ResourceLimitsPriority) are accepted with the semantics of the last release that had them.

Stricter than 1.20, so that a typo cannot silently change scheduling: unknown fields (in
arguments and extenders too), duplicate names (aliases included), an `argument` on a predicate or
priority that takes none, an argument-taking name without its argument, and empty label lists
are errors (1.20 ignores the first ones, drops such arguments, or crashes on the missing ones).
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

import yaml

from kubesched.algorithm.extenders import TransportFactory, ignored_resources
from kubesched.algorithm.generic import Algorithm, WeightedPriority
from kubesched.algorithm.quota_reclaim import ReclaimSettings
from kubesched.model.quota import BORROWING, GUARANTEES
from kubesched.model.shape import FieldError, array, boolean, is_int, known_fields, mapping, string
from kubesched.plugins import registry
from kubesched.plugins.framework import PluginSettings, Predicate, Priority
from kubesched.plugins.node_resources.scoring_strategy import NodeResourcesFitScore
from kubesched.plugins.node_volume_limits.filtering import KUBE_MAX_PD_VOLS
from kubesched.plugins.pod_topology_spread.filtering import parse_default_constraints
from kubesched.policy.extenders import build_extenders

POLICY_KIND: Final = "Policy"
POLICY_API_VERSIONS: Final = ("v1", "kubescheduler.config.k8s.io/v1")
# config.MaxWeight = MaxTotalScore / MaxCustomPriorityScore; weights must stay below it.
MAX_WEIGHT: Final = (2**63 - 1) // 10
DEFAULT_HARD_POD_AFFINITY_SYMMETRIC_WEIGHT: Final = 1
NODE_RESOURCES_SCORING: Final = "nodeResourcesScoring"
# PodTopologySpreadArgs.defaultConstraints with List defaulting: they replace the system defaults.
DEFAULT_CONSTRAINTS: Final = "podTopologySpreadDefaultConstraints"
QUOTAS: Final = "quotas"

_POLICY_FIELDS: Final = (
    "kind",
    "apiVersion",
    "predicates",
    "priorities",
    "extenders",
    "hardPodAffinitySymmetricWeight",
    "alwaysCheckAllPredicates",
    "percentageOfNodesToScore",
    NODE_RESOURCES_SCORING,
    DEFAULT_CONSTRAINTS,
    QUOTAS,
)
_PREDICATE_FIELDS: Final = ("name", "argument")
_PRIORITY_FIELDS: Final = ("name", "weight", "argument")


# An invalid policy: the shape kit's one error, under the name its callers catch; `field` is the
# path of the offending field, e.g. `predicates[2].name`.
PolicyError = FieldError


def _check_header(spec: Mapping[str, Any]) -> None:
    kind = spec.get("kind")
    if kind is not None and kind != POLICY_KIND:
        raise PolicyError("kind", f'must be "{POLICY_KIND}", got {kind!r}')
    api_version = spec.get("apiVersion")
    if api_version is not None and api_version not in POLICY_API_VERSIONS:
        allowed = ", ".join(POLICY_API_VERSIONS)
        raise PolicyError("apiVersion", f"must be one of {allowed}, got {api_version!r}")


def _name(entry: Any, path: str, accepted: tuple[str, ...]) -> str:
    entry = known_fields(mapping(entry, path, expected="an object with a name"), accepted, path)
    return string(entry.get("name"), f"{path}.name")


def _argument(entry: Mapping[str, Any], path: str) -> Mapping[str, Any] | None:
    argument = entry.get("argument")
    return None if argument is None else mapping(argument, f"{path}.argument")


def _accepted(names: list[str]) -> str:
    return ", ".join(sorted(names))


def _custom_argument(
    kind: str,
    given: str,
    name: str,
    argument: Mapping[str, Any],
    arguments: Mapping[str, str],
    registry: Mapping[str, Any],
    path: str,
) -> tuple[str, str, Any]:
    """Which registry entry an entry with an argument configures: (name, argument key, value).

    As in 1.20, exactly one argument must be set; a null one counts as unset.
    """
    for key in argument:
        if key not in arguments:
            raise PolicyError(
                f"{path}.argument.{key}", f"unknown field (accepted: {_accepted(list(arguments))})"
            )
    keys = [key for key, value in argument.items() if value is not None]
    if len(keys) != 1:
        raise PolicyError(
            f"{path}.argument",
            f"exactly 1 {kind} argument is required ({_accepted(list(arguments))}), got {len(keys)}",
        )
    key = keys[0]
    target = arguments[key]
    if name in registry and name != target:
        wanted = next((k for k, v in arguments.items() if v == name), None)
        message = f"takes argument {wanted}" if wanted else "takes no argument"
        raise PolicyError(f"{path}.argument", f'{kind} "{given}" {message}, got {key}')
    return target, key, argument[key]


def _argument_error(path: str, exc: FieldError) -> FieldError:
    """The factory's error, its field put under the entry's `argument`."""
    return exc.under(f"{path}.argument")


def _weight(entry: Mapping[str, Any], path: str, name: str) -> int:
    weight = entry.get("weight")
    if isinstance(weight, int) and not isinstance(weight, bool) and 0 < weight < MAX_WEIGHT:
        return weight
    message = f'priority "{name}" should have a positive integer weight below {MAX_WEIGHT}, got {weight!r}'
    raise PolicyError(f"{path}.weight", message)


@dataclass(frozen=True)
class _EntryList:
    """What a policy's `predicates` or `priorities` list accepts."""

    field: str  # "predicates" or "priorities"
    noun: str  # "predicate" or "priority"
    entry_fields: tuple[str, ...]
    factories: Mapping[str, Any]
    aliases: Mapping[str, str]
    arguments: Mapping[str, str]  # argument key -> the registry entry a custom entry configures
    skipped: frozenset[str] = frozenset()  # accepted and ignored (EqualPriority)
    weighted: bool = False


_PREDICATE_LIST: Final = _EntryList(
    "predicates",
    "predicate",
    _PREDICATE_FIELDS,
    registry.PREDICATES,
    registry.PREDICATE_ALIASES,
    registry.PREDICATE_ARGUMENTS,
)
_PRIORITY_LIST: Final = _EntryList(
    "priorities",
    "priority",
    _PRIORITY_FIELDS,
    registry.PRIORITIES,
    registry.PRIORITY_ALIASES,
    registry.PRIORITY_ARGUMENTS,
    registry.SKIPPED_PRIORITIES,
    weighted=True,
)


@dataclass(frozen=True)
class _Entry:
    """One validated entry of a `predicates` or `priorities` list."""

    index: int
    name: str  # the registry entry it configures
    shown: str  # the name it is known by: a custom entry's own name, else the registry's
    value: Any  # a custom entry's argument value, None for a plain one
    weight: int  # 0 for a predicate


def _parse_entries(raw: Any, kind: _EntryList) -> list[_Entry]:
    """Validate a `predicates` or `priorities` list entry by entry; raises PolicyError."""
    entries: list[_Entry] = []
    first_index: dict[str, int] = {}
    for i, entry in enumerate(array(raw, kind.field)):
        path = f"{kind.field}[{i}]"
        given = _name(entry, path, kind.entry_fields)
        argument = _argument(entry, path)
        name = kind.aliases.get(given, given)
        key: str | None = None
        value: Any = None
        if argument is not None:
            if name in kind.skipped:
                raise PolicyError(f"{path}.argument", f"this {kind.noun} takes no argument")
            name, key, value = _custom_argument(
                kind.noun, given, name, argument, kind.arguments, kind.factories, path
            )
        elif name not in kind.factories and name not in kind.skipped:
            custom = ", ".join(kind.arguments)
            known = [*kind.factories, *kind.aliases, *kind.skipped]
            raise PolicyError(
                f"{path}.name",
                f'unknown {kind.noun} "{given}" (accepted: {_accepted(known)}; '
                f"or any name with an argument: {custom})",
            )
        # An entry's own errors (its weight too) are reported before its being a duplicate.
        weight = _weight(entry, path, given) if kind.weighted else 0
        # A custom entry is known by the name the policy gives it.
        shown = given if key is not None else name
        if shown in first_index:
            earlier = f"{kind.field}[{first_index[shown]}]"
            raise PolicyError(f"{path}.name", f'duplicate {kind.noun} "{given}" (already given as {earlier})')
        first_index[shown] = i
        entries.append(_Entry(i, name, shown, value, weight))
    return entries


def _compile_predicates(raw: Any, settings: PluginSettings) -> tuple[tuple[Predicate, ...], tuple[str, ...]]:
    # registry name -> [(argument value, index in the policy's list)]
    chosen: dict[str, list[tuple[Any, int]]] = {}
    if raw is None:
        chosen = {name: [(None, -1)] for name in registry.DEFAULT_PREDICATES}
    else:
        for entry in _parse_entries(raw, _PREDICATE_LIST):
            chosen.setdefault(entry.name, []).append((entry.value, entry.index))
    for name in registry.MANDATORY_PREDICATES:
        chosen.setdefault(name, [(None, -1)])

    filters: list[Predicate] = []
    position: dict[str, int] = {}
    names = []
    # Filters run in the fixed order, names it does not order after them alphabetically (as
    # AppendPredicateConfigs does); one that two names enable (GeneralPredicates and
    # PodFitsResources, say) runs once, where it first appears; custom predicates of one kind
    # merge into one filter.
    unordered = sorted(set(chosen) - set(registry.PREDICATE_ORDERING))
    for name in [*registry.PREDICATE_ORDERING, *unordered]:
        if name not in chosen:
            continue
        names.append(name)
        for value, index in chosen[name]:
            path = f"predicates[{index}]"
            try:
                created = registry.PREDICATES[name](value, settings)
                for predicate in created:
                    if predicate.name in position:
                        at = position[predicate.name]
                        filters[at] = filters[at].merge(predicate)
                    else:
                        position[predicate.name] = len(filters)
                        filters.append(predicate)
            except FieldError as exc:
                raise _argument_error(path, exc) from exc
    return tuple(filters), tuple(names)


@dataclass
class _Group:
    """The policy entries that configure one priority plugin."""

    priority: Priority
    weights: list[int]
    names: list[str]
    first_path: str


def _combined_weight(group: _Group, path: str) -> int:
    rule = group.priority.weight_rule
    if rule == "max":
        return max(group.weights)
    if rule == "sum":
        # validateCustomPriorities: every entry of a custom priority type has the same weight.
        if len(set(group.weights)) > 1:
            raise PolicyError(
                f"{path}.weight",
                f'{group.priority.plugin} priority "{group.names[-1]}" has a different weight '
                f'with "{group.names[0]}" ({group.weights[-1]} != {group.weights[0]})',
            )
        return group.weights[0] * len(group.weights)
    return group.weights[0]


def _compile_priorities(
    raw: Any, settings: PluginSettings
) -> tuple[tuple[WeightedPriority, ...], tuple[str, ...], tuple[str, ...]]:
    # (registry name, argument value, weight, name shown, index)
    entries: list[tuple[str, Any, int, str, int]] = []
    skipped: list[str] = []
    if raw is None:
        entries = [(name, None, w, name, -1) for name, w in registry.DEFAULT_PRIORITIES.items()]
    else:
        for entry in _parse_entries(raw, _PRIORITY_LIST):
            if entry.name in registry.SKIPPED_PRIORITIES:
                skipped.append(entry.name)
                continue
            entries.append((entry.name, entry.value, entry.weight, entry.shown, entry.index))

    groups: dict[str, _Group] = {}
    for name, value, weight, shown, index in entries:
        path = f"priorities[{index}]"
        try:
            priority = registry.PRIORITIES[name](value, settings)
        except FieldError as exc:
            raise _argument_error(path, exc) from exc
        plugin = priority.plugin or priority.name
        group = groups.get(plugin)
        if group is None:
            groups[plugin] = _Group(priority, [weight], [shown], path)
            continue
        try:
            group.priority = group.priority.merge(priority)
        except FieldError as exc:
            message = f'priority "{shown}" {exc.message}, from: "{group.names[0]}"'
            raise PolicyError(f"{path}.argument", message) from exc
        group.weights.append(weight)
        group.names.append(shown)
        _combined_weight(group, path)  # reports unequal weights at the entry that breaks them

    weighted = [
        WeightedPriority(g.priority, _combined_weight(g, g.first_path), "+".join(sorted(g.names)))
        for g in groups.values()
    ]
    weighted.sort(key=lambda w: w.label)
    names = sorted([shown for *_, shown, _ in entries] + skipped)
    return tuple(weighted), tuple(names), tuple(sorted(skipped))


def _node_resources_scoring(raw: Any) -> WeightedPriority | None:
    """`nodeResourcesScoring` ({weight, type, resources, shape}) as a weighted priority; None when absent."""
    if raw is None:
        return None
    raw = mapping(raw, NODE_RESOURCES_SCORING)
    weight = _weight(raw, NODE_RESOURCES_SCORING, NodeResourcesFitScore.name)
    try:
        priority = NodeResourcesFitScore.from_argument({k: v for k, v in raw.items() if k != "weight"})
    except FieldError as exc:
        raise exc.under(NODE_RESOURCES_SCORING) from exc
    return WeightedPriority(priority, weight)


def _bounded_int(spec: Mapping[str, Any], field: str, low: int, high: int) -> int:
    value = spec.get(field)
    if value is None:
        return 0
    if not is_int(value) or not low <= value <= high:
        # kube-scheduler's own wording for these two fields
        raise PolicyError(field, f"not in valid range [{low}-{high}], got {value!r}")
    return int(value)


def _quotas(raw: Any) -> tuple[str, ReclaimSettings, bool]:
    """`quotas`: where an ElasticQuota past its min may borrow (algorithm/admission.py), what
    reclaim protects (algorithm/quota_reclaim.py), and whether borrowers wait in order of their
    share (`fairShare`, runtime/queue.py)."""
    quotas = known_fields(
        mapping(raw, QUOTAS, null_ok=True), ("borrowing", "protectMin", "fairShare"), QUOTAS
    )
    borrowing = quotas.get("borrowing")
    if borrowing is None:
        borrowing = GUARANTEES
    elif borrowing not in BORROWING:
        raise PolicyError(f"{QUOTAS}.borrowing", f"must be one of {', '.join(BORROWING)}, got {borrowing!r}")
    protect = quotas.get("protectMin")
    protect_min = False if protect is None else boolean(protect, f"{QUOTAS}.protectMin")
    fair = quotas.get("fairShare")
    fair_share = False if fair is None else boolean(fair, f"{QUOTAS}.fairShare")
    return str(borrowing), ReclaimSettings(protect_min=protect_min), fair_share


def _default_constraints(raw: Any) -> tuple[Mapping[str, Any], ...]:
    """The policy's podTopologySpreadDefaultConstraints, validated; raises PolicyError."""
    try:
        parse_default_constraints(raw)
    except FieldError as exc:
        raise exc.under(DEFAULT_CONSTRAINTS) from exc
    return tuple(raw or ())


def compile_policy(
    spec: Mapping[str, Any],
    *,
    default_pod_topology_spread: bool = True,
    transport: TransportFactory | None = None,
) -> Algorithm:
    """Validate a legacy Policy (document or body) and build its Algorithm; raises PolicyError.

    `default_pod_topology_spread` is kube-scheduler's DefaultPodTopologySpread feature gate (on in
    1.20): off, SelectorSpreadPriority runs as the older SelectorSpread plugin. `transport` makes
    the extenders' transports (kube.extender_transport.HTTPTransport); without one the extenders
    are validated but cannot be called.
    """
    if not isinstance(spec, Mapping):
        raise PolicyError("policy", f"must be an object, got {type(spec).__name__}")
    known_fields(spec, _POLICY_FIELDS)
    _check_header(spec)

    try:
        extenders = build_extenders(spec.get("extenders"), transport)
    except FieldError as exc:
        raise exc.under("extenders") from exc
    always_check_all = spec.get("alwaysCheckAllPredicates")
    always_check_all = (
        False if always_check_all is None else boolean(always_check_all, "alwaysCheckAllPredicates")
    )

    # 0 (or absent) means "not set" in 1.20, which then uses the default of 1.
    hard_weight = _bounded_int(spec, "hardPodAffinitySymmetricWeight", 0, 100)
    percentage = _bounded_int(spec, "percentageOfNodesToScore", 0, 100)
    borrowing, reclaim, fair_share = _quotas(spec.get(QUOTAS))
    settings = PluginSettings(
        hard_pod_affinity_symmetric_weight=hard_weight or DEFAULT_HARD_POD_AFFINITY_SYMMETRIC_WEIGHT,
        default_pod_topology_spread=default_pod_topology_spread,
        ignored_resources=ignored_resources(extenders),
        max_pd_volumes=max_volumes_from_env(),
        default_constraints=_default_constraints(spec.get(DEFAULT_CONSTRAINTS)),
    )

    filters, predicate_names = _compile_predicates(spec.get("predicates"), settings)
    weighted, priority_names, ignored = _compile_priorities(spec.get("priorities"), settings)
    fit_score = _node_resources_scoring(spec.get(NODE_RESOURCES_SCORING))
    if fit_score is not None:
        # One more priority beside the listed ones, in the same label order.
        weighted = tuple(sorted((*weighted, fit_score), key=lambda w: w.label))
        priority_names = tuple(sorted((*priority_names, fit_score.label)))
    return Algorithm(
        predicates=filters,
        priorities=weighted,
        always_check_all_predicates=bool(always_check_all),
        hard_pod_affinity_symmetric_weight=settings.hard_pod_affinity_symmetric_weight,
        percentage_of_nodes_to_score=percentage,
        predicate_names=predicate_names,
        priority_names=priority_names,
        extenders=extenders,
        ignored_priority_names=ignored,
        quota_borrowing=borrowing,
        quota_reclaim=reclaim,
        quota_fair_share=fair_share,
    )


def default_algorithm(*, default_pod_topology_spread: bool = True) -> Algorithm:
    """kube-scheduler 1.20's default predicates and priorities (its legacy default provider)."""
    return compile_policy({}, default_pod_topology_spread=default_pod_topology_spread)


def parse_policy_text(text: str, source: str) -> dict[str, Any]:
    """A Policy document from the text of a file named `source` (JSON if it ends in .json, else
    YAML); raises PolicyError naming `source` when it is not a Policy."""
    try:
        # YAML is (nearly) a superset of JSON, so YAML also reads JSON under any other name.
        document = json.loads(text) if source.endswith(".json") else yaml.safe_load(text)
    except (json.JSONDecodeError, yaml.YAMLError) as exc:
        kind = "JSON" if source.endswith(".json") else "YAML"
        raise PolicyError(source, f"not valid {kind}: {exc}") from exc
    if not isinstance(document, dict):
        raise PolicyError(source, f"a policy file must hold an object, got {type(document).__name__}")
    try:
        _check_header(document)
    except PolicyError as exc:
        message = exc.message
        if document.get("kind") == "KubeSchedulerConfiguration":
            message += " (kubesched policy convert turns it into SchedulerPolicies)"
        raise PolicyError(f"{source}: {exc.field}", message) from exc
    return document


def max_volumes_from_env() -> int:
    """getMaxVolLimitFromEnv: a positive $KUBE_MAX_PD_VOLS, else -1 (the process environment is
    read here, where a policy is compiled, so that the plugins stay pure)."""
    raw = os.environ.get(KUBE_MAX_PD_VOLS, "")
    try:
        value = int(raw)
    except ValueError:
        return -1
    return value if value > 0 else -1
