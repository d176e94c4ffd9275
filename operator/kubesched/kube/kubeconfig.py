"""Reading a kubeconfig, or the in-cluster service account: where the API server is and how to
authenticate to it (kube/client.py's load_configuration, and the kubectl plugin).

What it cannot read whole (exec plugins, auth providers, basic auth, merged kubeconfigs, a proxy
for the server) is left to the generated client's loader: see kube/client.py.
"""

from __future__ import annotations

import base64
import os
import ssl
import tempfile
import urllib.parse
import urllib.request
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

IN_CLUSTER_TOKEN = Path("/var/run/secrets/kubernetes.io/serviceaccount/token")
IN_CLUSTER_CA = IN_CLUSTER_TOKEN.with_name("ca.crt")


# The kubeconfig entries read here; an entry with any other field is left to the generated loader.
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
    whole; None otherwise (the generated loader then reads it, or says what is wrong with it).
    `context`: a kubeconfig context other than the current one."""
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
