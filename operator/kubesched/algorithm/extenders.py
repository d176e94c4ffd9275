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

This module is pure: the configuration, the wire format (the bodies sent, the answers read) and
what the answers do to the decision. The calls go through the `ExtenderTransport` that whoever
compiles the policy injects (kube/extender_transport.py: blocking HTTP(S) from the algorithm's
executor thread, each call bounded by the extender's `httpTimeout`, default 5 s, as a total
deadline). A policy compiled without one is validated all the same, but its extenders cannot be
called (NoTransportError).

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
decoder does (see "replies" below), a reply is read up to MAX_REPLY_BYTES only, and a failed
prioritize call is logged (1.20 drops it silently). A filter reply's reasons count only for the
nodes it was asked about; `FailedAndUnresolvableNodes` (added in 1.21, whose preemption skips
those nodes; 1.20 ignores the field) are failed nodes here, with their reasons, which preemption
may still consider.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Protocol
from urllib.parse import urlsplit

import structlog

from kubesched.model.duration import parse_go_duration
from kubesched.model.nodeinfo import NodeInfo
from kubesched.model.objects import Node, Pod
from kubesched.model.selectors import qualified_name_error
from kubesched.plugins.arguments import ArgumentError, require_bool, require_int, require_object, require_str
from kubesched.plugins.framework import MAX_NODE_SCORE

log = structlog.get_logger(__name__)

DEFAULT_TIMEOUT = 5.0
MAX_EXTENDER_PRIORITY = 10

_FIELDS = (
    "urlPrefix",
    "filterVerb",
    "preemptVerb",
    "prioritizeVerb",
    "weight",
    "bindVerb",
    "enableHTTPS",
    "tlsConfig",
    "httpTimeout",
    "nodeCacheCapable",
    "managedResources",
    "ignorable",
)
_TLS_FIELDS = ("insecure", "serverName", "certFile", "keyFile", "caFile", "certData", "keyData", "caData")


class ExtenderError(Exception):
    """A call to an extender failed: transport, HTTP status, undecodable or erroneous answer."""


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


# --------------------------------------------------------------------------------- configuration


def _case_insensitive(raw: Mapping[str, Any], fields: Sequence[str], path: str) -> dict[str, Any]:
    """The LegacyExtender decodes its keys case-insensitively (enableHttps, enableHTTPS...)."""
    by_lower = {f.lower(): f for f in fields}
    out: dict[str, Any] = {}
    for key, value in raw.items():
        canonical = by_lower.get(str(key).lower())
        if canonical is None:
            raise ArgumentError(
                f"{path}.{key}" if path else str(key), f"unknown field (accepted: {', '.join(fields)})"
            )
        out[canonical] = value
    return out


def parse_http_timeout(value: Any, field: str) -> float:
    """Seconds from Go's integer nanoseconds (the legacy Policy's time.Duration) or a Go duration
    string; 0 means the default."""
    wrong = f'must be a duration (integer nanoseconds or e.g. "5s"), got {value!r}'
    if isinstance(value, int) and not isinstance(value, bool):
        seconds = value / 1e9
    elif isinstance(value, str):
        try:
            seconds = parse_go_duration(value)
        except ValueError:
            raise ArgumentError(field, wrong) from None
    else:
        raise ArgumentError(field, wrong)
    if seconds < 0:
        raise ArgumentError(field, f"must not be negative, got {value!r}")
    return seconds or DEFAULT_TIMEOUT


def _bytes(value: Any, field: str) -> bytes:
    """A Go []byte field: base64 in JSON (a PEM string is also taken as is)."""
    if value is None or value == "":
        return b""
    if not isinstance(value, str):
        raise ArgumentError(field, f"must be a base64 string, got {value!r}")
    if value.lstrip().startswith("-----BEGIN"):
        return value.encode()
    try:
        return base64.b64decode(value, validate=True)
    except ValueError as exc:
        raise ArgumentError(field, f"must be base64: {exc}") from exc


