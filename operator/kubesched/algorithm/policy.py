"""Validate a legacy kube-scheduler Policy and compile it into an Algorithm.

The field names are those of kube-scheduler's Policy file (`predicates`, `priorities`,
`weight`, `argument`, `hardPodAffinitySymmetricWeight`, `alwaysCheckAllPredicates`,
`extenders`), plus `percentageOfNodesToScore` from its component config. Either the whole
document (`kind: Policy`, `apiVersion: v1`) or just its body is accepted.

As in 1.20: `predicates` absent means the default set, `[]` means the mandatory ones only
(CheckNodeUnschedulable and PodToleratesNodeTaints are always added); `priorities` absent means
the default priorities, `[]` none; filters run in kube-scheduler's fixed order whatever the
order in the policy; EqualPriority is accepted and ignored; weights must be positive.

Stricter than 1.20, so that a typo cannot silently change scheduling: unknown fields, duplicate
names (aliases included) and an `argument` on a predicate or priority that takes none are
errors (1.20 ignores the first two and drops such arguments).

The default algorithm is the implemented subset of 1.20's defaults. Missing predicates:
MaxEBSVolumeCount, MaxGCEPDVolumeCount, MaxAzureDiskVolumeCount, MaxCSIVolumeCountPred,
MatchInterPodAffinity, CheckVolumeBinding, EvenPodsSpread. Missing priorities:
InterPodAffinityPriority, NodePreferAvoidPodsPriority, NodeAffinityPriority,
TaintTolerationPriority, ImageLocalityPriority, EvenPodsSpreadPriority.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Final

import yaml

from kubesched.algorithm import predicates as predicate_registry
from kubesched.algorithm import priorities as priority_registry
from kubesched.algorithm.framework import Predicate
from kubesched.algorithm.generic import Algorithm, WeightedPriority

POLICY_KIND: Final = "Policy"
POLICY_API_VERSIONS: Final = ("v1", "kubescheduler.config.k8s.io/v1")
# config.MaxWeight = MaxTotalScore / MaxCustomPriorityScore; weights must stay below it.
MAX_WEIGHT: Final = (2**63 - 1) // 10
DEFAULT_HARD_POD_AFFINITY_SYMMETRIC_WEIGHT: Final = 1

_POLICY_FIELDS: Final = frozenset(
    {
        "kind",
        "apiVersion",
        "predicates",
        "priorities",
        "extenders",
        "hardPodAffinitySymmetricWeight",
        "alwaysCheckAllPredicates",
        "percentageOfNodesToScore",
    }
)
_PREDICATE_FIELDS: Final = frozenset({"name", "argument"})
_PRIORITY_FIELDS: Final = frozenset({"name", "weight", "argument"})
# Arguments that make an unknown name a custom predicate or priority in 1.20.
_CUSTOM_PREDICATE_ARGUMENTS: Final = ("serviceAffinity", "labelsPresence")
_CUSTOM_PRIORITY_ARGUMENTS: Final = (
    "serviceAntiAffinity",
    "labelPreference",
    "requestedToCapacityRatioArguments",
)


class PolicyError(ValueError):
    """An invalid policy; `field` is the path of the offending field, e.g. `predicates[2].name`."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field
        self.message = message

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self.field, self.message))


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _check_fields(entry: Mapping[str, Any], allowed: frozenset[str], path: str) -> None:
    for key in entry:
        if key not in allowed:
            raise PolicyError(f"{path}.{key}" if path else str(key), "unknown field")


def _check_header(spec: Mapping[str, Any]) -> None:
    kind = spec.get("kind")
    if kind is not None and kind != POLICY_KIND:
        raise PolicyError("kind", f'must be "{POLICY_KIND}", got {kind!r}')
    api_version = spec.get("apiVersion")
    if api_version is not None and api_version not in POLICY_API_VERSIONS:
        allowed = ", ".join(POLICY_API_VERSIONS)
        raise PolicyError("apiVersion", f"must be one of {allowed}, got {api_version!r}")


