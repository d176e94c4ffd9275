"""Connecting to the API server: the scheduler's own small client, and the same endpoint for Kopf.

Every request is raw JSON: the unary ones over kube/http1.py's connection pool, watches over an
aiohttp session (and every request through a proxy). The generated client
(kubernetes_asyncio) parses into model objects the scheduler never reads, and importing them is
the largest import of the start-up. Its kubeconfig loader still reads what kube/kubeconfig.py
cannot (exec plugins, auth providers, ...), imported only then.

Tests and the benchmark harness use the generated client for its API classes, and hand it to the
scheduler's functions as well: both serve as an `Api`, the few calls made of a client here.
"""

from __future__ import annotations

import asyncio
import json
import os
import ssl
import urllib.parse
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any, Protocol

import aiohttp
import msgspec

from kubesched import __version__
from kubesched.kube import http1
from kubesched.kube.kubeconfig import IN_CLUSTER_TOKEN, Endpoint, endpoint, environment_proxy
from kubesched.kube.retry import TokenBucket as TokenBucket  # re-exported: every request's limiter

# Replies longer than this (characters of JSON) are decoded off the event loop.
BIG_BODY = 1 << 20
# Patch content types. A strategic merge patch merges lists by key (a pod's conditions); a JSON
# merge patch replaces them, and is the only kind custom resources accept.
MERGE_PATCH = "application/merge-patch+json"
STRATEGIC_MERGE_PATCH = "application/strategic-merge-patch+json"
USER_AGENT = f"kubesched/{__version__}"
# Replies are read in chunks of this size (the generated client's too): a listing is megabytes.
READ_BUFFER = 1 << 21


class ConfigurationError(RuntimeError):
    """No kubeconfig, or one that does not load."""


@dataclass(slots=True)
class Configuration:
    """Where the API server is and how to authenticate to it."""

    endpoint: Endpoint
    # The Authorization header to send, asked before each request: a kubeconfig read by the
    # generated loader may hold an exec plugin, whose token expires and is renewed there.
    authorization: Callable[[], Awaitable[str | None]] | None = None
    server_hostname: str | None = None  # the certificate's name, when not the server's (tls-server-name)
    proxy: str | None = None
    connection_pool_maxsize: int = 100
    _ssl: ssl.SSLContext | None = field(default=None, repr=False)

    @property
    def host(self) -> str:
        return self.endpoint.url

    def ssl_context(self) -> ssl.SSLContext | None:
        """The TLS settings (None for plain http), made once: reading the certificates may fail."""
        if self._ssl is None and self.endpoint.scheme == "https":
            self._ssl = self.endpoint.ssl_context()
        return self._ssl


async def load_configuration(kubeconfig: str | None, context: str | None = None) -> Configuration:
    """From --kubeconfig, then $KUBECONFIG, then the in-cluster service account; `context` picks a
    kubeconfig context other than the current one."""
    read = endpoint(kubeconfig, context=context)
    if read is not None:
        conf = Configuration(read)
        conf.ssl_context()  # a missing or broken certificate file is reported now, not at the first request
        return conf
    from kubernetes_asyncio import client, config  # the rare kubeconfig: see the module's docstring

    generated = client.Configuration()
    path = kubeconfig or os.environ.get("KUBECONFIG")
    if path and os.pathsep not in path and not os.path.exists(path):
        # The generated loader would log it, then complain of a missing current-context.
        raise ConfigurationError(f"no such kubeconfig file: {path}")
    try:
        if path:
            await config.load_kube_config(config_file=path, context=context, client_configuration=generated)
        elif IN_CLUSTER_TOKEN.exists() and context is None:
            config.load_incluster_config(client_configuration=generated)  # type: ignore[no-untyped-call]
        else:
            await config.load_kube_config(context=context, client_configuration=generated)
    except config.ConfigException as exc:
        raise ConfigurationError(str(exc)) from exc
    return from_generated(generated)


