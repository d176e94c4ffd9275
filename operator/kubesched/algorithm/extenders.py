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

Calls are plain blocking HTTP made from the algorithm's executor thread (the event loop never
waits on them), each bounded by the extender's `httpTimeout` (default 5 s) as a total deadline.
A filter call that fails or times out is skipped when the extender is `ignorable`, and otherwise
makes the pod unschedulable this cycle with a message naming the extender; a failing prioritize
call is ignored, as in 1.20; a failing preempt call is skipped when the extender is ignorable,
and otherwise stops that preemption. Ignorable extenders are called after the others.

Differences from 1.20: `httpTimeout` also takes a duration string ("500ms", "2s", "1m") besides
Go's integer nanoseconds; the Pod and Node objects sent are rebuilt from kubesched's model
(metadata with labels, annotations and owner references, the whole spec; for nodes also the whole
status), not the informer's copies; the `NumPDBViolations` a preempt call answers is kept (1.20
drops it to 0; later releases keep it).
"""

from __future__ import annotations

import base64
import http.client
import json
import os
import queue
import re
import socket
import ssl
import tempfile
import threading
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import dataclass, field
from typing import Any, Protocol
from urllib.parse import urlsplit

import structlog

from kubesched.model.nodeinfo import NodeInfo
from kubesched.model.objects import Node, Pod
from kubesched.model.selectors import qualified_name_error
from kubesched.plugins.arguments import ArgumentError, require_bool, require_int, require_object, require_str

log = structlog.get_logger(__name__)

DEFAULT_TIMEOUT = 5.0
MAX_EXTENDER_PRIORITY = 10
MAX_NODE_SCORE = 100
_DURATION = re.compile(r"^(?:(\d+(?:\.\d+)?)(ns|us|µs|ms|s|m|h))+$")
_DURATION_PART = re.compile(r"(\d+(?:\.\d+)?)(ns|us|µs|ms|s|m|h)")
_UNIT_SECONDS = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}

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


def parse_duration(value: Any, field: str) -> float:
    """Seconds from Go's integer nanoseconds or a Go duration string; 0 means the default."""
    if isinstance(value, int) and not isinstance(value, bool):
        seconds = value / 1e9
    elif isinstance(value, str) and _DURATION.match(value):
        seconds = sum(float(n) * _UNIT_SECONDS[u] for n, u in _DURATION_PART.findall(value))
    else:
        raise ArgumentError(field, f'must be a duration (integer nanoseconds or e.g. "5s"), got {value!r}')
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
        http_timeout=DEFAULT_TIMEOUT if timeout is None else parse_duration(timeout, "httpTimeout"),
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


def _field(body: Any, name: str) -> Any:
    """Go's encoding/json matches field names case-insensitively; so do we."""
    if not isinstance(body, Mapping):
        return None
    if name in body:
        return body[name]
    lower = name.lower()
    return next((v for k, v in body.items() if str(k).lower() == lower), None)


# ------------------------------------------------------------------------------- transport


class _HTTPSConnection(http.client.HTTPSConnection):
    """An HTTPS connection that can verify (and send SNI for) a name other than the URL's host."""

    def __init__(
        self, host: str, port: int | None, timeout: float, context: ssl.SSLContext, server_name: str
    ):
        super().__init__(host, port, timeout=timeout, context=context)
        self._context = context
        self._server_name = server_name or host

    def connect(self) -> None:
        sock = socket.create_connection((self.host, self.port), self.timeout)
        self.sock = self._context.wrap_socket(sock, server_hostname=self._server_name)


def _ssl_context(config: ExtenderConfig) -> ssl.SSLContext:
    """makeTransport: HTTPS without a CA (or with `insecure`) does not verify the server."""
    tls = config.tls or TLSConfig()
    context = ssl.create_default_context()
    has_ca = bool(tls.ca_file or tls.ca_data)
    if tls.insecure or (config.enable_https and not has_ca):
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    if tls.ca_file:
        context.load_verify_locations(cafile=tls.ca_file)
    if tls.ca_data:
        context.load_verify_locations(cadata=tls.ca_data.decode())
    if tls.cert_file or tls.cert_data:
        with tempfile.TemporaryDirectory() as tmp:
            cert, key = tls.cert_file, tls.key_file
            if tls.cert_data:
                cert = os.path.join(tmp, "cert.pem")
                with open(cert, "wb") as f:
                    f.write(tls.cert_data)
            if tls.key_data:
                key = os.path.join(tmp, "key.pem")
                with open(key, "wb") as f:
                    f.write(tls.key_data)
            context.load_cert_chain(cert, key or None)
    return context