def _name(entry: Any, path: str, allowed: frozenset[str]) -> str:
    if not isinstance(entry, Mapping):
        raise PolicyError(path, f"must be an object with a name, got {entry!r}")
    _check_fields(entry, allowed, path)
    name = entry.get("name")
    if not isinstance(name, str) or not name:
        raise PolicyError(f"{path}.name", f"must be a non-empty string, got {name!r}")
    return name


def _argument(entry: Mapping[str, Any], path: str) -> Mapping[str, Any] | None:
    argument = entry.get("argument")
    if argument is not None and not isinstance(argument, Mapping):
        raise PolicyError(f"{path}.argument", f"must be an object, got {argument!r}")
    return argument


def _unsupported_custom(
    kind: str, name: str, argument: Mapping[str, Any] | None, custom: tuple[str, ...]
) -> str:
    used = [key for key in custom if argument and argument.get(key) is not None]
    if used:
        return f'custom {kind} "{name}" ({", ".join(used)}) is not supported yet'
    return f'unknown {kind} "{name}"'


def _compile_predicates(raw: Any) -> tuple[tuple[Predicate, ...], tuple[str, ...]]:
    # name -> (argument, index in the policy's list)
    chosen: dict[str, tuple[Mapping[str, Any] | None, int]] = {}
    if raw is None:
        chosen = dict.fromkeys(predicate_registry.DEFAULTS, (None, -1))
    elif not isinstance(raw, list):
        raise PolicyError("predicates", f"must be a list, got {raw!r}")
    else:
        first_index: dict[str, int] = {}
        for i, entry in enumerate(raw):
            path = f"predicates[{i}]"
            given = _name(entry, path, _PREDICATE_FIELDS)
            argument = _argument(entry, path)
            name = predicate_registry.ALIASES.get(given, given)
            if name in predicate_registry.NOT_SUPPORTED_YET:
                raise PolicyError(f"{path}.name", f'predicate "{given}" is not supported yet')
            if name not in predicate_registry.REGISTRY:
                message = _unsupported_custom("predicate", given, argument, _CUSTOM_PREDICATE_ARGUMENTS)
                raise PolicyError(f"{path}.name", message)
            if name in first_index:
                earlier = f"predicates[{first_index[name]}]"
                raise PolicyError(
                    f"{path}.name", f'duplicate predicate "{given}" (already given as {earlier})'
                )
            first_index[name] = i
            chosen[name] = (argument, i)
    for name in predicate_registry.MANDATORY:
        chosen.setdefault(name, (None, -1))

    filters: list[Predicate] = []
    seen: set[str] = set()
    names = []
    # Filters run in 1.20's fixed order, names it does not order after them alphabetically (as
    # AppendPredicateConfigs does); one that two names enable (GeneralPredicates and
    # PodFitsResources, say) runs once, where it first appears.
    unordered = sorted(set(chosen) - set(predicate_registry.ORDERING))
    for name in [*predicate_registry.ORDERING, *unordered]:
        if name not in chosen:
            continue
        names.append(name)
        argument, index = chosen[name]
        try:
            created = predicate_registry.REGISTRY[name](argument)
        except ValueError as exc:
            raise PolicyError(f"predicates[{index}].argument", str(exc)) from exc
        for predicate in created:
            if predicate.name not in seen:
                seen.add(predicate.name)
                filters.append(predicate)
    return tuple(filters), tuple(names)


def _weight(entry: Mapping[str, Any], path: str, name: str) -> int:
    weight = entry.get("weight")
    if isinstance(weight, int) and not isinstance(weight, bool) and 0 < weight < MAX_WEIGHT:
        return weight
    message = f'priority "{name}" should have a positive integer weight below {MAX_WEIGHT}, got {weight!r}'
    raise PolicyError(f"{path}.weight", message)