def from_generated(conf: Any) -> Configuration:
    """A configuration of the generated client (kubernetes_asyncio.client.Configuration) as ours."""
    server = urllib.parse.urlsplit(str(conf.host))
    scheme = server.scheme or "https"
    target = Endpoint(
        scheme=scheme,
        host=server.hostname or "",
        port=server.port or (443 if scheme == "https" else 80),
        prefix=server.path.rstrip("/"),
        headers={},
        ca_file=conf.ssl_ca_cert or None,
        cert=(conf.cert_file, conf.key_file or None) if conf.cert_file else None,
        insecure=not conf.verify_ssl,
    )

    async def authorization() -> str | None:
        setting = (await conf.auth_settings()).get("BearerToken") or {}
        value = setting.get("value")
        return str(value) if value else None

    return Configuration(
        target, authorization=authorization, server_hostname=conf.tls_server_name or None, proxy=conf.proxy
    )


class Api(Protocol):
    """What the scheduler asks of a client: ours (ApiClient), or the generated one, whose names
    these are, as tests and the benchmark harness pass it."""

    @property
    def configuration(self) -> Any: ...

    def call_api(  # an awaitable (the generated client's signature says Any)
        self,
        resource_path: str,
        method: str,
        *,
        query_params: list[tuple[str, Any]] | None = None,
        header_params: dict[str, str] | None = None,
        body: Any = None,
        auth_settings: list[str] | None = None,
        _preload_content: bool = ...,
        _request_timeout: float | aiohttp.ClientTimeout | None = None,
    ) -> Any: ...


class ApiClient:
    """Requests to one API server over one aiohttp session, opened on first use (on the loop).

    No proxy or netrc lookup per request: aiohttp would do both in a worker thread for every
    request (two thread hops per bind). A proxy from the environment is resolved once instead, as
    client-go's ProxyFromEnvironment does; netrc is never read (client-go has no such thing).
    """

    def __init__(self, configuration: Configuration) -> None:
        self.configuration = configuration
        if configuration.proxy is None:
            configuration.proxy = environment_proxy(configuration.host)
        self._session: aiohttp.ClientSession | None = None
        self._pool: http1.Pool | None = None

    def _open(self) -> aiohttp.ClientSession:
        if self._session is None:
            conf = self.configuration
            self._session = aiohttp.ClientSession(
                connector=aiohttp.TCPConnector(
                    limit=conf.connection_pool_maxsize, ssl=conf.ssl_context() or False
                ),
                headers={"User-Agent": USER_AGENT},
                trust_env=False,
                read_bufsize=READ_BUFFER,
            )
        return self._session

    async def call_api(
        self,
        resource_path: str,
        method: str,
        *,
        query_params: Sequence[tuple[str, Any]] | None = None,
        header_params: Mapping[str, str] | None = None,
        body: Any = None,
        auth_settings: Sequence[str] | None = None,
        _preload_content: bool = False,
        _request_timeout: float | aiohttp.ClientTimeout | None = None,
    ) -> aiohttp.ClientResponse:
        """Send one request and return the response unread (the caller releases it). The names
        are the generated client's: credentials go along when `auth_settings` names BearerToken
        (client certificates always do); there is no reading into models (`_preload_content`)."""
        if _preload_content:
            raise ValueError("this client returns raw responses only")
        conf = self.configuration
        headers = {"Content-Type": "application/json", **(header_params or {})}
        if auth_settings and "BearerToken" in auth_settings:
            headers.update(conf.endpoint.headers)
            token = await conf.authorization() if conf.authorization is not None else None
            if token:
                headers["Authorization"] = token
        url = conf.host + resource_path
        if query_params:
            url += "?" + urllib.parse.urlencode(list(query_params))
        timeout = _request_timeout if _request_timeout is not None else aiohttp.ClientTimeout()
        if not isinstance(timeout, aiohttp.ClientTimeout):
            timeout = aiohttp.ClientTimeout(total=timeout)
        return await self._open().request(
            method,
            url,
            headers=headers,
            # msgspec: a tenth of json.dumps's time, and bytes, which aiohttp sends without encoding again.
            data=None if body is None else body if isinstance(body, bytes) else msgspec.json.encode(body),
            proxy=conf.proxy,
            server_hostname=conf.server_hostname,
            timeout=timeout,
        )

    async def send(
        self,
        method: str,
        path: str,
        query: Sequence[tuple[str, Any]],
        headers: Mapping[str, str],
        body: Any,
        timeout: float,
    ) -> tuple[int, bytes]:
        """One unary request through the connection pool: (status, body). Credentials always go."""
        conf = self.configuration
        target = urllib.parse.urlsplit(conf.host)
        if self._pool is None:
            self._pool = http1.Pool(
                conf.endpoint.host,
                conf.endpoint.port,
                conf.ssl_context(),
                conf.server_hostname,
                conf.connection_pool_maxsize,
            )
        data = b"" if body is None else body if isinstance(body, bytes) else msgspec.json.encode(body)
        query_string = "?" + urllib.parse.urlencode(list(query)) if query else ""
        lines = [
            f"{method} {target.path}{path}{query_string} HTTP/1.1",
            f"Host: {target.netloc}",
            f"User-Agent: {USER_AGENT}",
            *(f"{name}: {value}" for name, value in {**conf.endpoint.headers, **headers}.items()),
        ]
        token = await conf.authorization() if conf.authorization is not None else None
        if token:
            lines.append(f"Authorization: {token}")
        lines.append(f"Content-Length: {len(data)}\r\n\r\n")
        return await self._pool.send("\r\n".join(lines).encode() + data, timeout)

    def uses_pool(self) -> bool:
        """Whether unary requests go through the pool: not through a proxy, which aiohttp speaks to."""
        return self.configuration.proxy is None

    async def close(self) -> None:
        if self._pool is not None:
            self._pool.close()  # and kept: a request sent after the close fails, as on a closed session
        if self._session is not None:
            await self._session.close()
            self._session = None

    async def __aenter__(self) -> ApiClient:
        return self

    async def __aexit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        await self.close()