def _tls(raw: Any, path: str) -> TLSConfig | None:
    if raw is None:
        return None
    fields = _case_insensitive(require_object(raw, path), _TLS_FIELDS, path)

    def text(name: str) -> str:
        value = fields.get(name)
        if value is None:
            return ""
        if not isinstance(value, str):
            raise ArgumentError(f"{path}.{name}", f"must be a string, got {value!r}")
        return value

    return TLSConfig(
        require_bool(fields.get("insecure", False), f"{path}.insecure"),
        text("serverName"),
        text("certFile"),
        text("keyFile"),
        text("caFile"),
        _bytes(fields.get("certData"), f"{path}.certData"),
        _bytes(fields.get("keyData"), f"{path}.keyData"),
        _bytes(fields.get("caData"), f"{path}.caData"),
    )


def _extended_resource_error(name: str) -> str | None:
    """validateExtendedResourceName: a qualified name outside kubernetes.io/, not requests.*."""
    error = qualified_name_error(name)
    if error is not None:
        return error
    if "/" not in name or "kubernetes.io/" in name or name.startswith("requests."):
        return f"{name} is an invalid extended resource name"
    return None


def _managed_resources(raw: Any, path: str) -> tuple[tuple[str, bool], ...]:
    if raw is None:
        return ()
    if not isinstance(raw, list):
        raise ArgumentError(path, f"must be a list, got {raw!r}")
    found: list[tuple[str, bool]] = []
    for i, entry in enumerate(raw):
        where = f"{path}[{i}]"
        fields = _case_insensitive(require_object(entry, where), ("name", "ignoredByScheduler"), where)
        name = require_str(fields.get("name"), f"{where}.name")
        error = _extended_resource_error(name)
        if error is not None:
            raise ArgumentError(f"{where}.name", error)
        if any(name == seen for seen, _ in found):
            raise ArgumentError(f"{where}.name", f"duplicate extender managed resource name {name!r}")
        found.append(
            (name, require_bool(fields.get("ignoredByScheduler", False), f"{where}.ignoredByScheduler"))
        )
    return tuple(found)


def _verb(fields: Mapping[str, Any], name: str) -> str:
    value = fields.get(name)
    if value is None or value == "":
        return ""
    return require_str(value, name)


def parse_extender(raw: Any) -> ExtenderConfig:
    """One `extenders` entry; raises ArgumentError naming the field relative to the entry."""
    fields = _case_insensitive(require_object(raw, ""), _FIELDS, "")
    url = require_str(fields.get("urlPrefix"), "urlPrefix")
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ArgumentError("urlPrefix", f"must be an http:// or https:// URL, got {url!r}")
    weight = require_int(fields.get("weight", 0), "weight")
    prioritize = _verb(fields, "prioritizeVerb")
    if prioritize and weight <= 0:
        raise ArgumentError("weight", f"must have a positive weight applied to it, got {weight}")
    timeout = fields.get("httpTimeout")
    return ExtenderConfig(
        url_prefix=url,
        filter_verb=_verb(fields, "filterVerb"),
        preempt_verb=_verb(fields, "preemptVerb"),
        prioritize_verb=prioritize,
        bind_verb=_verb(fields, "bindVerb"),
        weight=weight,
        enable_https=require_bool(fields.get("enableHTTPS", False), "enableHTTPS"),
        tls=_tls(fields.get("tlsConfig"), "tlsConfig"),
        http_timeout=DEFAULT_TIMEOUT if timeout is None else parse_http_timeout(timeout, "httpTimeout"),
        node_cache_capable=require_bool(fields.get("nodeCacheCapable", False), "nodeCacheCapable"),
        managed_resources=_managed_resources(fields.get("managedResources"), "managedResources"),
        ignorable=require_bool(fields.get("ignorable", False), "ignorable"),
    )


# ------------------------------------------------------------------------------- wire format


