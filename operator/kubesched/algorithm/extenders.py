"""Scheduler extenders: HTTP services a legacy Policy's `extenders` entries name, spoken to in
kube-scheduler 1.20's wire format (kube-scheduler/extender/v1, core/extender.go).

After the predicates, each extender with a `filterVerb` interested in the pod receives the pod and
the feasible nodes (full Node objects, or only their names when `nodeCacheCapable`) and answers
which of them fit, with a reason for each one that does not; with a `prioritizeVerb` it scores
them 0..10, added to the priorities' total times its `weight` times 10. An extender is interested
in every pod, or, with `managedResources`, in pods requesting or limiting one of them; those marked
`ignoredByScheduler` are left out of PodFitsResources. One extender may have a `bindVerb`: it then
binds the pods it is interested in instead of the API server's binding subresource. With a
`preemptVerb`, it sees the candidates of a preemption (each node and the pods to evict there:
full Pod objects, or only their UIDs when `nodeCacheCapable`) and answers with those it accepts,
possibly with fewer victims; the best of those is chosen (1.20's ProcessPreemption).

This module is pure: the configuration and what the answers do to the decision. The entries are
parsed by policy/extenders.py, the bodies sent and the replies read by algorithm/extender_wire.py.
The calls go through the `ExtenderTransport` that whoever compiles the policy injects
(kube/extender_transport.py: a blocking call from the algorithm's executor thread, made over
aiohttp, bounded by the extender's `httpTimeout`, default 5 s, as a total deadline). A policy
compiled without one is validated all the same, but its extenders cannot be called
(NoTransportError).

A call fails (ExtenderError) when the transport does (connection, TLS, HTTP status, a reply over
MAX_REPLY_BYTES, no whole reply within httpTimeout) or when the reply is not JSON or not of its
verb's shape; the message names the extender, the verb and what was wrong. A filter call that
fails is skipped, with a warning, when the extender is `ignorable`, and otherwise makes the pod
unschedulable this cycle with that message; a failing prioritize call is skipped, ignorable or
not, as in 1.20; a failing preempt call is skipped when the extender is ignorable, and otherwise
stops that preemption. Ignorable extenders are called after the others.

Differences from 1.20: `httpTimeout` also takes a Go duration string ("500ms", "2s", "1m") besides
Go's integer nanoseconds; the Pod and Node objects sent are rebuilt from kubesched's model
(metadata with labels, annotations and owner references, the whole spec; for nodes also the whole
status), not the informer's copies; the `NumPDBViolations` a preempt call answers is kept (1.20
drops it to 0; later releases keep it). Replies are held to their Go types more strictly than Go's
decoder does (algorithm/extender_wire.py), a reply is read up to MAX_REPLY_BYTES only, and a failed
prioritize call is logged (1.20 drops it silently). A filter reply's reasons count only for the
nodes it was asked about; `FailedAndUnresolvableNodes` (added in 1.21, whose preemption skips
those nodes; 1.20 ignores the field) are failed nodes here, with their reasons, which preemption
may still consider.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Protocol

import structlog

from kubesched.algorithm.extender_wire import (
    MAX_EXTENDER_PRIORITY,
    ExtenderError,
    decode_reply,
    node_object,
    pod_object,
    quoted,
    read_bind_reply,
    read_filter_reply,
    read_preempt_reply,
    read_prioritize_reply,
    shown,
)
from kubesched.model.nodeinfo import NodeInfo
from kubesched.model.objects import Pod
from kubesched.plugins.framework import MAX_NODE_SCORE

log = structlog.get_logger(__name__)

DEFAULT_TIMEOUT = 5.0


class NoTransportError(RuntimeError):
    """An extender was called from a policy compiled without a transport: a wiring mistake, not the
    extender's failure, so it is not an ExtenderError (which an ignorable extender would swallow)."""


@dataclass(frozen=True, slots=True)
class TLSConfig:
    insecure: bool = False
    server_name: str = ""
    cert_file: str = ""
    key_file: str = ""
    ca_file: str = ""
    cert_data: bytes = b""
    key_data: bytes = b""
    ca_data: bytes = b""


