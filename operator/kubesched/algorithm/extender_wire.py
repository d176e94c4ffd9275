"""What scheduler extenders are sent and what their replies are held to: kube-scheduler 1.20's wire
format (kube-scheduler/extender/v1). Pure: bodies in, bytes out, decoded replies checked."""

from __future__ import annotations

import functools
import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, ParamSpec, TypeVar

from kubesched.model.objects import Node, Pod
from kubesched.model.shape import FieldError, array, integer, mapping, string, wrong

MAX_EXTENDER_PRIORITY = 10
# What a transport reads of one reply at most: a longer one fails the call unread.
MAX_REPLY_BYTES = 10 * 1024 * 1024


class ExtenderError(Exception):
    """A call to an extender failed: transport, HTTP status, undecodable or erroneous answer."""


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


def shown(value: Any) -> str:
    """A value from a reply, as JSON cut short, for an error message."""
    try:
        text = json.dumps(value, ensure_ascii=False)
    except (TypeError, ValueError, RecursionError):
        text = type(value).__name__
    return text if len(text) <= _MAX_SHOWN else f"{text[: _MAX_SHOWN - 3]}..."


def quoted(text: str) -> str:
    """An extender's own words, cut short."""
    return text if len(text) <= _MAX_QUOTED else f"{text[:_MAX_QUOTED]}... ({len(text)} characters)"


def _subject(where: str) -> str:
    """The reply, or one field of it (whose path holds names from the reply: cut short)."""
    if not where:
        return "reply"
    if len(where) > 2 * _MAX_SHOWN:
        where = f"{where[: 2 * _MAX_SHOWN - 3]}..."
    return f'reply field "{where}"'


def _field(body: Mapping[str, Any], name: str) -> Any:
    """Go's encoding/json matches field names exactly, else case-insensitively; None when absent."""
    if name in body:
        return body[name]
    lower = name.lower()
    return next((v for k, v in body.items() if k.lower() == lower), None)


_P = ParamSpec("_P")
_T = TypeVar("_T")


def _reader(read: Callable[_P, _T]) -> Callable[_P, _T]:
    """The shape kit's FieldError as the ExtenderError of the call: `reply field "X" must be ...`."""

    @functools.wraps(read)
    def checked(*args: _P.args, **kwargs: _P.kwargs) -> _T:
        try:
            return read(*args, **kwargs)
        except FieldError as exc:
            raise ExtenderError(f"{_subject(exc.field)} {exc.message}") from None

    return checked


def _object(value: Any, where: str, null_ok: bool = False) -> Mapping[str, Any]:
    return mapping(value, where, null_ok=null_ok, shown=shown)


def _list(value: Any, where: str, of: str) -> list[Any]:
    return array(value, where, null_ok=True, of=of, shown=shown)


def _string(value: Any, where: str) -> str:
    return string(value, where, empty_ok=True, null_ok=True, shown=shown)


def _names(value: Any, where: str) -> list[str] | None:
    """A []string that may be null (NodeNames): None when null or absent."""
    if value is None:
        return None
    names = _list(value, where, "strings")
    for i, name in enumerate(names):
        if not isinstance(name, str):
            raise wrong(f"{where}[{i}]", "a string", name, shown)
    return names


def _reasons(value: Any, where: str) -> dict[str, str]:
    """A FailedNodesMap: node name -> reason."""
    reasons = mapping(value, where, null_ok=True, expected="an object of node name to reason", shown=shown)
    return {name: quoted(_string_of(reason, f"{where}.{name}")) for name, reason in reasons.items()}


def _string_of(value: Any, where: str) -> str:
    """A string that may not be null."""
    if not isinstance(value, str):
        raise wrong(where, "a string", value, shown)
    return value


@dataclass(frozen=True, slots=True)
class FilterReply:
    """A filter verb's reply (extenderv1.ExtenderFilterResult), checked."""

    nodes: list[str] | None  # the names of Nodes.items; None: no Nodes
    node_names: list[str] | None  # NodeNames; None: null or absent
    failed: dict[str, str]
    failed_unresolvable: dict[str, str]
    error: str


@_reader
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
            meta = _object(_field(_object(item, f"Nodes.items[{i}]"), "metadata"), where, null_ok=True)
            nodes.append(_string(_field(meta, "name"), f"{where}.name"))
    return FilterReply(
        nodes,
        _names(_field(body, "NodeNames"), "NodeNames"),
        _reasons(_field(body, "FailedNodes"), "FailedNodes"),
        _reasons(_field(body, "FailedAndUnresolvableNodes"), "FailedAndUnresolvableNodes"),
        _string(_field(body, "Error"), "Error"),
    )


@_reader
def read_prioritize_reply(reply: Any) -> list[tuple[str, int]]:
    """Check a decoded prioritize reply (extenderv1.HostPriorityList): (host, score 0..10) pairs."""
    scores = []
    for i, entry in enumerate(array(reply, "", of="HostPriority objects", shown=shown)):
        entry = _object(entry, f"[{i}]")
        host = _string(_field(entry, "Host"), f"[{i}].Host")
        score = integer(
            _field(entry, "Score"), f"[{i}].Score", 0, MAX_EXTENDER_PRIORITY, null_ok=True, shown=shown
        )
        scores.append((host, score))
    return scores


@_reader
def read_preempt_reply(reply: Any) -> dict[str, tuple[list[str], int]]:
    """Check a decoded preempt reply (extenderv1.ExtenderPreemptionResult): node -> (the victims'
    UIDs, NumPDBViolations)."""
    meta = _field(_object(reply, ""), "NodeNameToMetaVictims")
    accepted = _object(meta, "NodeNameToMetaVictims", null_ok=True)
    found = {}
    for name, victims in accepted.items():
        where = f"NodeNameToMetaVictims.{name}"
        victims = _object(victims, where)  # Go's nil *MetaVictims would not survive either
        uids = [
            _string(_field(_object(pod, f"{where}.Pods[{i}]"), "UID"), f"{where}.Pods[{i}].UID")
            for i, pod in enumerate(_list(_field(victims, "Pods"), f"{where}.Pods", "MetaPod objects"))
        ]
        violations = _field(victims, "NumPDBViolations")
        found[name] = (uids, integer(violations, f"{where}.NumPDBViolations", 0, null_ok=True, shown=shown))
    return found


@_reader
def read_bind_reply(reply: Any) -> str:
    """Check a decoded bind reply (extenderv1.ExtenderBindingResult): its Error, "" when none."""
    return _string(_field(_object(reply, ""), "Error"), "Error")


__all__ = [
    "MAX_EXTENDER_PRIORITY",
    "MAX_REPLY_BYTES",
    "ExtenderError",
    "FilterReply",
    "decode_reply",
    "node_object",
    "pod_object",
    "quoted",
    "read_bind_reply",
    "read_filter_reply",
    "read_preempt_reply",
    "read_prioritize_reply",
    "shown",
]
