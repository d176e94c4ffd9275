"""`kubesched simulate`: what a candidate policy would change, worked out on a cluster state, binding nothing.

Two modes:

- pending (default): the pending pods of a scheduler name are placed twice on the same cluster
  state, once under the policy the scheduler runs now (the active SchedulerPolicy for that name,
  else the policy file given, else the built-in default) and once under the candidate; the
  difference is what the candidate would change.
- replay: the bound pods of that scheduler name are taken off their nodes and placed again under
  the candidate; the difference from where they are now is what it would change.

Pods are placed as the scheduler's queue takes them (higher priority first, then older, then in
listing order), one after another, each placement seen by the next, by the scheduler's own
`schedule_batch`, with a random source seeded by `--seed` for tie-breaking.

ElasticQuotas apply as in the scheduler (schedule_batch admits each pod, or group, by its quota
before trying nodes); the output shows each quota's use per resource before and after, beside its
min and max.

The members of a PodGroup (kubesched.algorithm.gang) are placed together, all or nothing, where
the first of them stands in that order, against the PodGroups the cluster state holds. What is
known of a group is what the scheduler knows: its members are its pending pods in the state
(gated ones, and those the selector leaves out, count without being placed) and its bound ones.
The output says, per group, whether each policy places it and, if not, why.

What "the same placements as the live scheduler" means: a kubesched started with the same
`--seed` and this policy, on the cluster this state describes (it was saved, or read, before the
scheduler saw the pods), binds every pod to the node simulate names for it, when (1) these are
the only pods it schedules (pods of other profiles draw from the same random source), (2) they
were all pending when it started, so that its queue takes them in the order above, and (3)
nothing else changes the cluster meanwhile. A pod that stays unschedulable here would be retried
by the scheduler later (after a cluster event, or after a minute): simulate tries each pod once.
"""

from __future__ import annotations

import json
import random
import statistics
import sys
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Final

import yaml

from kubesched.algorithm.batch import schedule_batch
from kubesched.algorithm.extenders import TransportFactory
from kubesched.algorithm.gang import GangFitError, GangState
from kubesched.algorithm.generic import Algorithm, FitError, ScheduleResult
from kubesched.algorithm.preemption import PreemptionOutcome
from kubesched.kube.extender_transport import HTTPTransport
from kubesched.model.nodeinfo import Snapshot
from kubesched.model.objects import Pod, pod_from_dict
from kubesched.model.podgroup import (
    LEGACY_POD_GROUP_LABEL,
    POD_GROUP_LABEL,
    bound_members,
    group_key,
    pod_group_from_dict,
)
from kubesched.model.quota import QuotaState, in_one_unit
from kubesched.model.selectors import (
    EVERYTHING,
    LabelSelector,
    SelectorError,
)
from kubesched.policy.compile import PolicyError, compile_policy
from kubesched.policy.store import KIND, compile_spec
from kubesched.tools.snapshot import STDIO, ClusterState
from kubesched.tools.table import table

PENDING: Final = "pending"
REPLAY: Final = "replay"
DEFAULT_SEED: Final = 0


class SimulateError(ValueError):
    """Input simulate cannot work with: an unreadable policy file, a bad selector."""


# ----------------------------------------------------------------------------------------- input


def read_candidate(
    path: str, default_scheduler_name: str, transport: TransportFactory | None = HTTPTransport
) -> tuple[str, Algorithm]:
    """The scheduler name and compiled algorithm of a SchedulerPolicy manifest or a legacy Policy
    file (`-` or /dev/stdin: standard input), its extenders called through `transport`; raises
    PolicyError naming what is wrong."""
    try:
        text = sys.stdin.read() if path in STDIO else Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise PolicyError(path, f"cannot read policy file: {exc}") from exc
    try:
        document = yaml.safe_load(text)  # YAML reads JSON too
    except yaml.YAMLError as exc:
        raise PolicyError(path, f"not valid JSON or YAML: {exc}") from exc
    if not isinstance(document, Mapping):
        raise PolicyError(path, f"must hold an object, got {type(document).__name__}")
    if document.get("kind") == KIND:
        spec = document.get("spec")
        try:
            return compile_spec(spec, default_scheduler_name, transport)
        except PolicyError as exc:
            raise PolicyError(f"{path}: {exc.field}", exc.message) from exc
    try:
        return default_scheduler_name, compile_policy(document, transport=transport)
    except PolicyError as exc:
        raise PolicyError(f"{path}: {exc.field}", exc.message) from exc


