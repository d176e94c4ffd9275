"""The `extenders` entries of a legacy Policy (1.20's LegacyExtender), checked with the shape kit
and made into algorithm/extenders.py's HTTPExtenders, each with the transport the caller passes.

As 1.20 decodes them, an entry's keys match case-insensitively (enableHttps, enableHTTPS...).
Stricter: unknown keys are errors. `httpTimeout` also takes a Go duration string ("500ms", "2s",
"1m") besides Go's integer nanoseconds.
"""

from __future__ import annotations

import base64
from collections.abc import Mapping
from typing import Any
from urllib.parse import urlsplit

from kubesched.algorithm.extenders import (
    DEFAULT_TIMEOUT,
    ExtenderConfig,
    HTTPExtender,
    TLSConfig,
    TransportFactory,
)
from kubesched.model.duration import parse_go_duration
from kubesched.model.selectors import qualified_name_error
from kubesched.model.shape import FieldError, array, boolean, integer, join, known_fields, mapping, string

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


def _entry(raw: Any, path: str, accepted: tuple[str, ...]) -> dict[str, Any]:
    """An object of `accepted` keys, matched case-insensitively as Go's encoding/json does."""
    return known_fields(mapping(raw, path), accepted, path, any_case=True)


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
            raise FieldError(field, wrong) from None
    else:
        raise FieldError(field, wrong)
    if seconds < 0:
        raise FieldError(field, f"must not be negative, got {value!r}")
    return seconds or DEFAULT_TIMEOUT


def _bytes(value: Any, field: str) -> bytes:
    """A Go []byte field: base64 in JSON (a PEM string is also taken as is)."""
    if value is None or value == "":
        return b""
    if not isinstance(value, str):
        raise FieldError(field, f"must be a base64 string, got {value!r}")
    if value.lstrip().startswith("-----BEGIN"):
        return value.encode()
    try:
        return base64.b64decode(value, validate=True)
    except ValueError as exc:
        raise FieldError(field, f"must be base64: {exc}") from exc


def _tls(raw: Any, path: str) -> TLSConfig | None:
    if raw is None:
        return None
    fields = _entry(raw, path, _TLS_FIELDS)

    def text(name: str) -> str:
        return string(fields.get(name), f"{path}.{name}", empty_ok=True, null_ok=True)

    return TLSConfig(
        boolean(fields.get("insecure", False), f"{path}.insecure"),
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
    found: list[tuple[str, bool]] = []
    for i, entry in enumerate(array(raw, path, null_ok=True)):
        where = f"{path}[{i}]"
        fields = _entry(entry, where, ("name", "ignoredByScheduler"))
        name = string(fields.get("name"), f"{where}.name")
        error = _extended_resource_error(name)
        if error is not None:
            raise FieldError(f"{where}.name", error)
        if any(name == seen for seen, _ in found):
            raise FieldError(f"{where}.name", f"duplicate extender managed resource name {name!r}")
        found.append((name, boolean(fields.get("ignoredByScheduler", False), f"{where}.ignoredByScheduler")))
    return tuple(found)


def _verb(fields: Mapping[str, Any], name: str) -> str:
    value = fields.get(name)
    if value is None or value == "":
        return ""
    return string(value, name)


def parse_extender(raw: Any) -> ExtenderConfig:
    """One `extenders` entry; raises FieldError naming the field relative to the entry."""
    fields = _entry(raw, "", _FIELDS)
    url = string(fields.get("urlPrefix"), "urlPrefix")
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise FieldError("urlPrefix", f"must be an http:// or https:// URL, got {url!r}")
    weight = integer(fields.get("weight", 0), "weight")
    prioritize = _verb(fields, "prioritizeVerb")
    if prioritize and weight <= 0:
        raise FieldError("weight", f"must have a positive weight applied to it, got {weight}")
    timeout = fields.get("httpTimeout")
    return ExtenderConfig(
        url_prefix=url,
        filter_verb=_verb(fields, "filterVerb"),
        preempt_verb=_verb(fields, "preemptVerb"),
        prioritize_verb=prioritize,
        bind_verb=_verb(fields, "bindVerb"),
        weight=weight,
        enable_https=boolean(fields.get("enableHTTPS", False), "enableHTTPS"),
        tls=_tls(fields.get("tlsConfig"), "tlsConfig"),
        http_timeout=DEFAULT_TIMEOUT if timeout is None else parse_http_timeout(timeout, "httpTimeout"),
        node_cache_capable=boolean(fields.get("nodeCacheCapable", False), "nodeCacheCapable"),
        managed_resources=_managed_resources(fields.get("managedResources"), "managedResources"),
        ignorable=boolean(fields.get("ignorable", False), "ignorable"),
    )


def build_extenders(raw: Any, transport: TransportFactory | None = None) -> tuple[HTTPExtender, ...]:
    """All `extenders` entries, ignorable ones last (as 1.20 orders them), each with a transport from
    `transport` (None: validated only, not callable); raises FieldError with the entry's index in
    its field (`[2].weight`)."""
    configs = []
    for i, entry in enumerate(array(raw, "", null_ok=True)):
        try:
            configs.append(parse_extender(entry))
        except FieldError as exc:
            raise exc.under(join("", i)) from exc
    binders = sum(1 for c in configs if c.bind_verb)
    if binders > 1:
        raise FieldError(
            "", f"found {binders} extenders implementing bind: only one extender can implement bind"
        )
    seen: dict[str, int] = {}
    for i, config in enumerate(configs):
        for name, _ in config.managed_resources:
            if name in seen and seen[name] != i:
                raise FieldError(
                    f"[{i}].managedResources", f"duplicate extender managed resource name {name!r}"
                )
            seen[name] = i
    try:
        extenders = [HTTPExtender(c, transport(c) if transport is not None else None) for c in configs]
    except (OSError, ValueError) as exc:
        raise FieldError("", str(exc)) from exc
    return tuple(e for e in extenders if not e.ignorable) + tuple(e for e in extenders if e.ignorable)


__all__ = ["build_extenders", "parse_extender", "parse_http_timeout"]