class NodeLookup(Protocol):
    """The snapshot's nodes by name (model.nodeinfo.Snapshot)."""

    def get(self, name: str, /) -> NodeInfo | None: ...


@dataclass(frozen=True, slots=True)
class Victims:
    """The pods a preemption would evict on one node (extenderv1.Victims)."""

    pods: tuple[Pod, ...]
    num_pdb_violations: int = 0


@dataclass(frozen=True, slots=True)
class ExtenderConfig:
    url_prefix: str
    filter_verb: str = ""
    preempt_verb: str = ""
    prioritize_verb: str = ""
    bind_verb: str = ""
    weight: int = 0
    enable_https: bool = False
    tls: TLSConfig | None = None
    http_timeout: float = DEFAULT_TIMEOUT
    node_cache_capable: bool = False
    managed_resources: tuple[tuple[str, bool], ...] = ()  # (name, ignoredByScheduler)
    ignorable: bool = False


# ------------------------------------------------------------------------------- transport


class ExtenderTransport(Protocol):
    """How the calls reach one extender (kube/extender_transport.py's HTTPTransport over HTTP)."""

    def post(self, verb: str, body: bytes) -> bytes:
        """The reply body to the JSON `body` POSTed to `verb`: the whole exchange within the
        extender's httpTimeout, at most MAX_REPLY_BYTES read; raises ExtenderError saying what
        went wrong (connection, TLS, HTTP status, size, deadline) without naming the extender."""
        ...

    def close(self) -> None:
        """Release what the transport holds (idle connections)."""
        ...


# The transport of one configured extender; may raise ValueError or OSError naming what in the
# configuration cannot be used (TLS material, say), which compiling reports as a policy error.
TransportFactory = Callable[[ExtenderConfig], ExtenderTransport]


# ------------------------------------------------------------------------------------- extenders


