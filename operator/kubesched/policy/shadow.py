"""Shadow policies: a candidate policy run beside the active one, on the same snapshot, never binding.

The leader's scheduling loop hands every decision to `ShadowRunner.observe`, inside the executor
call, with the snapshot and start index the active policy used. Each Shadow policy of the pod's
scheduler name that samples the pod (by UID, so a retried pod is consistently in or out) runs its
algorithm on that same snapshot, with a random source of its own (the active policy's tie-breaking
must not change because someone is watching), and the two decisions are compared:

- same node: the active policy's node is among the shadow's best. A tie at the top counts: the
  shadow ranks that node first, and only its own coin flip could make it pick another. So an
  identical policy agrees on every pod, exactly;
- different node: both found a node, and the shadow ranks the active choice below its best;
- unschedulable in the shadow only, in the active policy only, or in both (both counts as agreeing).

ElasticQuotas hold for shadows too: a pod its quota refuses (algorithm/admission.py) is refused by
each shadow with the same borrowing rule, and judged by a shadow with another rule on the same
snapshot, as the scheduler would have judged it.

The members of a PodGroup, decided together by the active policy (all or nothing), are decided
together by each shadow too: it runs `schedule_batch` on the members, on the snapshot and with the
nominations the group saw, and the group is sampled as a whole (by its `namespace/name`). When
either side does not place the group, each member compares its outcome there (a shadow that cannot
place the group disagrees on every member the active policy placed). When both place it, each
member is compared as a lone pod is, on the snapshot the active policy placed it on (the members
before it in place), so that a tie broken otherwise for one member does not count against the
next ones: an identical policy still agrees on every member, unless a tie broken otherwise changes
whether the group fits at all.

Figures accumulate in memory as a `Tally` per `Comparison` (shadow policy, its generation, and
what drove the scheduler name meanwhile); the shadow reporter takes them every few seconds and
folds them into `status.shadow` with `fold_figures`. The first few disagreements of each interval
keep the top score terms behind both choices (per-priority weighted scores, as `explain` shows
them); computing those costs two more scoring passes, hence the bound.
"""

from __future__ import annotations

import enum
import hashlib
import math
import random
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

import structlog

from kubesched.algorithm.admission import QuotaError, quota_error
from kubesched.algorithm.batch import GangAwareObserver, Outcome, schedule_batch, with_nominated
from kubesched.algorithm.gang import GangFitError, GangState
from kubesched.algorithm.generic import Algorithm, FitError, ScheduleResult, priority_scores
from kubesched.algorithm.preemption import PreemptionOutcome
from kubesched.kube.events import now_rfc3339
from kubesched.model.nodeinfo import Snapshot
from kubesched.model.objects import Pod
from kubesched.model.podgroup import group_key
from kubesched.policy.store import AcceptedGeneration
from kubesched.telemetry import metrics

log = structlog.get_logger(__name__)

MAX_RECENT: Final = 5  # disagreements kept in status, and detailed per reporting interval
TOP_TERMS: Final = 3
NOTHING: Final = "none"  # comparedWith when no algorithm serves the scheduler name

Decided = ScheduleResult | FitError  # a decision to compare (a bug compares with nothing)


class Verdict(enum.Enum):
    SAME_NODE = "sameNode"
    BOTH_UNSCHEDULABLE = "unschedulableInBoth"
    DIFFERENT_NODE = "differentNode"
    SHADOW_ONLY_UNSCHEDULABLE = "unschedulableInShadowOnly"
    ACTIVE_ONLY_UNSCHEDULABLE = "unschedulableInActiveOnly"

    @property
    def agrees(self) -> bool:
        return self in (Verdict.SAME_NODE, Verdict.BOTH_UNSCHEDULABLE)


def compare(active: ScheduleResult | FitError, shadow: ScheduleResult | FitError) -> Verdict:
    """How the shadow's decision relates to the active one's (ties at the shadow's top agree)."""
    if isinstance(active, FitError):
        return (
            Verdict.BOTH_UNSCHEDULABLE if isinstance(shadow, FitError) else Verdict.ACTIVE_ONLY_UNSCHEDULABLE
        )
    if isinstance(shadow, FitError):
        return Verdict.SHADOW_ONLY_UNSCHEDULABLE
    if shadow.node_name == active.node_name:
        return Verdict.SAME_NODE
    # The shadow's choice has its best total (ties picked at random): two look-ups, no scan.
    score = shadow.scores.get(active.node_name)
    if score is not None and score == shadow.scores.get(shadow.node_name):
        return Verdict.SAME_NODE
    return Verdict.DIFFERENT_NODE