def pod_object(pod: Pod) -> dict[str, Any]:
    """The Pod as the extender receives it (rebuilt from the model)."""
    meta: dict[str, Any] = {"name": pod.name, "namespace": pod.namespace, "uid": pod.uid}
    if pod.resource_version:
        meta["resourceVersion"] = pod.resource_version
    if pod.labels:
        meta["labels"] = dict(pod.labels)
    if pod.annotations:
        meta["annotations"] = dict(pod.annotations)
    if pod.owners:
        meta["ownerReferences"] = [
            {"kind": o.kind, "name": o.name, "uid": o.uid, "controller": o.controller} for o in pod.owners
        ]
    status: dict[str, Any] = {"phase": pod.phase} if pod.phase else {}
    return {"kind": "Pod", "apiVersion": "v1", "metadata": meta, "spec": dict(pod.spec), "status": status}


def node_object(node: Node) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": node.name, "uid": node.uid}
    if node.labels:
        meta["labels"] = dict(node.labels)
    if node.annotations:
        meta["annotations"] = dict(node.annotations)
    spec: dict[str, Any] = {}
    if node.unschedulable:
        spec["unschedulable"] = True
    if node.taints:
        spec["taints"] = [
            {"key": t.key, "value": t.value, "effect": t.effect}
            if t.value
            else {"key": t.key, "effect": t.effect}
            for t in node.taints
        ]
    return {
        "kind": "Node",
        "apiVersion": "v1",
        "metadata": meta,
        "spec": spec,
        "status": dict(node.raw_status),
    }


# --------------------------------------------------------------------------------- replies
# Each verb's reply is checked against its Go type (kube-scheduler/extender/v1) before it is used.
# As with Go's encoding/json, field names match case-insensitively, a missing or null field is
# the zero value, and a field of the wrong type fails the call; here the error names the field.
# Stricter than Go: the reply itself must be an object (a list for prioritize), scores must lie
# within 0..10, and what is quoted from the reply is cut short, since it ends up in events and logs.

_MAX_SHOWN = 80  # characters of a wrong value shown in an error
_MAX_QUOTED = 512  # characters of an extender's own words (its Error, a node's reason) kept


def decode_reply(data: bytes) -> Any:
    """The JSON value of a reply body; ExtenderError when it is empty or not JSON."""
    if not data.strip():
        raise ExtenderError("empty reply (expected JSON)")
    try:
        return json.loads(data)
    except (ValueError, RecursionError) as exc:  # UnicodeDecodeError is a ValueError
        raise ExtenderError(f"invalid JSON in reply: {exc}") from None


def _shown(value: Any) -> str:
    """A value from a reply, as JSON cut short, for an error message."""
    try:
        text = json.dumps(value, ensure_ascii=False)
    except (TypeError, ValueError, RecursionError):
        text = type(value).__name__
    return text if len(text) <= _MAX_SHOWN else f"{text[: _MAX_SHOWN - 3]}..."


def _quoted(text: str) -> str:
    """An extender's own words, cut short."""
    return text if len(text) <= _MAX_QUOTED else f"{text[:_MAX_QUOTED]}... ({len(text)} characters)"


def _subject(where: str) -> str:
    """The reply, or one field of it (whose path holds names from the reply: cut short)."""
    if not where:
        return "reply"
    if len(where) > 2 * _MAX_SHOWN:
        where = f"{where[: 2 * _MAX_SHOWN - 3]}..."
    return f'reply field "{where}"'


def _wrong(where: str, expected: str, value: Any) -> ExtenderError:
    return ExtenderError(f"{_subject(where)} must be {expected}, got {_shown(value)}")


def _field(body: Mapping[str, Any], name: str) -> Any:
    """Go's encoding/json matches field names exactly, else case-insensitively; None when absent."""
    if name in body:
        return body[name]
    lower = name.lower()
    return next((v for k, v in body.items() if k.lower() == lower), None)


def _object(value: Any, where: str, zero_if_null: bool = False) -> Mapping[str, Any]:
    if value is None and zero_if_null:
        return {}
    if not isinstance(value, Mapping):
        raise _wrong(where, "an object", value)
    return value


def _list(value: Any, where: str, of: str) -> list[Any]:
    if value is None:
        return []
    if not isinstance(value, list):
        raise _wrong(where, f"a list of {of}", value)
    return value