def _compile_priorities(raw: Any) -> tuple[tuple[WeightedPriority, ...], tuple[str, ...]]:
    chosen: dict[str, tuple[int, Mapping[str, Any] | None, int]] = {}
    names: list[str] = []
    if raw is None:
        chosen = {name: (weight, None, -1) for name, weight in priority_registry.DEFAULTS.items()}
        names = list(chosen)
    elif not isinstance(raw, list):
        raise PolicyError("priorities", f"must be a list, got {raw!r}")
    else:
        first_index: dict[str, int] = {}
        for i, entry in enumerate(raw):
            path = f"priorities[{i}]"
            given = _name(entry, path, _PRIORITY_FIELDS)
            argument = _argument(entry, path)
            name = priority_registry.ALIASES.get(given, given)
            if name in priority_registry.NOT_SUPPORTED_YET:
                raise PolicyError(f"{path}.name", f'priority "{given}" is not supported yet')
            if name not in priority_registry.REGISTRY and name not in priority_registry.SKIPPED:
                message = _unsupported_custom("priority", given, argument, _CUSTOM_PRIORITY_ARGUMENTS)
                raise PolicyError(f"{path}.name", message)
            weight = _weight(entry, path, given)
            if name in first_index:
                earlier = f"priorities[{first_index[name]}]"
                raise PolicyError(
                    f"{path}.name", f'duplicate priority "{given}" (already given as {earlier})'
                )
            first_index[name] = i
            if name in priority_registry.SKIPPED:
                if argument is not None:
                    raise PolicyError(f"{path}.argument", "this priority takes no argument")
                names.append(name)
                continue
            chosen[name] = (weight, argument, i)
            names.append(name)

    weighted = []
    for name in sorted(chosen):
        weight, argument, index = chosen[name]
        try:
            priority = priority_registry.REGISTRY[name](argument)
        except ValueError as exc:
            raise PolicyError(f"priorities[{index}].argument", str(exc)) from exc
        weighted.append(WeightedPriority(priority, weight))
    return tuple(weighted), tuple(sorted(names))


def _bounded_int(spec: Mapping[str, Any], field: str, low: int, high: int) -> int:
    value = spec.get(field)
    if value is None:
        return 0
    if not _is_int(value) or not low <= value <= high:
        raise PolicyError(field, f"not in valid range [{low}-{high}], got {value!r}")
    return int(value)


def compile_policy(spec: Mapping[str, Any]) -> Algorithm:
    """Validate a legacy Policy (document or body) and build its Algorithm; raises PolicyError."""
    if not isinstance(spec, Mapping):
        raise PolicyError("policy", f"must be an object, got {type(spec).__name__}")
    _check_fields(spec, _POLICY_FIELDS, "")
    _check_header(spec)

    extenders = spec.get("extenders")
    if extenders is not None and not isinstance(extenders, list):
        raise PolicyError("extenders", f"must be a list, got {extenders!r}")
    if extenders:
        raise PolicyError("extenders", "extenders are not supported yet")

    always_check_all = spec.get("alwaysCheckAllPredicates", False)
    if always_check_all is None:
        always_check_all = False
    if not isinstance(always_check_all, bool):
        raise PolicyError("alwaysCheckAllPredicates", f"must be true or false, got {always_check_all!r}")

    # 0 (or absent) means "not set" in 1.20, which then uses the default of 1.
    hard_weight = _bounded_int(spec, "hardPodAffinitySymmetricWeight", 0, 100)
    percentage = _bounded_int(spec, "percentageOfNodesToScore", 0, 100)

    filters, predicate_names = _compile_predicates(spec.get("predicates"))
    weighted, priority_names = _compile_priorities(spec.get("priorities"))
    return Algorithm(
        predicates=filters,
        priorities=weighted,
        always_check_all_predicates=always_check_all,
        hard_pod_affinity_symmetric_weight=hard_weight or DEFAULT_HARD_POD_AFFINITY_SYMMETRIC_WEIGHT,
        percentage_of_nodes_to_score=percentage,
        predicate_names=predicate_names,
        priority_names=priority_names,
    )


def default_algorithm() -> Algorithm:
    """The implemented subset of kube-scheduler 1.20's default predicates and priorities."""
    return compile_policy({})


def load_policy_file(path: str | Path) -> dict[str, Any]:
    """Read a Policy file (JSON or YAML); raises PolicyError naming the file when it is unusable."""
    source = str(path)
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise PolicyError(source, f"cannot read policy file: {exc}") from exc
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
        raise PolicyError(f"{source}: {exc.field}", exc.message) from exc
    return document
