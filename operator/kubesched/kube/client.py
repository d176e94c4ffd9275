"""Connecting to the API server: one client configuration shared by Kopf and our own requests."""

from __future__ import annotations

import asyncio
import json
import os
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import kopf
from kubernetes_asyncio import client, config

from kubesched.kube.early_listing import IN_CLUSTER_TOKEN, environment_proxy

# Replies longer than this (characters of JSON) are decoded off the event loop.
BIG_BODY = 1 << 20
# Patch content types. A strategic merge patch merges lists by key (a pod's conditions); a JSON
# merge patch replaces them, and is the only kind custom resources accept.
MERGE_PATCH = "application/merge-patch+json"
STRATEGIC_MERGE_PATCH = "application/strategic-merge-patch+json"


async def load_configuration(kubeconfig: str | None, context: str | None = None) -> client.Configuration:
    """From --kubeconfig, then $KUBECONFIG, then the in-cluster service account; `context` picks a
    kubeconfig context other than the current one."""
    conf = client.Configuration()
    path = kubeconfig or os.environ.get("KUBECONFIG")
    if path:
        await config.load_kube_config(config_file=path, context=context, client_configuration=conf)
    elif IN_CLUSTER_TOKEN.exists() and context is None:
        config.load_incluster_config(client_configuration=conf)  # type: ignore[no-untyped-call]
    else:
        await config.load_kube_config(context=context, client_configuration=conf)
    return conf


def api_client(conf: client.Configuration) -> client.ApiClient:
    """A client that looks up no proxy and no netrc per request.

    The generated client's session trusts the environment, so aiohttp does both lookups in a worker
    thread for every request, two thread hops per bind. A proxy from the environment is resolved
    once here instead, as client-go's ProxyFromEnvironment does; netrc is never read (client-go has
    no such thing either).
    """
    if not conf.proxy:
        conf.proxy = environment_proxy(str(conf.host))
    api = client.ApiClient(conf)
    api.rest_client.pool_manager._trust_env = False
    return api


def connection_info(conf: client.Configuration) -> kopf.ConnectionInfo:
    """The same endpoint and credentials for Kopf's watches."""
    auth = conf.api_key.get("authorization") or conf.api_key.get("BearerToken") or ""
    scheme, _, token = auth.partition(" ")
    return kopf.ConnectionInfo(
        server=str(conf.host),
        ca_path=conf.ssl_ca_cert,
        insecure=not conf.verify_ssl,
        scheme=scheme or None,
        token=token or None,
        certificate_path=conf.cert_file,
        private_key_path=conf.key_file,
        username=conf.username or None,
        password=conf.password or None,
        default_namespace="default",
    )


@dataclass(slots=True)
class TokenBucket:
    """Client-side rate limit like client-go's: `qps` tokens a second, at most `burst` saved up."""

    qps: float
    burst: int
    _tokens: float = field(init=False)
    _stamp: float = field(init=False, default_factory=time.monotonic)
    _lock: asyncio.Lock = field(init=False, default_factory=asyncio.Lock)

    def __post_init__(self) -> None:
        self._tokens = float(self.burst)

    async def acquire(self) -> None:
        if self.qps <= 0:
            return
        async with self._lock:
            now = time.monotonic()
            self._tokens = min(self.burst, self._tokens + (now - self._stamp) * self.qps)
            self._stamp = now
            self._tokens -= 1
            if self._tokens < 0:
                # Waiting while holding the lock keeps the requests in arrival order.
                await asyncio.sleep(-self._tokens / self.qps)


async def request(
    api: client.ApiClient,
    method: str,
    path: str,
    body: Any = None,
    *,
    query: Sequence[tuple[str, Any]] = (),
    content_type: str = "application/json",
    timeout: float = 30.0,
) -> tuple[int, Any]:
    """One API request with raw JSON in and out: (status, parsed body or error message).

    The generated client would parse replies into models, and some it cannot parse (a
    successful binding returns a Status, not a Binding); the raw path also skips that cost.
    """
    response = await api.call_api(
        path,
        method,
        query_params=list(query),
        header_params={"Content-Type": content_type, "Accept": "application/json"},
        body=body,
        auth_settings=["BearerToken"],
        _preload_content=False,
        _request_timeout=timeout,
    )
    try:
        text = await response.text()
        status = int(response.status)
    finally:
        response.release()
    try:
        if len(text) > BIG_BODY:
            # A listing served by the watch cache comes in one piece, and a large cluster's takes long
            # enough to decode to stall the loop. In a worker thread the GIL changes hands every few
            # milliseconds, so health probes and the rest of the loop keep being served meanwhile.
            parsed = await asyncio.get_running_loop().run_in_executor(None, json.loads, text)
        else:
            parsed = json.loads(text) if text else None
    except ValueError:
        parsed = text
    if status >= 300 and isinstance(parsed, dict):
        return status, str(parsed.get("message") or text)
    return status, parsed
