"""The start-up's node and pod listings, asked for before the rest of the process is imported.

Importing the scheduler (numpy, aiohttp, Kopf, the plugins) is the longest part of its start, and
the API server has nothing to do meanwhile. `start` sends the watch-cache LISTs that the
initial sync begins with (app/startup.py) from plain threads, first thing in `kubesched run`, so
that the server's work and the transfer overlap the imports. The sync takes a reply when its
request is the very one it would send and the reply came through; otherwise it lists as before.

Only connections this module can read whole are tried: a kubeconfig's server with client
certificates or a bearer token, or the in-cluster service account, and no proxy. Anything else
(exec plugins, auth providers, basic auth, merged kubeconfigs) is left to the client alone.

The standard library, PyYAML and msgspec only: importing more here would delay what it is for.
The replies are decoded with msgspec, which builds the same dicts and lists as `json.loads`, faster:
the decoding lies on the way to the first bind. It leaves out each object's metadata.managedFields,
the server's record of who wrote which field: no scheduler reads it, and at 5,000 nodes it is
nearly half the bytes, which msgspec skips in about a third of the time it takes to build them.
"""

from __future__ import annotations

import base64
import concurrent.futures
import http.client
import os
import ssl
import tempfile
import threading
import urllib.parse
import urllib.request
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypedDict

import yaml

from kubesched.model.kinds import NODES, PODS

IN_CLUSTER_TOKEN = Path("/var/run/secrets/kubernetes.io/serviceaccount/token")
IN_CLUSTER_CA = IN_CLUSTER_TOKEN.with_name("ca.crt")
# Objects per listing request, ours and Kopf's. Each page is parsed in one piece on the event loop,
# and the garbage collector runs inside the parse: the page size bounds how long the loop stalls.
LIST_PAGE = 100

Query = tuple[tuple[str, str], ...]
Reply = tuple[int, Any]  # (HTTP status, parsed JSON body)


class ObjectMeta(TypedDict, total=False):
    """An object's metadata as listed, every field but managedFields (Kubernetes 1.20 to 1.32):
    decoding into it skips that one field and keeps the others as plain dicts."""

    name: Any
    generateName: Any
    namespace: Any
    selfLink: Any
    uid: Any
    resourceVersion: Any
    generation: Any
    creationTimestamp: Any
    deletionTimestamp: Any
    deletionGracePeriodSeconds: Any
    labels: Any
    annotations: Any
    ownerReferences: Any
    finalizers: Any
    clusterName: Any  # until 1.24


class Item(TypedDict, total=False):
    """A listed node or pod: the only kinds listed early."""

    apiVersion: Any
    kind: Any
    metadata: ObjectMeta
    spec: Any
    status: Any


class ListReply(TypedDict, total=False):
    """A successful LIST's body; a failure's (a Status) is decoded whole."""

    apiVersion: Any
    kind: Any
    metadata: Any
    items: list[Item]


# The kubeconfig entries read here; an entry with any other field is left to the client.
_CLUSTER_FIELDS = frozenset(
    (
        "server",
        "certificate-authority",
        "certificate-authority-data",
        "insecure-skip-tls-verify",
        "extensions",
    )
)
_USER_FIELDS = frozenset(
    ("client-certificate", "client-certificate-data", "client-key", "client-key-data", "token", "extensions")
)


@dataclass(frozen=True, slots=True)
class Endpoint:
    """Where to send a request and with what credentials."""

    scheme: str
    host: str
    port: int
    prefix: str  # the server URL's path, if any
    headers: Mapping[str, str]
    ca_file: str | None = None
    ca_data: str | None = None  # PEM
    cert: tuple[str, str | None] | None = None  # (certificate, key) files; the key may be in the first
    cert_data: tuple[bytes, bytes] | None = None  # (certificate, key) PEM
    insecure: bool = False

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host  # IPv6
        return f"{self.scheme}://{host}:{self.port}{self.prefix}"

    def ssl_context(self) -> ssl.SSLContext:
        context = ssl.create_default_context(cafile=self.ca_file, cadata=self.ca_data)
        if self.insecure:
            context.check_hostname = False
            context.verify_mode = ssl.CERT_NONE
        if self.cert:
            context.load_cert_chain(*self.cert)
        elif self.cert_data:
            # load_cert_chain reads files only: a private directory, gone once loaded.
            with tempfile.TemporaryDirectory() as folder:
                cert, key = Path(folder, "cert.pem"), Path(folder, "key.pem")
                cert.write_bytes(self.cert_data[0])
                key.touch(0o600)
                key.write_bytes(self.cert_data[1])
                context.load_cert_chain(cert, key)
        return context


