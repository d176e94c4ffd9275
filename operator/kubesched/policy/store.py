"""SchedulerPolicy objects -> the algorithm each schedulerName runs, and the status each object should show.

Pure: no I/O and no clock (callers pass `now`). The operator feeds every watch event of a
SchedulerPolicy into a PolicyStore, hands `profiles()` to the scheduler, and writes
`status_patches()` to the API server (the leader only).

The rules:

- A policy drives the profile `spec.schedulerName` (absent: the operator's own name). The rest
  of `spec` is a legacy Policy body, compiled by `compile_policy`.
- A valid generation is accepted and, if its policy is the active one for its scheduler name,
  drives the next scheduling cycle. An invalid one is rejected (`Accepted=False`, the error
  naming the field from `spec.`) and the last accepted generation stays in force, schedulerName
  included. While it does, its spec is kept in `status.acceptedSpec`, so a replica that starts
  later, or takes over, keeps the same one in force.
- A spec over MAX_SPEC_BYTES of JSON is invalid, uncompiled. Where the schema's list and string
  limits did not stop it (a server with an older CRD), this bounds compile time and keeps the
  object within etcd's 1.5 MiB request limit once status is added: `acceptedSpec` is written
  only beside a rejected generation, and only when both specs fit in STATUS_COPY_BUDGET.
- Per scheduler name, the oldest policy (creationTimestamp, then name) that has an accepted
  generation is active; the others say `Active=False`, reason `Superseded`. A policy that never
  had a valid generation drives nothing.
- A policy with `spec.mode: Shadow` takes no part in that contest: it never drives its scheduler
  name, it is evaluated beside whatever does (`shadows()`, see shadow.py) and says `Active=False`,
  reason `Shadow`. Its `status.shadow` figures are written by the shadow reporter and kept here.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Final

import msgspec

from kubesched.algorithm.extenders import TransportFactory
from kubesched.algorithm.generic import Algorithm
from kubesched.kube.reasons import (
    ACCEPTED,
    ACTIVE,
    IN_FORCE,
    INVALID,
    NOT_ACCEPTED,
    PREVIOUS_GENERATION_IN_FORCE,
    SHADOW,
    SUPERSEDED,
    VALID,
)
from kubesched.model.selectors import is_dns1123_subdomain
from kubesched.policy.compile import PolicyError, compile_policy

API_GROUP: Final = "kubesched.io"
API_VERSION: Final = "v1alpha1"
PLURAL: Final = "schedulerpolicies"
KIND: Final = "SchedulerPolicy"
SCHEDULER_NAME_FIELD: Final = "schedulerName"
MODE_FIELD: Final = "mode"
SHADOW_FIELD: Final = "shadow"
ACTIVE_MODE: Final = "Active"
SHADOW_MODE: Final = "Shadow"
# Every sampled pod is one more scheduling run; 1.0 because shadowing is a deliberate, temporary
# trial, most often on a modest profile, where figures from every pod converge fastest and the
# cost is measured in status; `spec.shadow.sampleRate` bounds it on a busy one.
DEFAULT_SAMPLE_RATE: Final = 1.0

_LEGACY_HEADER: Final = ("kind", "apiVersion")
# Real policies are a few KiB; a thousand custom priorities, the CRD's list limit, about 120 KiB.
MAX_SPEC_BYTES: Final = 256 * 1024
# A rejected spec plus the accepted one copied into status, within etcd's 1.5 MiB per object
# with room for metadata (managedFields included) and conditions.
STATUS_COPY_BUDGET: Final = 1024 * 1024


@dataclass(frozen=True, slots=True)
class PolicyObject:
    """The parts of a SchedulerPolicy the store needs."""

    name: str
    uid: str
    created: str  # RFC 3339, second resolution: compares as a string
    generation: int
    spec: Mapping[str, Any]
    status: Mapping[str, Any]


@dataclass(frozen=True, slots=True)
class PolicyMode:
    """`spec.mode` and `spec.shadow`: whether a policy drives its scheduler or only shadows it."""

    shadow: bool = False
    sample_rate: float = DEFAULT_SAMPLE_RATE  # share of the active policy's pods a shadow evaluates


@dataclass(frozen=True, slots=True)
class AcceptedGeneration:
    """A compiled, valid generation of a policy: what drives a profile when its policy is active."""

    policy: str
    generation: int
    spec: Mapping[str, Any]
    scheduler_name: str
    algorithm: Algorithm
    mode: PolicyMode = PolicyMode()


@dataclass(frozen=True, slots=True)
class Compiled:
    """What `PolicyStore.upsert` needs compiled for one event, from `PolicyStore.compile`."""

    spec: tuple[str, Algorithm] | PolicyError | None  # None: this generation is compiled already
    from_status: AcceptedGeneration | None  # the one in force if `spec` is not valid


@dataclass(slots=True)
class _Entry:
    obj: PolicyObject
    error: PolicyError | None  # of the current generation
    accepted: AcceptedGeneration | None  # the generation in force if this policy is active


def parse_policy(raw: Mapping[str, Any]) -> PolicyObject:
    meta = raw.get("metadata") or {}
    generation = meta.get("generation")
    return PolicyObject(
        name=str(meta.get("name") or ""),
        uid=str(meta.get("uid") or ""),
        created=str(meta.get("creationTimestamp") or ""),
        generation=generation if isinstance(generation, int) else 0,
        spec=raw.get("spec") or {},
        status=raw.get("status") or {},
    )


def policy_mode(spec: Mapping[str, Any]) -> PolicyMode:
    """`spec.mode` (absent: Active) and `spec.shadow`; raises PolicyError with a `spec.` field path."""
    mode = spec.get(MODE_FIELD)
    if mode is not None and mode not in (ACTIVE_MODE, SHADOW_MODE):
        raise PolicyError(f"spec.{MODE_FIELD}", f'must be "{ACTIVE_MODE}" or "{SHADOW_MODE}", got {mode!r}')
    settings = spec.get(SHADOW_FIELD)
    if settings is None:
        settings = {}
    if not isinstance(settings, Mapping):
        raise PolicyError(f"spec.{SHADOW_FIELD}", f"must be an object, got {settings!r}")
    for key in settings:
        if key != "sampleRate":
            raise PolicyError(f"spec.{SHADOW_FIELD}.{key}", "unknown field")
    rate = settings.get("sampleRate", DEFAULT_SAMPLE_RATE)
    if isinstance(rate, bool) or not isinstance(rate, int | float) or not 0 <= rate <= 1:
        raise PolicyError(f"spec.{SHADOW_FIELD}.sampleRate", f"must be a number in [0, 1], got {rate!r}")
    return PolicyMode(mode == SHADOW_MODE, float(rate))


def compile_spec(
    spec: Any, default_scheduler_name: str, transport: TransportFactory | None = None
) -> tuple[str, Algorithm]:
    """The scheduler name a spec drives and its algorithm, its extenders called through `transport`;
    raises PolicyError with a `spec.` field path."""
    if not isinstance(spec, Mapping):
        raise PolicyError("spec", f"must be an object, got {type(spec).__name__}")
    size = spec_size(spec)
    if size > MAX_SPEC_BYTES:
        raise PolicyError("spec", f"is {size} bytes as JSON; the limit is {MAX_SPEC_BYTES}")
    policy_mode(spec)
    body = {k: v for k, v in spec.items() if k not in (MODE_FIELD, SHADOW_FIELD)}
    scheduler_name = body.pop(SCHEDULER_NAME_FIELD, None)
    if scheduler_name is None:
        scheduler_name = default_scheduler_name
    elif not isinstance(scheduler_name, str) or not scheduler_name:
        raise PolicyError(
            f"spec.{SCHEDULER_NAME_FIELD}", f"must be a non-empty string, got {scheduler_name!r}"
        )
    try:
        algorithm = compile_policy(body, transport=transport)
    except PolicyError as exc:
        raise PolicyError(f"spec.{exc.field}", exc.message) from exc
    except (ValueError, TypeError, KeyError, AttributeError) as exc:
        # A factory choking on an argument shape compile_policy did not foresee: still the user's input.
        raise PolicyError("spec", f"cannot be compiled: {exc!r}") from exc
    return scheduler_name, algorithm


def spec_size(spec: Mapping[str, Any]) -> int:
    """Bytes of `spec` as compact JSON, near what the API server stores."""
    return len(msgspec.json.encode(spec))


def intended_scheduler_name(spec: Mapping[str, Any], default_scheduler_name: str) -> str:
    """The scheduler name a spec asks for, valid or not."""
    name = spec.get(SCHEDULER_NAME_FIELD) if isinstance(spec, Mapping) else None
    return name if isinstance(name, str) and name else default_scheduler_name


def without_nulls(value: Any) -> Any:
    """`value` with null members of objects dropped, as a merge patch stores it (nulls delete)."""
    if isinstance(value, Mapping):
        return {k: without_nulls(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [without_nulls(v) for v in value]
    return value


def merge_patch(old: Mapping[str, Any], new: Mapping[str, Any]) -> dict[str, Any]:
    """The RFC 7386 JSON merge patch that turns `old` into `new` (lists are replaced whole)."""
    patch: dict[str, Any] = {key: None for key in old if key not in new}
    for key, value in new.items():
        if key not in old:
            patch[key] = value
            continue
        before = old[key]
        if isinstance(value, Mapping) and isinstance(before, Mapping):
            nested = merge_patch(before, value)
            if nested:
                patch[key] = nested
        elif before != value:
            patch[key] = value
    return patch


def is_object_name(name: str) -> bool:
    """Whether `name` can name a cluster-scoped object (an RFC 1123 subdomain)."""
    return is_dns1123_subdomain(name)


def policy_manifest(
    document: Mapping[str, Any], name: str, scheduler_name: str | None = None
) -> dict[str, Any]:
    """A legacy Policy document as a SchedulerPolicy manifest (`kind`/`apiVersion` dropped from the body)."""
    spec: dict[str, Any] = {}
    if scheduler_name:
        spec[SCHEDULER_NAME_FIELD] = scheduler_name
    spec.update((k, v) for k, v in document.items() if k not in _LEGACY_HEADER)
    return {
        "apiVersion": f"{API_GROUP}/{API_VERSION}",
        "kind": KIND,
        "metadata": {"name": name},
        "spec": spec,
    }


class PolicyStore:
    """Every SchedulerPolicy this replica has seen, compiled, and which one drives each scheduler name.

    `transport` makes the transports of the policies' extenders (None: they cannot be called).
    """

    def __init__(self, default_scheduler_name: str, transport: TransportFactory | None = None) -> None:
        self.default_scheduler_name = default_scheduler_name
        self._transport = transport
        self._entries: dict[str, _Entry] = {}

    def compile(self, raw: Mapping[str, Any]) -> Compiled:
        """The compiling `upsert(raw)` needs: pure, and long for a large spec, so a caller on an
        event loop runs it in a thread (events of one policy in order)."""
        obj = parse_policy(raw)
        old = self._entries.get(obj.name)
        known = old.accepted if old is not None and old.obj.uid == obj.uid else None
        if self.is_current(raw):
            return Compiled(None, self._accepted_from_status(obj, known))
        try:
            return Compiled(compile_spec(obj.spec, self.default_scheduler_name, self._transport), None)
        except PolicyError as exc:
            return Compiled(exc, self._accepted_from_status(obj, known))

    def upsert(self, raw: Mapping[str, Any], compiled: Compiled | None = None) -> PolicyError | None:
        """A policy was listed, added or changed, `compiled` by `compile(raw)` (None: compile it
        now); returns the error of its current generation, if any."""
        obj = parse_policy(raw)
        old = self._entries.get(obj.name)
        if old is not None and old.obj.uid != obj.uid:
            old = None  # deleted and created again under the same name: nothing carries over
        if compiled is None or (compiled.spec is None and old is None):
            compiled = self.compile(raw)
        if compiled.spec is None:
            # A status update (our own, most often): the spec is compiled already.
            assert old is not None
            old.obj = obj
            old.accepted = compiled.from_status
            return old.error
        if isinstance(compiled.spec, PolicyError):
            self._entries[obj.name] = _Entry(obj, compiled.spec, compiled.from_status)
            return compiled.spec
        scheduler_name, algorithm = compiled.spec
        mode = policy_mode(obj.spec)
        accepted = AcceptedGeneration(obj.name, obj.generation, obj.spec, scheduler_name, algorithm, mode)
        self._entries[obj.name] = _Entry(obj, None, accepted)
        return None

    def is_current(self, raw: Mapping[str, Any]) -> bool:
        """Whether this generation of the policy is compiled already (a status update, or a repeat)."""
        obj = parse_policy(raw)
        entry = self._entries.get(obj.name)
        return (
            entry is not None
            and entry.obj.uid == obj.uid
            and entry.obj.generation == obj.generation
            and entry.obj.spec == obj.spec
        )

    def delete(self, raw: Mapping[str, Any]) -> bool:
        """A policy was deleted; False if it was not known."""
        obj = parse_policy(raw)
        entry = self._entries.get(obj.name)
        if entry is None or (obj.uid and entry.obj.uid != obj.uid):
            return False
        del self._entries[obj.name]
        return True

    def record_status(self, name: str, status: Mapping[str, Any]) -> None:
        """The status the API server now holds for `name` (the reply to our write)."""
        entry = self._entries.get(name)
        if entry is not None:
            entry.obj = PolicyObject(
                entry.obj.name, entry.obj.uid, entry.obj.created, entry.obj.generation, entry.obj.spec, status
            )

    def names(self) -> list[str]:
        return sorted(self._entries)

    def acceptance(self) -> dict[str, bool]:
        """Policy name -> whether its current generation is valid (its Accepted condition)."""
        return {name: entry.error is None for name, entry in self._entries.items()}

    def active(self) -> dict[str, AcceptedGeneration]:
        """scheduler name -> the accepted generation that drives it (the oldest policy's)."""
        return {name: entry.accepted for name, entry in self._winners().items() if entry.accepted}

    def profiles(self) -> dict[str, Algorithm]:
        """scheduler name -> algorithm, for every scheduler name some policy drives."""
        return {name: accepted.algorithm for name, accepted in self.active().items()}

    def shadows(self) -> dict[str, tuple[AcceptedGeneration, ...]]:
        """scheduler name -> the accepted Shadow generations evaluated beside it, by policy name."""
        found: dict[str, list[AcceptedGeneration]] = {}
        for name in sorted(self._entries):
            accepted = self._entries[name].accepted
            if accepted is not None and accepted.mode.shadow:
                found.setdefault(accepted.scheduler_name, []).append(accepted)
        return {name: tuple(generations) for name, generations in found.items()}

    def get(self, name: str) -> PolicyObject | None:
        """Policy `name` as last seen (its status included); None if unknown."""
        entry = self._entries.get(name)
        return entry.obj if entry is not None else None

    def desired_status(self, name: str, now: str) -> dict[str, Any]:
        """The status policy `name` should show; `now` stamps transitions (RFC 3339)."""
        return self._desired_status(self._entries[name], self._winners(), now)

    def status_patches(self, now: str) -> Iterator[tuple[str, dict[str, Any]]]:
        """(name, merge patch of `status`) for every policy whose status is not what it should be."""
        winners = self._winners()
        for name in sorted(self._entries):
            entry = self._entries[name]
            desired = self._desired_status(entry, winners, now)
            patch = merge_patch(entry.obj.status, desired)
            if patch:
                yield name, patch

    # --- internals ------------------------------------------------------------------------------

    def _accepted_from_status(
        self, obj: PolicyObject, known: AcceptedGeneration | None
    ) -> AcceptedGeneration | None:
        """`known`, or the generation `status.acceptedSpec` records if it is newer (written by the leader)."""
        generation = obj.status.get("acceptedGeneration")
        spec = obj.status.get("acceptedSpec")
        if not isinstance(generation, int) or not isinstance(spec, Mapping) or generation > obj.generation:
            return known
        if known is not None and known.generation >= generation:
            return known
        try:
            scheduler_name, algorithm = compile_spec(spec, self.default_scheduler_name, self._transport)
        except PolicyError:
            return known  # e.g. written by a version that knew a priority this one does not
        return AcceptedGeneration(obj.name, generation, spec, scheduler_name, algorithm, policy_mode(spec))

    def _winners(self) -> dict[str, _Entry]:
        winners: dict[str, _Entry] = {}
        for entry in sorted(self._entries.values(), key=lambda e: (e.obj.created, e.obj.name)):
            if entry.accepted is not None and not entry.accepted.mode.shadow:
                winners.setdefault(entry.accepted.scheduler_name, entry)
        return winners

    def _desired_status(self, entry: _Entry, winners: Mapping[str, _Entry], now: str) -> dict[str, Any]:
        obj, accepted = entry.obj, entry.accepted
        if accepted is not None:
            scheduler_name = accepted.scheduler_name
        else:
            scheduler_name = intended_scheduler_name(obj.spec, self.default_scheduler_name)
        status: dict[str, Any] = {"observedGeneration": obj.generation, "schedulerName": scheduler_name}
        if accepted is not None:
            status["acceptedGeneration"] = accepted.generation
            if accepted.generation != obj.generation and (
                spec_size(obj.spec) + spec_size(accepted.spec) <= STATUS_COPY_BUDGET
            ):
                status["acceptedSpec"] = without_nulls(accepted.spec)

        if entry.error is None:
            accepted_condition = ("True", VALID, f"generation {obj.generation} is valid")
        else:
            accepted_condition = ("False", INVALID, str(entry.error))

        winner = winners.get(scheduler_name)
        if accepted is None:
            active_condition = ("False", NOT_ACCEPTED, "no valid generation to put in force (see Accepted)")
        elif accepted.mode.shadow:
            active_condition = ("False", SHADOW, self._shadow_message(accepted, obj.generation, winner))
            figures = obj.status.get(SHADOW_FIELD)
            if isinstance(figures, Mapping):
                status[SHADOW_FIELD] = figures  # the shadow reporter's to write
        elif winner is entry:
            drives = f'generation {accepted.generation} drives scheduler "{scheduler_name}"'
            if accepted.generation == obj.generation:
                active_condition = ("True", IN_FORCE, drives)
            else:
                rejected = f"{drives}; generation {obj.generation} was rejected (see Accepted)"
                active_condition = ("True", PREVIOUS_GENERATION_IN_FORCE, rejected)
            since = obj.status.get("activeSince")
            was_active = _condition_status(obj.status, ACTIVE) == "True"
            status["activeSince"] = since if was_active and isinstance(since, str) else now
        else:
            assert winner is not None
            superseded = (
                f'SchedulerPolicy "{winner.obj.name}" is older and drives scheduler "{scheduler_name}"'
            )
            active_condition = ("False", SUPERSEDED, superseded)

        status["conditions"] = [
            _condition(obj, ACCEPTED, *accepted_condition, now),
            _condition(obj, ACTIVE, *active_condition, now),
        ]
        return status

    def _shadow_message(self, accepted: AcceptedGeneration, current: int, winner: _Entry | None) -> str:
        name = accepted.scheduler_name
        if winner is not None:
            beside = f'beside SchedulerPolicy "{winner.obj.name}"'
        elif name == self.default_scheduler_name:
            beside = "beside the base algorithm"
        else:
            beside = "but nothing drives that scheduler name, so no pod is evaluated"
        message = f'generation {accepted.generation} shadows scheduler "{name}" {beside}; it never binds'
        if accepted.generation != current:
            message += f"; generation {current} was rejected (see Accepted)"
        return message


def _condition_status(status: Mapping[str, Any], kind: str) -> str | None:
    for condition in status.get("conditions") or []:
        if isinstance(condition, Mapping) and condition.get("type") == kind:
            value = condition.get("status")
            return value if isinstance(value, str) else None
    return None


def _condition(
    obj: PolicyObject, kind: str, status: str, reason: str, message: str, now: str
) -> dict[str, Any]:
    """A metav1.Condition; lastTransitionTime moves only when `status` does."""
    since = now
    for condition in obj.status.get("conditions") or []:
        if isinstance(condition, Mapping) and condition.get("type") == kind:
            stamp = condition.get("lastTransitionTime")
            if condition.get("status") == status and isinstance(stamp, str):
                since = stamp
    return {
        "type": kind,
        "status": status,
        "reason": reason,
        "message": message,
        "observedGeneration": obj.generation,
        "lastTransitionTime": since,
    }


__all__ = [
    "ACCEPTED",
    "ACTIVE",
    "API_GROUP",
    "API_VERSION",
    "KIND",
    "MAX_SPEC_BYTES",
    "PLURAL",
    "STATUS_COPY_BUDGET",
    "AcceptedGeneration",
    "Compiled",
    "PolicyMode",
    "PolicyObject",
    "PolicyStore",
    "compile_spec",
    "is_object_name",
    "merge_patch",
    "parse_policy",
    "policy_manifest",
    "policy_mode",
]