class HTTPExtender:
    """One configured extender (core/extender.go's HTTPExtender): its verbs, spoken through its
    transport (None when the policy was compiled to be validated only).

    Every ExtenderError a verb raises names the extender and the verb, then what went wrong:
    `extender http://host:port/prefix/filter: invalid JSON in reply: ...`."""

    def __init__(self, config: ExtenderConfig, transport: ExtenderTransport | None = None) -> None:
        self.config = config
        self._transport = transport
        self._managed = frozenset(name for name, _ in config.managed_resources)

    @property
    def name(self) -> str:
        return self.config.url_prefix

    @property
    def ignorable(self) -> bool:
        return self.config.ignorable

    @property
    def is_binder(self) -> bool:
        return bool(self.config.bind_verb)

    def url(self, verb: str) -> str:
        """Where `verb` is POSTed."""
        return f"{self.config.url_prefix.rstrip('/')}/{verb}"

    def is_interested(self, pod: Pod) -> bool:
        """IsInterested: no managed resources, or the pod requests or limits one of them."""
        if not self._managed:
            return True
        for container in (*(pod.spec.get("containers") or ()), *(pod.spec.get("initContainers") or ())):
            resources = (container.get("resources") or {}) if isinstance(container, Mapping) else {}
            for kind in ("requests", "limits"):
                if any(name in self._managed for name in resources.get(kind) or ()):
                    return True
        return False

    # --- verbs -----------------------------------------------------------------------------------

    def _args(self, pod: Pod, nodes: Sequence[NodeInfo]) -> dict[str, Any]:
        if self.config.node_cache_capable:
            return {"Pod": pod_object(pod), "Nodes": None, "NodeNames": [n.name for n in nodes]}
        items = [node_object(n.node) for n in nodes]
        return {"Pod": pod_object(pod), "Nodes": {"metadata": {}, "items": items}, "NodeNames": None}

    def filter(self, pod: Pod, nodes: Sequence[NodeInfo]) -> tuple[list[NodeInfo], dict[str, str]]:
        """The nodes that still fit and the extender's reason for each one that failed."""
        verb = self.config.filter_verb
        if not verb:
            return list(nodes), {}
        with self._calling(verb):
            reply = read_filter_reply(self._post(verb, self._args(pod, nodes)))
            if reply.error:
                raise ExtenderError(f"error in reply: {quoted(reply.error)}")
            by_name = {n.name: n for n in nodes}
            names = reply.nodes
            if self.config.node_cache_capable and reply.node_names is not None:
                names = reply.node_names
            fitting: dict[str, NodeInfo] = {}
            for name in names or ():
                info = by_name.get(name)
                if info is None:
                    raise ExtenderError(
                        f"claims a filtered node {shown(name)} which is not found in the input node list"
                    )
                fitting.setdefault(name, info)
        # Reasons for nodes it was not asked about would only miscount the pod's failure message.
        failed = {name: reason for name, reason in reply.failed.items() if name in by_name}
        # FailedAndUnresolvableNodes takes precedence over FailedNodes (1.21's findNodesThatPassExtenders).
        failed.update((name, r) for name, r in reply.failed_unresolvable.items() if name in by_name)
        return list(fitting.values()), failed

    def prioritize(self, pod: Pod, nodes: Sequence[NodeInfo]) -> dict[str, int]:
        """Host -> the extender's score (0..10) times its weight."""
        verb = self.config.prioritize_verb
        if not verb:
            return {}
        with self._calling(verb):
            entries = read_prioritize_reply(self._post(verb, self._args(pod, nodes)))
        asked = {n.name for n in nodes}
        scores: dict[str, int] = {}
        for host, score in entries:
            if host in asked:
                scores[host] = scores.get(host, 0) + score * self.config.weight
        return scores

    @property
    def supports_preemption(self) -> bool:
        return bool(self.config.preempt_verb)

    def process_preemption(
        self, pod: Pod, candidates: Mapping[str, Victims], nodes: NodeLookup
    ) -> dict[str, Victims]:
        """ProcessPreemption: the candidates the extender accepts, with the victims it names,
        found by UID among the pods of `nodes` (the snapshot's)."""
        if self.config.node_cache_capable:
            meta = {
                name: {"Pods": [{"UID": p.uid} for p in v.pods], "NumPDBViolations": v.num_pdb_violations}
                for name, v in candidates.items()
            }
            args: dict[str, Any] = {
                "Pod": pod_object(pod),
                "NodeNameToVictims": None,
                "NodeNameToMetaVictims": meta,
            }
        else:
            full = {
                name: {"Pods": [pod_object(p) for p in v.pods], "NumPDBViolations": v.num_pdb_violations}
                for name, v in candidates.items()
            }
            args = {"Pod": pod_object(pod), "NodeNameToVictims": full, "NodeNameToMetaVictims": None}
        verb = self.config.preempt_verb
        out: dict[str, Victims] = {}
        with self._calling(verb):
            for name, (uids, violations) in read_preempt_reply(self._post(verb, args)).items():
                info = nodes.get(name)
                if info is None:
                    raise ExtenderError(f"claims to preempt on node {shown(name)}, which is not found")
                pods = []
                for uid in uids:
                    victim = info.pods.get(uid)
                    if victim is None:
                        raise ExtenderError(
                            f"claims to preempt pod (UID: {shown(uid)}) on node {shown(name)}, "
                            "but the pod is not found on that node"
                        )
                    pods.append(victim)
                out[name] = Victims(tuple(pods), violations)
        return out

    def bind(self, pod: Pod, node_name: str) -> None:
        """Bind through the extender's bindVerb; raises ExtenderError with its reason."""
        verb = self.config.bind_verb
        args = {"PodName": pod.name, "PodNamespace": pod.namespace, "PodUID": pod.uid, "Node": node_name}
        with self._calling(verb):
            error = read_bind_reply(self._post(verb, args))
            if error:
                raise ExtenderError(f"error in reply: {quoted(error)}")

    # --- transport ---------------------------------------------------------------------------------

    def _post(self, verb: str, args: Mapping[str, Any]) -> Any:
        """The decoded reply to `args` POSTed to `verb`."""
        if self._transport is None:
            raise NoTransportError(
                f"extender {self.name} cannot be called: its policy was compiled without a transport"
            )
        return decode_reply(self._transport.post(verb, json.dumps(args, separators=(",", ":")).encode()))

    @contextmanager
    def _calling(self, verb: str) -> Iterator[None]:
        """Name the extender and the verb in the errors of a call."""
        try:
            yield
        except ExtenderError as exc:
            raise ExtenderError(f"extender {self.url(verb)}: {exc}") from exc

    def close(self) -> None:
        """Release the transport's idle connections."""
        if self._transport is not None:
            self._transport.close()