def api_client(conf: Configuration | Any) -> ApiClient:
    """A client for `conf`: ours, or the generated client's (whose clients tests pass)."""
    return ApiClient(conf if isinstance(conf, Configuration) else from_generated(conf))


async def request(
    api: Api,
    method: str,
    path: str,
    body: Any = None,
    *,
    query: Sequence[tuple[str, Any]] = (),
    content_type: str = "application/json",
    timeout: float = 30.0,
    decode: Callable[[str], Any] | None = None,
) -> tuple[int, Any]:
    """One API request with raw JSON in and out: (status, parsed body or error message).

    The generated client would parse replies into models, and some it cannot parse (a
    successful binding returns a Status, not a Binding); the raw path also skips that cost.
    `decode` parses a successful reply instead of json.loads (a failure's is parsed whole).
    """
    headers = {"Content-Type": content_type, "Accept": "application/json"}
    if isinstance(api, ApiClient) and api.uses_pool():
        status, data = await api.send(method, path, query, headers, body, timeout)
        text = data.decode(errors="replace")
    else:
        response = await api.call_api(
            path,
            method,
            query_params=list(query),
            header_params=headers,
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
    loads = decode if decode is not None and 200 <= status < 300 else json.loads
    try:
        if len(text) > BIG_BODY:
            # A listing served by the watch cache comes in one piece, and a large cluster's takes long
            # enough to decode to stall the loop. In a worker thread the GIL changes hands every few
            # milliseconds, so health probes and the rest of the loop keep being served meanwhile.
            parsed = await asyncio.get_running_loop().run_in_executor(None, loads, text)
        else:
            parsed = loads(text) if text else None
    except ValueError:
        parsed = text
    if status >= 300 and isinstance(parsed, dict):
        return status, str(parsed.get("message") or text)
    return status, parsed