def _string(value: Any, where: str) -> str:
    if value is None:
        return ""
    if not isinstance(value, str):
        raise _wrong(where, "a string", value)
    return value


def _integer(value: Any, where: str, high: int | None = None) -> int:
    if value is None:
        return 0
    if not isinstance(value, int) or isinstance(value, bool):
        raise _wrong(where, "an integer", value)
    if value < 0 or (high is not None and value > high):
        expected = f"between 0 and {high}" if high is not None else "at least 0"
        raise ExtenderError(f"{_subject(where)} must be {expected}, got {_shown(value)}")
    return value


def _names(value: Any, where: str) -> list[str] | None:
    """A []string that may be null (NodeNames): None when null or absent."""
    if value is None:
        return None
    names = _list(value, where, "strings")
    for i, name in enumerate(names):
        if not isinstance(name, str):
            raise _wrong(f"{where}[{i}]", "a string", name)
    return names


def _reasons(value: Any, where: str) -> dict[str, str]:
    """A FailedNodesMap: node name -> reason."""
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise _wrong(where, "an object of node name to reason", value)
    reasons = {}
    for name, reason in value.items():
        if not isinstance(reason, str):
            raise _wrong(f"{where}.{name}", "a string", reason)
        reasons[name] = _quoted(reason)
    return reasons


@dataclass(frozen=True, slots=True)
class FilterReply:
    """A filter verb's reply (extenderv1.ExtenderFilterResult), checked."""

    nodes: list[str] | None  # the names of Nodes.items; None: no Nodes
    node_names: list[str] | None  # NodeNames; None: null or absent
    failed: dict[str, str]
    failed_unresolvable: dict[str, str]
    error: str


def read_filter_reply(reply: Any) -> FilterReply:
    """Check a decoded filter reply; ExtenderError names the first field of the wrong type."""
    body = _object(reply, "")
    nodes: list[str] | None = None
    node_list = _field(body, "Nodes")
    if node_list is not None:
        items = _list(_field(_object(node_list, "Nodes"), "items"), "Nodes.items", "Node objects")
        nodes = []
        for i, item in enumerate(items):
            where = f"Nodes.items[{i}].metadata"
            meta = _object(_field(_object(item, f"Nodes.items[{i}]"), "metadata"), where, zero_if_null=True)
            nodes.append(_string(_field(meta, "name"), f"{where}.name"))
    return FilterReply(
        nodes,
        _names(_field(body, "NodeNames"), "NodeNames"),
        _reasons(_field(body, "FailedNodes"), "FailedNodes"),
        _reasons(_field(body, "FailedAndUnresolvableNodes"), "FailedAndUnresolvableNodes"),
        _string(_field(body, "Error"), "Error"),
    )


def read_prioritize_reply(reply: Any) -> list[tuple[str, int]]:
    """Check a decoded prioritize reply (extenderv1.HostPriorityList): (host, score 0..10) pairs."""
    if not isinstance(reply, list):
        raise _wrong("", "a list of HostPriority objects", reply)
    scores = []
    for i, entry in enumerate(reply):
        entry = _object(entry, f"[{i}]")
        host = _string(_field(entry, "Host"), f"[{i}].Host")
        scores.append((host, _integer(_field(entry, "Score"), f"[{i}].Score", MAX_EXTENDER_PRIORITY)))
    return scores


def read_preempt_reply(reply: Any) -> dict[str, tuple[list[str], int]]:
    """Check a decoded preempt reply (extenderv1.ExtenderPreemptionResult): node -> (the victims'
    UIDs, NumPDBViolations)."""
    meta = _field(_object(reply, ""), "NodeNameToMetaVictims")
    accepted = _object(meta, "NodeNameToMetaVictims", zero_if_null=True)
    found = {}
    for name, victims in accepted.items():
        where = f"NodeNameToMetaVictims.{name}"
        victims = _object(victims, where)  # Go's nil *MetaVictims would not survive either
        uids = [
            _string(_field(_object(pod, f"{where}.Pods[{i}]"), "UID"), f"{where}.Pods[{i}].UID")
            for i, pod in enumerate(_list(_field(victims, "Pods"), f"{where}.Pods", "MetaPod objects"))
        ]
        found[name] = (uids, _integer(_field(victims, "NumPDBViolations"), f"{where}.NumPDBViolations"))
    return found