@dataclass(frozen=True, slots=True)
class ExtenderOutcome:
    """What the extenders made of one pod's feasible nodes (kept for `explain`)."""

    feasible: list[NodeInfo]
    failed: dict[str, list[str]] = field(default_factory=dict)
    skipped: dict[str, str] = field(default_factory=dict)  # ignorable extender -> its error


def _skipped(extender: HTTPExtender, verb: str, pod: Pod, error: ExtenderError) -> None:
    log.warning("extender_skipped", extender=extender.name, verb=verb, pod=pod.key, error=str(error))


def run_filters(extenders: Sequence[HTTPExtender], pod: Pod, nodes: Sequence[NodeInfo]) -> ExtenderOutcome:
    """findNodesThatPassExtenders; raises ExtenderError for a failing extender that is not ignorable."""
    outcome = ExtenderOutcome(list(nodes))
    feasible = list(nodes)
    for extender in extenders:
        if not feasible:
            break
        if not extender.config.filter_verb or not extender.is_interested(pod):
            continue
        try:
            fitting, failed = extender.filter(pod, feasible)
        except ExtenderError as exc:
            if not extender.ignorable:
                raise  # its message names the extender, the verb and what went wrong
            _skipped(extender, "filter", pod, exc)
            outcome.skipped[extender.name] = str(exc)
            continue
        for name, reason in failed.items():
            outcome.failed.setdefault(name, []).append(reason)
        feasible = fitting
    return ExtenderOutcome(feasible, outcome.failed, outcome.skipped)


def run_prioritizers(
    extenders: Sequence[HTTPExtender], pod: Pod, nodes: Sequence[NodeInfo]
) -> dict[str, int]:
    """The extenders' weighted scores per host, scaled to the priorities' 0..100 range; failures ignored."""
    combined: dict[str, int] = {}
    for extender in extenders:
        if not extender.config.prioritize_verb or not extender.is_interested(pod):
            continue
        try:
            scores = extender.prioritize(pod, nodes)
        except ExtenderError as exc:
            # Ignorable or not, as in 1.20: the other priorities decide without its scores.
            _skipped(extender, "prioritize", pod, exc)
            continue
        for host, score in scores.items():
            combined[host] = combined.get(host, 0) + score
    scale = MAX_NODE_SCORE // MAX_EXTENDER_PRIORITY
    return {host: score * scale for host, score in combined.items()}


def run_preemption(
    extenders: Sequence[HTTPExtender],
    pod: Pod,
    candidates: Mapping[str, Victims],
    nodes: NodeLookup,
) -> dict[str, Victims]:
    """CallExtenders: each interested extender with a preemptVerb narrows the candidates in turn;
    raises ExtenderError for a failing extender that is not ignorable."""
    remaining = dict(candidates)
    for extender in extenders:
        if not remaining:
            break
        if not extender.supports_preemption or not extender.is_interested(pod):
            continue
        try:
            remaining = extender.process_preemption(pod, remaining, nodes)
        except ExtenderError as exc:
            if not extender.ignorable:
                raise
            _skipped(extender, "preempt", pod, exc)
    return remaining


def ignored_resources(extenders: Sequence[HTTPExtender]) -> frozenset[str]:
    """The managed resources marked ignoredByScheduler: PodFitsResources leaves them out."""
    return frozenset(name for e in extenders for name, ignored in e.config.managed_resources if ignored)


__all__ = [
    "DEFAULT_TIMEOUT",
    "ExtenderConfig",
    "ExtenderOutcome",
    "ExtenderTransport",
    "HTTPExtender",
    "NoTransportError",
    "TLSConfig",
    "TransportFactory",
    "Victims",
    "ignored_resources",
    "run_filters",
    "run_preemption",
    "run_prioritizers",
]