def parse_label_selector(text: str) -> LabelSelector:
    """`--pods`: a label selector in kubectl's syntax; SimulateError when it is not one."""
    try:
        return LabelSelector.from_string(text)
    except SelectorError as exc:
        raise SimulateError(f"--pods {text!r}: {exc}") from exc


# ------------------------------------------------------------------------------------- the work


@dataclass(frozen=True, slots=True)
class Placement:
    """Where a pod is (replay) or goes under the current policy (pending), and under the candidate.
    None: unschedulable, `..._reason` says why."""

    pod: str
    current: str | None
    candidate: str | None
    current_reason: str = ""
    candidate_reason: str = ""

    @property
    def moved(self) -> bool:
        return self.current is not None and self.candidate is not None and self.current != self.candidate


@dataclass(frozen=True, slots=True)
class Spread:
    """How evenly one resource is requested across the nodes, as fractions of allocatable."""

    resource: str
    mean: float
    stdev: float
    low: float
    high: float


@dataclass(frozen=True, slots=True)
class QuotaUse:
    """One resource of an ElasticQuota in force: its bounds, and its use before and after (as the
    utilisation spreads: pending mode, under the current policy and the candidate; replay, where the
    pods are and under the candidate), in one unit ("-": a max that does not name it)."""

    quota: str  # namespace/name
    resource: str
    min: str
    max: str
    before: str
    after: str


def quota_uses(before: QuotaState, after: QuotaState) -> tuple[QuotaUse, ...]:
    """Every resource each quota in force names or uses, by quota and resource."""
    found = []
    for namespace, quota in sorted(after.quotas.items()):
        was, now = before.used_by(namespace), after.used_by(namespace)
        for name in sorted({*was, *now, *quota.min, *quota.max}):
            bound = quota.max.get(name)
            figures = (quota.min.get(name, 0), was.get(name, 0), now.get(name, 0))
            shown = in_one_unit(name, *figures, *(() if bound is None else (bound,)))
            found.append(QuotaUse(quota.key, name, shown[0], "-" if bound is None else shown[3], *shown[1:3]))
    return tuple(found)


@dataclass(frozen=True, slots=True)
class GroupOutcome:
    """What one policy did with a PodGroup's members: placed them (all that fit), or none, and why."""

    placed: bool
    members_placed: int
    reason: str = ""  # the members' FailedScheduling message when the group is not placed

    def as_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"placed": self.placed, "membersPlaced": self.members_placed}
        return {**out, "reason": self.reason} if self.reason else out


@dataclass(frozen=True, slots=True)
class GroupPlacement:
    """A PodGroup whose members were among the pods placed, under each policy (replay: current is
    where they are)."""

    group: str  # namespace/name
    members: int  # members among the pods placed
    current: GroupOutcome
    candidate: GroupOutcome


