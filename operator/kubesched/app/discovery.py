"""Which of the kinds the plugins read (model/kinds.py) the API server serves, found with API
discovery: only those are listed and watched, so that a version the server lacks costs neither a
request nor a warning (1.20 serves PodDisruptionBudgets as policy/v1beta1 only, 1.25+ as policy/v1 only,
and no CSIStorageCapacity)."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence, Set
from typing import Any

import structlog

from kubesched.kube.client import Api, request
from kubesched.model.kinds import WATCHED_OBJECTS, WatchedKind

log = structlog.get_logger(__name__)


def served_group_versions(discovery: Any) -> frozenset[str]:
    """The `group/version`s an APIGroupList (the reply to GET /apis) lists; ValueError if it is not one."""
    groups = discovery.get("groups") if isinstance(discovery, Mapping) else None
    if not isinstance(groups, list):
        raise ValueError(f"not an APIGroupList: {str(discovery)[:200]}")
    return frozenset(
        str(version.get("groupVersion"))
        for group in groups
        if isinstance(group, Mapping)
        for version in group.get("versions") or ()
        if isinstance(version, Mapping)
    )


def served_resources(group_version: str, discovery: Any) -> frozenset[str]:
    """The `group/version/plural`s an APIResourceList (the reply to GET /apis/<group>/<version>)
    lists; ValueError if it is not one."""
    resources = discovery.get("resources") if isinstance(discovery, Mapping) else None
    if not isinstance(resources, list):
        raise ValueError(f"not an APIResourceList: {str(discovery)[:200]}")
    return frozenset(
        f"{group_version}/{resource.get('name')}" for resource in resources if isinstance(resource, Mapping)
    )


def kinds_served(kinds: Sequence[WatchedKind], resources: Set[str]) -> tuple[WatchedKind, ...]:
    """The kinds of the core API, and the others whose `group/version/plural` is in `resources`."""
    return tuple(kind for kind in kinds if not kind.group or f"{kind.api_version}/{kind.plural}" in resources)


async def _discover(api: Api, path: str) -> Any:
    status, body = await request(api, "GET", path, timeout=10.0)
    if status != 200:
        raise RuntimeError(f"GET {path} answered {status}: {body}")
    return body


async def served_kinds(api: Api, kinds: Sequence[WatchedKind] = WATCHED_OBJECTS) -> tuple[WatchedKind, ...]:
    """`kinds` but those the server does not serve, found with API discovery; all of `kinds` when
    it fails (a watch whose kind the server then answers 404 for stops after one log line). A group
    version served is not enough: 1.20's storage.k8s.io/v1 has no CSIStorageCapacity, so each group
    version holding one of `kinds` is asked for its resources, all at once."""
    try:
        group_versions = served_group_versions(await _discover(api, "/apis"))
        asked = sorted({k.api_version for k in kinds if k.group and k.api_version in group_versions})
        replies = await asyncio.gather(*(_discover(api, f"/apis/{gv}") for gv in asked))
        resources: set[str] = set()
        for group_version, reply in zip(asked, replies, strict=True):
            resources |= served_resources(group_version, reply)
    except Exception as exc:
        log.debug("api_discovery_failed", error=repr(exc), effect="every version of each kind is watched")
        return tuple(kinds)
    return kinds_served(kinds, resources)