_WORKERS: ThreadPoolExecutor | None = None
_WORKERS_LOCK = threading.Lock()


def _workers() -> ThreadPoolExecutor:
    """The threads that make the HTTP calls, shared by every extender of every policy (a policy
    reload must not leave threads behind); a call that hangs holds one for at most its timeout."""
    global _WORKERS
    with _WORKERS_LOCK:
        if _WORKERS is None:
            _WORKERS = ThreadPoolExecutor(max_workers=16, thread_name_prefix="extender")
        return _WORKERS


class HTTPExtender:
    """One configured extender: its verbs, and a small pool of keep-alive connections."""

    def __init__(self, config: ExtenderConfig) -> None:
        self.config = config
        parts = urlsplit(config.url_prefix)
        self._https = parts.scheme == "https"
        self._host = parts.hostname or ""
        self._port = parts.port
        self._path = parts.path.rstrip("/")
        self._context = _ssl_context(config) if self._https else None
        self._idle: queue.SimpleQueue[http.client.HTTPConnection] = queue.SimpleQueue()
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
        if not self.config.filter_verb:
            return list(nodes), {}
        result = self._send(self.config.filter_verb, self._args(pod, nodes))
        error = _field(result, "Error")
        if error:
            raise ExtenderError(str(error))
        by_name = {n.name: n for n in nodes}
        names: list[str] | None = None
        node_names = _field(result, "NodeNames")
        node_list = _field(result, "Nodes")
        if self.config.node_cache_capable and node_names is not None:
            names = [str(n) for n in node_names]
        elif node_list is not None:
            names = [
                str((_field(item, "metadata") or {}).get("name") or "")
                for item in _field(node_list, "items") or ()
            ]
        fitting = []
        for name in names or ():
            if name not in by_name:
                raise ExtenderError(
                    f"extender {self.name!r} claims a filtered node {name!r} "
                    "which is not found in the input node list"
                )
            fitting.append(by_name[name])
        failed = _field(result, "FailedNodes") or {}
        if not isinstance(failed, Mapping):
            raise ExtenderError(f"FailedNodes must be an object, got {failed!r}")
        return fitting, {str(k): str(v) for k, v in failed.items()}

    def prioritize(self, pod: Pod, nodes: Sequence[NodeInfo]) -> dict[str, int]:
        """Host -> the extender's score (0..10) times its weight."""
        if not self.config.prioritize_verb:
            return {}
        result = self._send(self.config.prioritize_verb, self._args(pod, nodes))
        if not isinstance(result, list):
            raise ExtenderError(f"prioritize answered {type(result).__name__}, not a list of HostPriority")
        scores: dict[str, int] = {}
        for entry in result:
            host, score = _field(entry, "Host"), _field(entry, "Score")
            if not isinstance(host, str) or not isinstance(score, int) or isinstance(score, bool):
                raise ExtenderError(f"invalid HostPriority {entry!r}")
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
        result = self._send(self.config.preempt_verb, args)
        accepted = _field(result, "NodeNameToMetaVictims") or {}
        if not isinstance(accepted, Mapping):
            raise ExtenderError(f"NodeNameToMetaVictims must be an object, got {accepted!r}")
        out: dict[str, Victims] = {}
        for name, meta_victims in accepted.items():
            info = nodes.get(str(name))
            if info is None:
                raise ExtenderError(f'node "{name}" not found')
            pods = []
            for meta_pod in _field(meta_victims, "Pods") or ():
                uid = str(_field(meta_pod, "UID") or "")
                victim = info.pods.get(uid)
                if victim is None:
                    raise ExtenderError(
                        f"extender: {self.name} claims to preempt pod (UID: {uid}) on node: {name}, "
                        "but the pod is not found on that node"
                    )
                pods.append(victim)
            violations = _field(meta_victims, "NumPDBViolations")
            count = violations if isinstance(violations, int) and not isinstance(violations, bool) else 0
            out[str(name)] = Victims(tuple(pods), count)
        return out

    def bind(self, pod: Pod, node_name: str) -> None:
        """Bind through the extender's bindVerb; raises ExtenderError with its reason."""
        args = {"PodName": pod.name, "PodNamespace": pod.namespace, "PodUID": pod.uid, "Node": node_name}
        result = self._send(self.config.bind_verb, args)
        error = _field(result, "Error")
        if error:
            raise ExtenderError(str(error))

    # --- HTTP --------------------------------------------------------------------------------------

    def _send(self, verb: str, args: Mapping[str, Any]) -> Any:
        """POST the JSON; the whole exchange must finish within httpTimeout."""
        body = json.dumps(args, separators=(",", ":")).encode()
        url = f"{self.config.url_prefix.rstrip('/')}/{verb}"
        future = _workers().submit(self._exchange, verb, url, body)
        try:
            return future.result(timeout=self.config.http_timeout)
        except FutureTimeout:
            # The worker gives up on its own when its socket times out; the caller does not wait.
            raise ExtenderError(
                f"failed {verb} with extender at URL {url}: timed out after {self.config.http_timeout:g}s"
            ) from None

    def _connection(self) -> http.client.HTTPConnection:
        try:
            return self._idle.get_nowait()
        except queue.Empty:
            pass
        # The caller's deadline is httpTimeout; the socket's is a little later, so that a call
        # that hangs always ends as "timed out" for the caller and then frees its thread.
        timeout = self.config.http_timeout + 1.0
        if self._https:
            assert self._context is not None
            tls = self.config.tls or TLSConfig()
            return _HTTPSConnection(self._host, self._port, timeout, self._context, tls.server_name)
        return http.client.HTTPConnection(self._host, self._port, timeout=timeout)

    def _exchange(self, verb: str, url: str, body: bytes) -> Any:
        conn = self._connection()
        try:
            conn.request(
                "POST", f"{self._path}/{verb}", body=body, headers={"Content-Type": "application/json"}
            )
            response = conn.getresponse()
            data = response.read()
        except (OSError, http.client.HTTPException) as exc:
            conn.close()
            raise ExtenderError(f"failed {verb} with extender at URL {url}: {exc!r}") from exc
        if response.will_close:
            conn.close()
        else:
            self._idle.put(conn)
        if response.status != 200:
            raise ExtenderError(f"failed {verb} with extender at URL {url}, code {response.status}")
        try:
            return json.loads(data)
        except ValueError as exc:
            raise ExtenderError(f"failed {verb} with extender at URL {url}: invalid JSON: {exc}") from exc

    def close(self) -> None:
        while True:
            try:
                self._idle.get_nowait().close()
            except queue.Empty:
                break