@dataclass(frozen=True, slots=True)
class Simulation:
    mode: str
    scheduler_name: str
    seed: int
    nodes: int
    current_policy: str
    candidate_policy: str
    placements: tuple[Placement, ...]
    before: tuple[Spread, ...]
    after: tuple[Spread, ...]
    notes: tuple[str, ...] = field(default=())
    groups: tuple[GroupPlacement, ...] = field(default=())  # in the order of their first members
    quotas: tuple[QuotaUse, ...] = field(default=())  # the ElasticQuotas in force, before and after

    @property
    def moved(self) -> tuple[Placement, ...]:
        return tuple(p for p in self.placements if p.moved)

    @property
    def newly_unschedulable(self) -> tuple[Placement, ...]:
        return tuple(p for p in self.placements if p.current is not None and p.candidate is None)

    @property
    def newly_schedulable(self) -> tuple[Placement, ...]:
        return tuple(p for p in self.placements if p.current is None and p.candidate is not None)

    @property
    def unschedulable_in_both(self) -> tuple[Placement, ...]:
        return tuple(p for p in self.placements if p.current is None and p.candidate is None)

    def as_dict(self) -> dict[str, Any]:
        def spread(items: Sequence[Spread]) -> dict[str, Any]:
            return {
                s.resource: {"mean": s.mean, "stdev": s.stdev, "min": s.low, "max": s.high} for s in items
            }

        return {
            "mode": self.mode,
            "schedulerName": self.scheduler_name,
            "seed": self.seed,
            "nodes": self.nodes,
            "currentPolicy": self.current_policy,
            "candidatePolicy": self.candidate_policy,
            "pods": len(self.placements),
            "moved": len(self.moved),
            "newlyUnschedulable": [p.pod for p in self.newly_unschedulable],
            "newlySchedulable": [p.pod for p in self.newly_schedulable],
            "unschedulableInBoth": [p.pod for p in self.unschedulable_in_both],
            "utilisation": {"before": spread(self.before), "after": spread(self.after)},
            "placements": [
                {
                    "pod": p.pod,
                    "current": p.current,
                    "candidate": p.candidate,
                    **({"currentReason": p.current_reason} if p.current_reason else {}),
                    **({"candidateReason": p.candidate_reason} if p.candidate_reason else {}),
                }
                for p in self.placements
            ],
            "notes": list(self.notes),
            **(
                {
                    "podGroups": [
                        {
                            "group": g.group,
                            "members": g.members,
                            "current": g.current.as_dict(),
                            "candidate": g.candidate.as_dict(),
                        }
                        for g in self.groups
                    ]
                }
                if self.groups
                else {}
            ),
            **({"quotas": [asdict(q) for q in self.quotas]} if self.quotas else {}),
        }


def queue_order(pods: Sequence[Pod]) -> list[Pod]:
    """The order the scheduler's queue takes pods that were all waiting: priority, then age, then listing."""
    return sorted(pods, key=lambda p: (-p.priority, p.created.timestamp()))  # stable: listing order last


def place(
    algorithm: Algorithm,
    pods: Sequence[Pod],
    snapshot: Snapshot,
    seed: int,
    gangs: Mapping[str, GangState] | None = None,
) -> tuple[list[Any], Snapshot]:
    """Each pod's outcome under `algorithm`, placed in turn as the scheduler places a batch (a
    PodGroup's members together, `gangs` saying what is known of their groups), and the snapshot
    with every placement applied."""
    profiles = {pod.scheduler_name: algorithm for pod in pods}
    outcomes, _ = schedule_batch(profiles, pods, snapshot, random.Random(seed), 0, gangs=gangs)
    for pod, outcome in zip(pods, outcomes, strict=True):
        if isinstance(outcome, ScheduleResult):
            snapshot = snapshot.with_pod_on(pod, outcome.node_name)
    return outcomes, snapshot


def spreads(snapshot: Snapshot) -> tuple[Spread, ...]:
    """Requested cpu and memory as shares of allocatable, across the nodes that have any."""
    found = []
    for resource in ("cpu", "memory"):
        shares = []
        for info in snapshot.nodes:
            if resource == "cpu":
                total, used = info.node.allocatable.milli_cpu, info.requested.milli_cpu
            else:
                total, used = info.node.allocatable.memory, info.requested.memory
            if total > 0:
                shares.append(used / total)
        if shares:
            found.append(
                Spread(
                    resource,
                    round(statistics.fmean(shares), 4),
                    round(statistics.pstdev(shares), 4),
                    round(min(shares), 4),
                    round(max(shares), 4),
                )
            )
    return tuple(found)