def read_bind_reply(reply: Any) -> str:
    """Check a decoded bind reply (extenderv1.ExtenderBindingResult): its Error, "" when none."""
    return _string(_field(_object(reply, ""), "Error"), "Error")


# ------------------------------------------------------------------------------- transport

# What a transport reads of one reply at most: a longer one fails the call unread.
MAX_REPLY_BYTES = 10 * 1024 * 1024


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
                raise ExtenderError(f"error in reply: {_quoted(reply.error)}")
            by_name = {n.name: n for n in nodes}
            names = reply.nodes
            if self.config.node_cache_capable and reply.node_names is not None:
                names = reply.node_names
            fitting: dict[str, NodeInfo] = {}
            for name in names or ():
                info = by_name.get(name)
                if info is None:
                    raise ExtenderError(
                        f"claims a filtered node {_shown(name)} which is not found in the input node list"
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
                    raise ExtenderError(f"claims to preempt on node {_shown(name)}, which is not found")
                pods = []
                for uid in uids:
                    victim = info.pods.get(uid)
                    if victim is None:
                        raise ExtenderError(
                            f"claims to preempt pod (UID: {_shown(uid)}) on node {_shown(name)}, "
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
                raise ExtenderError(f"error in reply: {_quoted(error)}")

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


def build_extenders(raw: Any, transport: TransportFactory | None = None) -> tuple[HTTPExtender, ...]:
    """All `extenders` entries, ignorable ones last (as 1.20 orders them), each with a transport from
    `transport` (None: validated only, not callable); raises ArgumentError with the entry's index in
    its field (`[2].weight`)."""
    if raw is None:
        return ()
    if not isinstance(raw, list):
        raise ArgumentError("", f"must be a list, got {raw!r}")
    configs = []
    for i, entry in enumerate(raw):
        try:
            configs.append(parse_extender(entry))
        except ArgumentError as exc:
            raise ArgumentError(f"[{i}].{exc.field}" if exc.field else f"[{i}]", exc.message) from exc
    binders = sum(1 for c in configs if c.bind_verb)
    if binders > 1:
        raise ArgumentError(
            "", f"found {binders} extenders implementing bind: only one extender can implement bind"
        )
    seen: dict[str, int] = {}
    for i, config in enumerate(configs):
        for name, _ in config.managed_resources:
            if name in seen and seen[name] != i:
                raise ArgumentError(
                    f"[{i}].managedResources", f"duplicate extender managed resource name {name!r}"
                )
            seen[name] = i
    try:
        extenders = [HTTPExtender(c, transport(c) if transport is not None else None) for c in configs]
    except (OSError, ValueError) as exc:
        raise ArgumentError("", str(exc)) from exc
    return tuple(e for e in extenders if not e.ignorable) + tuple(e for e in extenders if e.ignorable)


def ignored_resources(extenders: Sequence[HTTPExtender]) -> frozenset[str]:
    """The managed resources marked ignoredByScheduler: PodFitsResources leaves them out."""
    return frozenset(name for e in extenders for name, ignored in e.config.managed_resources if ignored)


__all__ = [
    "MAX_REPLY_BYTES",
    "ExtenderConfig",
    "ExtenderError",
    "ExtenderOutcome",
    "ExtenderTransport",
    "FilterReply",
    "HTTPExtender",
    "NoTransportError",
    "TLSConfig",
    "TransportFactory",
    "Victims",
    "build_extenders",
    "decode_reply",
    "ignored_resources",
    "parse_extender",
    "parse_http_timeout",
    "read_bind_reply",
    "read_filter_reply",
    "read_preempt_reply",
    "read_prioritize_reply",
    "run_filters",
    "run_preemption",
    "run_prioritizers",
]