@dataclass(frozen=True, slots=True)
class ExtenderOutcome:
    """What the extenders made of one pod's feasible nodes (kept for `explain`)."""

    feasible: list[NodeInfo]
    failed: dict[str, list[str]] = field(default_factory=dict)
    skipped: dict[str, str] = field(default_factory=dict)  # ignorable extender -> its error


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
            if extender.ignorable:
                log.warning("extender_skipped", extender=extender.name, pod=pod.key, error=str(exc))
                outcome.skipped[extender.name] = str(exc)
                continue
            raise ExtenderError(f"extender {extender.name} failed: {exc}") from exc
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
            log.info("extender_prioritize_failed", extender=extender.name, pod=pod.key, error=str(exc))
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
            if extender.ignorable:
                log.warning("extender_skipped", extender=extender.name, pod=pod.key, error=str(exc))
                continue
            raise ExtenderError(f"extender {extender.name} failed: {exc}") from exc
    return remaining


def build_extenders(raw: Any) -> tuple[HTTPExtender, ...]:
    """All `extenders` entries, ignorable ones last (as 1.20 orders them); raises ArgumentError
    with the entry's index in its field (`[2].weight`)."""
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
        extenders = [HTTPExtender(c) for c in configs]
    except (OSError, ssl.SSLError, ValueError) as exc:
        raise ArgumentError("", f"cannot set up TLS: {exc}") from exc
    return tuple(e for e in extenders if not e.ignorable) + tuple(e for e in extenders if e.ignorable)


def ignored_resources(extenders: Sequence[HTTPExtender]) -> frozenset[str]:
    """The managed resources marked ignoredByScheduler: PodFitsResources leaves them out."""
    return frozenset(name for e in extenders for name, ignored in e.config.managed_resources if ignored)


__all__ = [
    "ExtenderConfig",
    "ExtenderError",
    "ExtenderOutcome",
    "HTTPExtender",
    "Victims",
    "build_extenders",
    "ignored_resources",
    "parse_extender",
    "run_filters",
    "run_preemption",
    "run_prioritizers",
]