def group_states(state: ClusterState, pods: Sequence[Pod], snapshot: Snapshot) -> dict[str, GangState]:
    """What the scheduler knows of the PodGroups of `pods`: their members are `pods`, the pending
    pods of the group in `state` (gated or not selected, too) and those bound on `snapshot`."""
    members: dict[str, dict[str, Pod]] = {}
    for pod in pods:
        if key := group_key(pod):
            members.setdefault(key, {})[pod.uid] = pod
    if not members:
        return {}
    for raw in state.pods:
        meta = raw.get("metadata") or {}
        labels = meta.get("labels") or {}
        if (raw.get("spec") or {}).get("nodeName") or not (
            labels.get(POD_GROUP_LABEL) or labels.get(LEGACY_POD_GROUP_LABEL)
        ):
            continue  # only pending members are parsed
        pod = pod_from_dict(raw)
        if not pod.deleting and group_key(pod) in members:
            members[group_key(pod)].setdefault(pod.uid, pod)
    states = {}
    for key, pending in members.items():
        bound = {pod.uid for pod in bound_members(snapshot, key)}
        raw_group = snapshot.objects.pod_groups.get(key)
        states[key] = GangState(
            pod_group_from_dict(raw_group) if raw_group is not None else None,
            len(pending.keys() | bound),
            frozenset(pod.scheduler_name for pod in pending.values()),
        )
    return states


def group_outcomes(pods: Sequence[Pod], outcomes: Sequence[Any]) -> dict[str, GroupOutcome]:
    """Per PodGroup of `pods`, in the order of their first members: placed or not, and why not."""
    found: dict[str, list[Any]] = {}
    for pod, outcome in zip(pods, outcomes, strict=True):
        if key := group_key(pod):
            found.setdefault(key, []).append(outcome)
    result = {}
    for key, decided in found.items():
        held = [error for error in map(_gang_error, decided) if error is not None]
        placed = sum(isinstance(o, ScheduleResult) for o in decided)
        result[key] = GroupOutcome(not held, placed, held[0].summary() if held else "")
    return result


def _gang_error(outcome: Any) -> GangFitError | None:
    """The GangFitError behind `outcome`: its member was held back by its group."""
    if isinstance(outcome, PreemptionOutcome):
        outcome = outcome.error
    return outcome if isinstance(outcome, GangFitError) else None


def _node_and_reason(outcome: Any) -> tuple[str | None, str]:
    if isinstance(outcome, ScheduleResult):
        return outcome.node_name, ""
    if isinstance(outcome, FitError):
        return None, outcome.summary()
    return None, f"internal error while scheduling: {outcome!r}"


def _without_node(raw: Mapping[str, Any]) -> Pod:
    """A bound pod as it was before binding: HostName would pin it to its node otherwise."""
    spec = {k: v for k, v in (raw.get("spec") or {}).items() if k != "nodeName"}
    return pod_from_dict({**raw, "spec": spec})


def selected(
    state: ClusterState, scheduler_name: str, selector: LabelSelector, namespace: str | None
) -> list[Mapping[str, Any]]:
    """The raw pods of `scheduler_name` that the selector (and namespace, if any) picks, not deleting."""
    found = []
    for raw in state.pods:
        meta = raw.get("metadata") or {}
        spec = raw.get("spec") or {}
        if spec.get("schedulerName", "default-scheduler") != scheduler_name or meta.get("deletionTimestamp"):
            continue
        if namespace is not None and meta.get("namespace") != namespace:
            continue
        if selector.matches(meta.get("labels") or {}):
            found.append(raw)
    return found