def endpoint(
    kubeconfig: str | None, environ: Mapping[str, str] = os.environ, *, context: str | None = None
) -> Endpoint | None:
    """The endpoint to connect to (kube/client.load_configuration), when this module can read it
    whole; None otherwise. `context`: a kubeconfig context other than the current one."""
    try:
        path = kubeconfig or environ.get("KUBECONFIG")
        if not path and IN_CLUSTER_TOKEN.exists() and context is None:
            return _in_cluster(environ)
        if path and os.pathsep in path:
            return None  # merged kubeconfigs
        file = Path(path or "~/.kube/config").expanduser()
        return from_kubeconfig(yaml.safe_load(file.read_text()), file.parent, context)
    except (OSError, ValueError, TypeError, KeyError, AttributeError, StopIteration, yaml.YAMLError):
        return None


def from_kubeconfig(doc: Any, folder: Path, context_name: str | None = None) -> Endpoint | None:
    """The endpoint of `context_name`, or of the current context; relative file names are the
    kubeconfig folder's."""
    context = _named(doc["contexts"], context_name or doc["current-context"])["context"]
    cluster = _named(doc["clusters"], context["cluster"])["cluster"]
    user = (_named(doc.get("users") or [], context["user"])["user"] if context.get("user") else None) or {}
    if set(cluster) - _CLUSTER_FIELDS or set(user) - _USER_FIELDS:
        return None
    server = urllib.parse.urlsplit(cluster["server"])
    if server.scheme not in ("https", "http") or not server.hostname or environment_proxy(cluster["server"]):
        return None

    def file(source: Mapping[str, Any], key: str) -> str | None:
        return str(folder / source[key]) if source.get(key) else None

    def data(source: Mapping[str, Any], key: str) -> bytes | None:
        return base64.b64decode(source[key]) if source.get(key) else None

    cert, key = file(user, "client-certificate"), file(user, "client-key")
    cert_data, key_data = data(user, "client-certificate-data"), data(user, "client-key-data")
    ca_data = data(cluster, "certificate-authority-data")
    return Endpoint(
        scheme=server.scheme,
        host=server.hostname,
        port=server.port or (443 if server.scheme == "https" else 80),
        prefix=server.path.rstrip("/"),
        headers={"Authorization": f"Bearer {user['token']}"} if user.get("token") else {},
        ca_file=file(cluster, "certificate-authority"),
        ca_data=ca_data.decode() if ca_data else None,
        cert=(cert, key) if cert and key else None,
        cert_data=(cert_data, key_data) if cert_data and key_data else None,
        insecure=bool(cluster.get("insecure-skip-tls-verify")),
    )


def _in_cluster(environ: Mapping[str, str]) -> Endpoint | None:
    host, port = environ.get("KUBERNETES_SERVICE_HOST"), environ.get("KUBERNETES_SERVICE_PORT")
    if not host or not port:
        return None
    token = IN_CLUSTER_TOKEN.read_text().strip()
    return Endpoint(
        scheme="https",
        host=host,
        port=int(port),
        prefix="",
        headers={"Authorization": f"Bearer {token}"},
        ca_file=str(IN_CLUSTER_CA),
    )


def _named(entries: Sequence[Mapping[str, Any]], name: str) -> Mapping[str, Any]:
    return next(entry for entry in entries if entry["name"] == name)


def environment_proxy(url: str) -> str | None:
    """HTTPS_PROXY / HTTP_PROXY for `url`, unless NO_PROXY exempts its host."""
    parts = urllib.parse.urlsplit(url)
    proxies = urllib.request.getproxies_environment()
    bypass = urllib.request.proxy_bypass_environment  # type: ignore[attr-defined]  # not in typeshed
    if not parts.hostname or bypass(parts.netloc, proxies):
        return None
    return proxies.get(parts.scheme or "https")