def sampled(uid: str, rate: float) -> bool:
    """Whether a pod is in a `rate` sample: a hash of its UID, so every shadow and every retry agree."""
    if rate >= 1.0:
        return True
    if rate <= 0.0:
        return False
    digest = hashlib.blake2b(uid.encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big") < rate * 2**64


def top_terms(
    algorithm: Algorithm, pod: Pod, snapshot: Snapshot, result: ScheduleResult, limit: int = TOP_TERMS
) -> list[dict[str, Any]]:
    """The largest weighted priority scores behind `result`'s node (none when one node was feasible)."""
    if not result.scores or result.node_name not in result.scores:
        return []
    nodes = [info for info in (snapshot.get(name) for name in result.scores) if info is not None]
    names = [info.name for info in nodes]
    if result.node_name not in names:
        return []
    i = names.index(result.node_name)
    terms: list[tuple[int, str, dict[str, Any]]] = []  # (weighted, name, entry) for sorting
    for weighted in algorithm.priorities:
        score = priority_scores(weighted.priority, pod, snapshot, nodes)[i]
        entry = {"priority": weighted.label, "score": score, "weight": weighted.weight}
        entry["weighted"] = score * weighted.weight
        terms.append((score * weighted.weight, weighted.label, entry))
    extenders = result.scores[result.node_name] - sum(t[0] for t in terms)
    if algorithm.extenders and extenders:
        terms.append((extenders, "extenders", {"priority": "extenders", "weighted": extenders}))
    terms.sort(key=lambda t: (-t[0], t[1]))
    return [entry for _, _, entry in terms[:limit]]


def decision(
    algorithm: Algorithm, pod: Pod, snapshot: Snapshot, outcome: ScheduleResult | FitError
) -> dict[str, Any]:
    """One side of a disagreement, for status: the node, its total and top terms, or why none."""
    if isinstance(outcome, FitError):
        return {"unschedulable": outcome.summary()}
    side: dict[str, Any] = {"node": outcome.node_name}
    if outcome.scores:
        side["total"] = outcome.scores[outcome.node_name]
        side["topTerms"] = top_terms(algorithm, pod, snapshot, outcome)
    else:
        side["note"] = "the only feasible node: nothing was scored"
    return side


@dataclass(frozen=True, slots=True)
class ShadowTarget:
    """A Shadow policy's accepted generation, as the runner evaluates it."""

    policy: str
    generation: int
    algorithm: Algorithm
    sample_rate: float


@dataclass(frozen=True, slots=True)
class Comparison:
    """What a set of figures compares: a shadow generation against what drove its scheduler name."""

    policy: str
    generation: int
    compared_with: str


@dataclass(slots=True)
class Tally:
    """Figures gathered since the reporter last took them."""

    evaluated: int = 0
    counts: dict[Verdict, int] = field(default_factory=dict)
    errors: int = 0
    seconds: float = 0.0
    disagreements: list[dict[str, Any]] = field(default_factory=list)  # oldest first

    def add(self, verdict: Verdict, seconds: float) -> None:
        self.evaluated += 1
        self.counts[verdict] = self.counts.get(verdict, 0) + 1
        self.seconds += seconds

    @property
    def agreed(self) -> int:
        return sum(n for verdict, n in self.counts.items() if verdict.agrees)


@dataclass(frozen=True, slots=True)
class _Config:
    targets: Mapping[str, tuple[ShadowTarget, ...]]  # by scheduler name
    active: Mapping[str, tuple[Algorithm, str]]  # scheduler name -> (algorithm in force, its label)


def active_label(accepted: AcceptedGeneration | None) -> str:
    if accepted is None:
        return "base algorithm"
    return f'SchedulerPolicy "{accepted.policy}" generation {accepted.generation}'


class ShadowRunner:
    """Runs the Shadow policies beside the active ones (in the executor) and tallies the comparisons."""

    def __init__(
        self,
        seed: int | None = None,
        *,
        wall_clock: Callable[[], str] = now_rfc3339,
        timer: Callable[[], float] = time.perf_counter,
    ) -> None:
        self._config = _Config({}, {})
        self._rng = random.Random(seed)
        self._wall_clock = wall_clock
        self._timer = timer
        self._lock = threading.Lock()
        self._tallies: dict[Comparison, Tally] = {}
        # What schedule_batch is given (the scheduling loop's `observe`): pods one by one, groups whole.
        self.observe = GangAwareObserver(self.observe_pod, self.observe_gang)

    def update(
        self,
        shadows: Mapping[str, Sequence[AcceptedGeneration]],
        active: Mapping[str, AcceptedGeneration],
        profiles: Mapping[str, Algorithm],
    ) -> None:
        """The Shadow generations per scheduler name, and what the scheduler runs for each (event loop)."""
        targets = {
            name: tuple(
                ShadowTarget(g.policy, g.generation, g.algorithm, g.mode.sample_rate) for g in generations
            )
            for name, generations in shadows.items()
        }
        labels = {name: (algorithm, active_label(active.get(name))) for name, algorithm in profiles.items()}
        before = {(t.policy, t.generation) for ts in self._config.targets.values() for t in ts}
        after = {(t.policy, t.generation) for ts in targets.values() for t in ts}
        self._config = _Config(targets, labels)  # one assignment: the executor sees old or new, whole
        for policy, generation in sorted(after - before):
            log.info("shadow_policy_applied", policy=policy, generation=generation)

    def compared_with(self, scheduler_name: str) -> str:
        """What the shadows of `scheduler_name` are compared with now."""
        found = self._config.active.get(scheduler_name)
        return found[1] if found is not None else NOTHING

    def observe_pod(
        self, pod: Pod, algorithm: Algorithm, snapshot: Snapshot, start: int, outcome: Outcome
    ) -> None:
        """The active policy decided `outcome` for `pod` on `snapshot`: evaluate the shadows (executor)."""
        config = self._config
        targets = config.targets.get(pod.scheduler_name)
        if not targets or not isinstance(outcome, ScheduleResult | FitError):
            return  # an internal error of the active policy compares with nothing
        active = config.active.get(pod.scheduler_name)
        if active is None or active[0] is not algorithm:
            return  # a batch that started before a policy swap: it would be put under the wrong heading
        for target in targets:
            if not sampled(pod.uid, target.sample_rate):
                continue
            key = Comparison(target.policy, target.generation, active[1])
            try:
                self._evaluate(target, key, pod, algorithm, snapshot, start, outcome)
            except Exception as exc:  # a bug hit by the shadow must not touch scheduling
                log.warning("shadow_error", policy=target.policy, pod=pod.key, error=repr(exc))
                with self._lock:
                    self._tallies.setdefault(key, Tally()).errors += 1

    def observe_gang(
        self,
        pods: Sequence[Pod],
        profiles: Mapping[str, Algorithm],
        state: GangState | None,
        snapshot: Snapshot,
        start: int,
        nominated: Mapping[str, tuple[Pod, str]],
        outcomes: Sequence[Outcome],
    ) -> None:
        """The active policy decided a PodGroup's members together: each shadow decides them together
        too, on the same snapshot, and compares member by member (executor)."""
        config = self._config
        name = pods[0].scheduler_name
        targets = config.targets.get(name)
        if not targets:
            return
        active = config.active.get(name)
        if active is None or active[0] is not profiles[name]:
            return  # a batch that started before a policy swap
        group = group_key(pods[0])
        for target in targets:
            if not sampled(group, target.sample_rate):  # the whole group, or none of it
                continue
            key = Comparison(target.policy, target.generation, active[1])
            try:
                self._evaluate_gang(target, key, pods, profiles, state, snapshot, start, nominated, outcomes)
            except Exception as exc:  # a bug hit by the shadow must not touch scheduling
                log.warning("shadow_error", policy=target.policy, group=group, error=repr(exc))
                with self._lock:
                    self._tallies.setdefault(key, Tally()).errors += len(pods)

    def take(self) -> dict[Comparison, Tally]:
        """The figures gathered since the last call (event loop)."""
        with self._lock:
            tallies, self._tallies = self._tallies, {}
        return tallies

    def _evaluate(
        self,
        target: ShadowTarget,
        key: Comparison,
        pod: Pod,
        algorithm: Algorithm,
        snapshot: Snapshot,
        start: int,
        outcome: ScheduleResult | FitError,
    ) -> None:
        began = self._timer()
        try:
            refused = _admitted(target.algorithm, algorithm, pod, snapshot, outcome)
            shadow: ScheduleResult | FitError = refused or target.algorithm.schedule(
                pod, snapshot, self._rng, start
            )
        except FitError as exc:
            shadow = exc.as_outcome()
        verdict = compare(outcome, shadow)
        with self._lock:
            tally = self._tallies.setdefault(key, Tally())
            detail = not verdict.agrees and len(tally.disagreements) < MAX_RECENT
        record = None
        if detail:
            record = {
                "pod": pod.key,
                "at": self._wall_clock(),
                "verdict": verdict.value,
                "active": decision(algorithm, pod, snapshot, outcome),
                "shadow": decision(target.algorithm, pod, snapshot, shadow),
            }
        seconds = self._timer() - began
        with self._lock:
            tally = self._tallies.setdefault(key, Tally())
            tally.add(verdict, seconds)
            if record is not None:
                tally.disagreements.append(record)
        metrics.SHADOW_EVALUATIONS.labels(target.policy, verdict.value).inc()
        metrics.SHADOW_EVALUATION_DURATION.labels(target.policy).observe(seconds)

    def _evaluate_gang(
        self,
        target: ShadowTarget,
        key: Comparison,
        pods: Sequence[Pod],
        profiles: Mapping[str, Algorithm],
        state: GangState | None,
        snapshot: Snapshot,
        start: int,
        nominated: Mapping[str, tuple[Pod, str]],
        outcomes: Sequence[Outcome],
    ) -> None:
        began = self._timer()
        shadow_profiles = dict.fromkeys((pod.scheduler_name for pod in pods), target.algorithm)
        gangs = {} if state is None else {group_key(pods[0]): state}
        own, _ = schedule_batch(
            shadow_profiles, pods, snapshot, self._rng, start, nominated=nominated, gangs=gangs
        )
        whole = not any(map(_held_by_group, (*own, *outcomes)))
        # Per member both sides decided: (pod, active outcome and the snapshot it saw, shadow's).
        compared: list[tuple[Pod, Decided, Snapshot, Decided, Snapshot]] = []
        errors = 0
        view, own_view, at = snapshot, snapshot, start  # as the active policy, and the shadow, placed them
        for pod, outcome, shadow in zip(pods, outcomes, own, strict=True):
            seen = with_nominated(view, pod, nominated) if nominated else view
            shadow_seen = with_nominated(own_view, pod, nominated) if nominated else own_view
            if not whole and isinstance(shadow, ScheduleResult):
                own_view = own_view.with_pod_on(pod, shadow.node_name)
            if isinstance(outcome, ScheduleResult | FitError):
                if whole:
                    # Both place the group: the member as a lone pod, where the active policy placed it.
                    try:
                        shadow = target.algorithm.schedule(pod, seen, self._rng, at)
                    except FitError as exc:
                        shadow = exc.as_outcome()
                    shadow_seen = seen
                if isinstance(shadow, ScheduleResult | FitError):
                    compared.append((pod, outcome, seen, shadow, shadow_seen))
                else:
                    errors += 1  # a bug hit by the shadow
            if isinstance(outcome, ScheduleResult):
                view, at = view.with_pod_on(pod, outcome.node_name), outcome.next_start_index
        verdicts = [compare(outcome, shadow) for _, outcome, _, shadow, _ in compared]
        with self._lock:
            room = MAX_RECENT - len(self._tallies.setdefault(key, Tally()).disagreements)
        records: list[dict[str, Any]] = []
        for (pod, outcome, seen, shadow, shadow_seen), verdict in zip(compared, verdicts, strict=True):
            if verdict.agrees or len(records) >= room:
                continue
            records.append(
                {
                    "pod": pod.key,
                    "at": self._wall_clock(),
                    "verdict": verdict.value,
                    "active": decision(profiles[pod.scheduler_name], pod, seen, outcome),
                    "shadow": decision(target.algorithm, pod, shadow_seen, shadow),
                }
            )
        seconds = (self._timer() - began) / max(len(compared), 1)  # each member's share
        with self._lock:
            tally = self._tallies.setdefault(key, Tally())
            for verdict in verdicts:
                tally.add(verdict, seconds)
            tally.errors += errors
            tally.disagreements.extend(records[: max(MAX_RECENT - len(tally.disagreements), 0)])
        for verdict in verdicts:
            metrics.SHADOW_EVALUATIONS.labels(target.policy, verdict.value).inc()
            metrics.SHADOW_EVALUATION_DURATION.labels(target.policy).observe(seconds)


def _admitted(
    shadow: Algorithm, active: Algorithm, pod: Pod, snapshot: Snapshot, outcome: ScheduleResult | FitError
) -> QuotaError | None:
    """The shadow's ElasticQuota refusal of `pod`, or None: with the active policy's borrowing rule,
    the active verdict (the same admission, snapshot and nominations); with another, its own on
    `snapshot`, which holds the nominated pods of `pod`'s priority or higher as placed (those of a
    lower priority, which admission counts in other quotas within their min, are left out)."""
    if shadow.quota_borrowing == active.quota_borrowing:
        refused = outcome.error if isinstance(outcome, PreemptionOutcome) else outcome  # reclaim tried
        return refused if isinstance(refused, QuotaError) else None
    if not snapshot.quotas:
        return None
    return quota_error(snapshot.quotas, [pod], len(snapshot.nodes), (), shadow.quota_borrowing)


def _held_by_group(outcome: Outcome) -> bool:
    """Whether `outcome` is a member held back by its group (not placed because the group is not)."""
    if isinstance(outcome, PreemptionOutcome):
        outcome = outcome.error
    return isinstance(outcome, GangFitError)


# ------------------------------------------------------------------------------------- status


_COUNTERS: Final = (
    ("agreed", None),
    ("differentNode", Verdict.DIFFERENT_NODE),
    ("unschedulableInShadowOnly", Verdict.SHADOW_ONLY_UNSCHEDULABLE),
    ("unschedulableInActiveOnly", Verdict.ACTIVE_ONLY_UNSCHEDULABLE),
    ("unschedulableInBoth", Verdict.BOTH_UNSCHEDULABLE),
)


def _int(figures: Mapping[str, Any], key: str) -> int:
    value = figures.get(key)
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def agreement_percent(agreed: int, evaluated: int) -> float:
    """Agreement in percent, rounded down to 0.1 so that 100.0 means every single one."""
    return math.floor(1000 * agreed / evaluated) / 10 if evaluated else 0.0


def fold_figures(
    previous: Mapping[str, Any] | None, key: Comparison, tally: Tally | None, sample_rate: float, now: str
) -> Mapping[str, Any]:
    """`status.shadow` after adding `tally`; `previous` itself when there is nothing new to say.

    Figures taken against another generation or another active policy are not added to: they
    start again from zero, so that the agreement always describes one comparison.
    """
    same = (
        previous is not None
        and previous.get("generation") == key.generation
        and previous.get("comparedWith") == key.compared_with
    )
    if same and tally is None and previous is not None and previous.get("sampleRate") == sample_rate:
        return previous
    base: Mapping[str, Any] = previous if same and previous is not None else {"since": now}
    tally = tally or Tally()
    evaluated = _int(base, "evaluated") + tally.evaluated
    figures: dict[str, Any] = {
        "comparedWith": key.compared_with,
        "generation": key.generation,
        "since": base.get("since", now),
        "updated": now,
        "sampleRate": sample_rate,
        "evaluated": evaluated,
    }
    for name, verdict in _COUNTERS:
        added = tally.agreed if verdict is None else tally.counts.get(verdict, 0)
        figures[name] = _int(base, name) + added
    figures["agreementPercent"] = agreement_percent(figures["agreed"], evaluated)
    figures["errors"] = _int(base, "errors") + tally.errors
    before = base.get("evaluationSeconds")
    seconds = (before if isinstance(before, int | float) else 0.0) + tally.seconds
    figures["evaluationSeconds"] = round(seconds, 6)
    figures["meanEvaluationMilliseconds"] = round(1000 * seconds / evaluated, 3) if evaluated else 0.0
    recent = list(reversed(tally.disagreements)) + list(base.get("recentDisagreements") or [])
    figures["recentDisagreements"] = recent[:MAX_RECENT]
    return figures


__all__ = [
    "Comparison",
    "ShadowRunner",
    "ShadowTarget",
    "Tally",
    "Verdict",
    "agreement_percent",
    "compare",
    "fold_figures",
    "sampled",
    "top_terms",
]