def simulate(
    state: ClusterState,
    candidate: Algorithm,
    current: Algorithm,
    *,
    scheduler_name: str,
    selector: LabelSelector = EVERYTHING,
    namespace: str | None = None,
    replay: bool = False,
    seed: int = DEFAULT_SEED,
    candidate_policy: str = "",
    current_policy: str = "",
) -> Simulation:
    """Place the selected pods under `candidate` and compare (see the module's docstring)."""
    raws = selected(state, scheduler_name, selector, namespace)
    notes: list[str] = []
    if replay:
        bound = [raw for raw in raws if (raw.get("spec") or {}).get("nodeName")]
        uids = frozenset(str((raw.get("metadata") or {}).get("uid") or "") for raw in bound)
        pods = queue_order([_without_node(raw) for raw in bound])
        where = {pod_from_dict(raw).uid: str(raw["spec"]["nodeName"]) for raw in bound}
        base = state.cache(leave_out=uids).snapshot()
        before_snapshot = state.cache().snapshot()
        before = spreads(before_snapshot)
        gangs = group_states(state, pods, base)
        outcomes, after_snapshot = place(candidate, pods, base, seed, gangs)
        placements = []
        for pod, outcome in zip(pods, outcomes, strict=True):
            node, reason = _node_and_reason(outcome)
            placements.append(Placement(pod.key, where[pod.uid], node, "", reason))
        current_policy = "the placements in the cluster state"
        current_groups = {
            key: GroupOutcome(True, sum(group_key(pod) == key for pod in pods)) for key in gangs
        }
    else:
        pending = [pod_from_dict(raw) for raw in raws if not (raw.get("spec") or {}).get("nodeName")]
        # A gated pod never reaches the scheduler (PreEnqueue): neither policy would place it yet.
        gated = [pod for pod in pending if pod.scheduling_gates]
        if gated:
            names = ", ".join(pod.key for pod in gated[:5]) + (" ..." if len(gated) > 5 else "")
            notes.append(f"{len(gated)} pending pod(s) left out, waiting for scheduling gates: {names}")
        pods = queue_order([pod for pod in pending if not pod.scheduling_gates])
        base = state.cache().snapshot()
        gangs = group_states(state, pods, base)
        current_outcomes, before_snapshot = place(current, pods, base, seed, gangs)
        outcomes, after_snapshot = place(candidate, pods, base, seed, gangs)
        current_groups = group_outcomes(pods, current_outcomes)
        before = spreads(before_snapshot)
        placements = []
        for pod, was, now in zip(pods, current_outcomes, outcomes, strict=True):
            (was_node, was_reason), (now_node, now_reason) = _node_and_reason(was), _node_and_reason(now)
            placements.append(Placement(pod.key, was_node, now_node, was_reason, now_reason))
    if not pods:
        kind = "bound" if replay else "pending"
        notes.append(f'no {kind} pod of scheduler "{scheduler_name}" matches: nothing to place')
    groups = []
    for key, outcome in group_outcomes(pods, outcomes).items():
        members = sum(group_key(pod) == key for pod in pods)
        groups.append(GroupPlacement(key, members, current_groups[key], outcome))
        left = gangs[key].exist - members - len(bound_members(base, key))
        if left > 0:
            notes.append(
                f"pod group {key}: {left} other member(s) counted, not placed here"
                " (gated, not selected, or pending)"
            )
    return Simulation(
        mode=REPLAY if replay else PENDING,
        scheduler_name=scheduler_name,
        seed=seed,
        nodes=len(base.nodes),
        current_policy=current_policy,
        candidate_policy=candidate_policy,
        placements=tuple(placements),
        before=before,
        after=spreads(after_snapshot),
        notes=tuple(notes),
        groups=tuple(groups),
        quotas=quota_uses(before_snapshot.quotas, after_snapshot.quotas),
    )


# ------------------------------------------------------------------------------------ rendering


def render_json(simulation: Simulation) -> str:
    return json.dumps(simulation.as_dict(), indent=2)


def _percent(value: float) -> str:
    return f"{100 * value:.1f}%"