def listing_query(
    query: Mapping[str, str] | None, *, from_cache: bool, token: str = "", page: int = LIST_PAGE
) -> Query:
    """The query of one request of a listing (kube/listing.list_pages): `page` objects, `query`,
    from the watch cache or not, continuing from `token`."""
    params = [("limit", str(page)), *(query or {}).items()]
    if from_cache:
        params.append(("resourceVersion", "0"))
    if token:
        params.append(("continue", token))
    return tuple(params)


def sync_requests() -> dict[str, Query]:
    """The first requests of the start-up sync's node and pod listings (app/startup.py)."""
    return {kind.path: listing_query(kind.query, from_cache=True) for kind in (NODES, PODS)}


class EarlyListings:
    """Listings of nodes or pods (`Item`) sent at once, each from a thread of its own; each reply
    is taken once."""

    def __init__(self, target: Endpoint, requests: Mapping[str, Query]) -> None:
        # The endpoint and its TLS settings, as read: the client goes on with them (kube/client.py).
        self.target = target
        self.context = target.ssl_context() if target.scheme == "https" else None
        self._requests = dict(requests)
        self._replies: dict[str, concurrent.futures.Future[Reply]] = {}
        for path, query in self._requests.items():
            reply: concurrent.futures.Future[Reply] = concurrent.futures.Future()
            self._replies[path] = reply
            threading.Thread(
                target=_fetch,
                args=(target, self.context, path, query, reply),
                name=f"early {path}",
                daemon=True,
            ).start()

    def take(self, path: str, query: Query) -> concurrent.futures.Future[Reply] | None:
        """The reply to GET `path`?`query`, if that is what was sent; never twice."""
        if self._requests.get(path) != query:
            return None
        return self._replies.pop(path, None)


def start(kubeconfig: str | None, requests: Mapping[str, Query] | None = None) -> EarlyListings | None:
    """Send `requests` (path: query; the sync's by default) now, if the connection can be read
    here; None otherwise."""
    target = endpoint(kubeconfig)
    if target is None:
        return None
    try:
        return EarlyListings(target, sync_requests() if requests is None else requests)
    except (OSError, ssl.SSLError, ValueError):
        return None  # unreadable certificates: the client reports them


# What `begin` sent, by the --kubeconfig it was read for (None: the default one).
_begun: dict[str | None, EarlyListings | None] = {}


def begin(kubeconfig: str | None) -> None:
    """Send the sync's requests for `kubeconfig` now, for `begun` to hand over: `kubesched run`
    calls it before it parses its command line (launch.py)."""
    _begun.clear()
    _begun[kubeconfig] = start(kubeconfig)


def begun(kubeconfig: str | None) -> EarlyListings | None:
    """The listings `begin` sent, if it read the same `kubeconfig`; otherwise they are dropped and
    the sync's requests sent now (`start`)."""
    if kubeconfig in _begun:
        return _begun.pop(kubeconfig)
    _begun.clear()
    return start(kubeconfig)


def _fetch(
    target: Endpoint,
    context: ssl.SSLContext | None,
    path: str,
    query: Query,
    reply: concurrent.futures.Future[Reply],
) -> None:
    try:
        connection: http.client.HTTPConnection = (
            http.client.HTTPSConnection(target.host, target.port, context=context, timeout=60)
            if context is not None
            else http.client.HTTPConnection(target.host, target.port, timeout=60)
        )
        try:
            url = f"{target.prefix}{path}?{urllib.parse.urlencode(query)}"
            connection.request("GET", url, headers={"Accept": "application/json", **target.headers})
            import msgspec.json  # noqa: F401  # while the server answers, not before the requests go out

            response = connection.getresponse()
            body = response.read()
        finally:
            connection.close()
        reply.set_result((response.status, decode_reply(response.status, body)))
    except Exception as exc:  # handed to the taker, which lists as usual
        reply.set_exception(exc)


def decode_reply(status: int, body: bytes) -> Any:
    """A reply's body as `json.loads` would build it, less each listed object's managedFields."""
    import msgspec.json

    if not body:
        return None
    return msgspec.json.decode(body, type=ListReply if 200 <= status < 300 else Any)