def render_table(simulation: Simulation) -> str:
    s = simulation
    what = "bound pod(s) replayed" if s.mode == REPLAY else "pending pod(s) placed"
    total = len(s.placements)
    share = f" ({100 * len(s.moved) / total:.1f}%)" if total else ""
    lines = [
        f'{total} {what} for scheduler "{s.scheduler_name}" on {s.nodes} node(s), seed {s.seed}'
        "; nothing was bound",
        f"current:   {s.current_policy}",
        f"candidate: {s.candidate_policy}",
        "",
        f"moved: {len(s.moved)} of {total}{share}   newly unschedulable: {len(s.newly_unschedulable)}"
        f"   newly schedulable: {len(s.newly_schedulable)}"
        f"   unschedulable under both: {len(s.unschedulable_in_both)}",
    ]
    lines.extend(f"note: {note}" for note in s.notes)
    if s.before or s.after:
        rows = [["REQUESTED", "BEFORE mean", "stdev", "min..max", "AFTER mean", "stdev", "min..max"]]
        after = {x.resource: x for x in s.after}
        for b in s.before:
            a = after.get(b.resource, b)
            rows.append(
                [
                    b.resource,
                    _percent(b.mean),
                    _percent(b.stdev),
                    f"{_percent(b.low)}..{_percent(b.high)}",
                    _percent(a.mean),
                    _percent(a.stdev),
                    f"{_percent(a.low)}..{_percent(a.high)}",
                ]
            )
        lines += ["", *table(rows)]
    if s.quotas:
        rows = [["QUOTA", "RESOURCE", "MIN", "MAX", "BEFORE", "AFTER"]]
        last = ""
        for q in s.quotas:
            rows.append([q.quota if q.quota != last else "", q.resource, q.min, q.max, q.before, q.after])
            last = q.quota
        lines += ["", f"ELASTIC QUOTAS ({len({q.quota for q in s.quotas})})", *table(rows)]
    if s.moved:
        rows = [["POD", "CURRENT", "CANDIDATE"]]
        rows += [[p.pod, p.current or "", p.candidate or ""] for p in s.moved]
        lines += ["", f"MOVED ({len(s.moved)})", *table(rows)]
    if s.newly_unschedulable:
        rows = [["POD", "CURRENT", "WHY NOT UNDER THE CANDIDATE"]]
        rows += [[p.pod, p.current or "", p.candidate_reason] for p in s.newly_unschedulable]
        lines += ["", f"NEWLY UNSCHEDULABLE ({len(s.newly_unschedulable)})", *table(rows)]
    if s.newly_schedulable:
        rows = [["POD", "CANDIDATE", "WHY NOT NOW"]]
        rows += [[p.pod, p.candidate or "", p.current_reason] for p in s.newly_schedulable]
        lines += ["", f"NEWLY SCHEDULABLE ({len(s.newly_schedulable)})", *table(rows)]
    if s.groups:
        rows = [["GROUP", "MEMBERS", "CURRENT", "CANDIDATE"]]
        rows += [
            [g.group, str(g.members), _group_cell(g.current), _group_cell(g.candidate)] for g in s.groups
        ]
        lines += ["", f"POD GROUPS ({len(s.groups)})", *table(rows)]
        for g in s.groups:
            lines.extend(
                f"{g.group} not placed under the {side}: {o.reason}" for side, o in _sides(g) if o.reason
            )
    return "\n".join(lines)


def _group_cell(outcome: GroupOutcome) -> str:
    return f"placed ({outcome.members_placed})" if outcome.placed else "not placed"


def _sides(group: GroupPlacement) -> tuple[tuple[str, GroupOutcome], ...]:
    return (("current policy", group.current), ("candidate", group.candidate))


__all__ = [
    "GroupOutcome",
    "GroupPlacement",
    "Placement",
    "QuotaUse",
    "SimulateError",
    "Simulation",
    "Spread",
    "group_outcomes",
    "group_states",
    "parse_label_selector",
    "place",
    "queue_order",
    "quota_uses",
    "read_candidate",
    "render_json",
    "render_table",
    "simulate",
    "spreads",
]
