"""Which kubeconfigs kube/kubeconfig.py reads whole, and how node and pod listings are decoded."""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any, cast

import pytest
import yaml
from hypothesis import given
from hypothesis import strategies as st

from kubesched.kube import kubeconfig as kubeconfig_module
from kubesched.kube import listing
from kubesched.kube.client import Api
from kubesched.kube.informer import Expired, Informer
from kubesched.kube.kubeconfig import Endpoint, endpoint, from_kubeconfig
from kubesched.kube.listing import listing_query
from kubesched_dev.fixtures import WatchApi


def kubeconfig(cluster: dict[str, Any], user: dict[str, Any] | None) -> dict[str, Any]:
    context: dict[str, Any] = {"cluster": "c", "namespace": "default"}
    if user is not None:
        context["user"] = "u"
    return {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {"name": "other", "cluster": {"server": "https://wrong:1"}},
            {"name": "c", "cluster": cluster},
        ],
        "users": [{"name": "u", "user": user or {}}],
        "contexts": [{"name": "x", "context": {"cluster": "other"}}, {"name": "ctx", "context": context}],
        "current-context": "ctx",
    }


@pytest.fixture(autouse=True)
def _no_proxy(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy", "NO_PROXY", "no_proxy"):
        monkeypatch.delenv(name, raising=False)


def test_a_token_and_a_ca_file_relative_to_the_kubeconfig() -> None:
    doc = kubeconfig(
        {"server": "https://10.0.0.1:6443/prefix/", "certificate-authority": "ca.crt"}, {"token": "t0k"}
    )
    target = from_kubeconfig(doc, Path("/etc/kube"))
    assert target == Endpoint(
        scheme="https",
        host="10.0.0.1",
        port=6443,
        prefix="/prefix",
        headers={"Authorization": "Bearer t0k"},
        ca_file="/etc/kube/ca.crt",
    )


def test_embedded_client_certificates_and_ca_are_decoded() -> None:
    def b64(text: str) -> str:
        return base64.b64encode(text.encode()).decode()

    doc = kubeconfig(
        {"server": "https://api.example", "certificate-authority-data": b64("CA PEM")},
        {"client-certificate-data": b64("CERT"), "client-key-data": b64("KEY")},
    )
    target = from_kubeconfig(doc, Path("/x"))
    assert target is not None
    assert (target.port, target.ca_data, target.cert_data, target.headers) == (
        443,
        "CA PEM",
        (b"CERT", b"KEY"),
        {},
    )


def test_certificate_files_and_an_insecure_cluster() -> None:
    doc = kubeconfig(
        {"server": "https://h:6443", "insecure-skip-tls-verify": True},
        {"client-certificate": "/abs/cert.pem", "client-key": "key.pem"},
    )
    target = from_kubeconfig(doc, Path("/cfg"))
    assert target is not None and target.insecure
    assert target.cert == ("/abs/cert.pem", "/cfg/key.pem")  # an absolute name stays as it is


@pytest.mark.parametrize(
    ("cluster", "user"),
    [
        ({"server": "https://h:6443"}, {"exec": {"command": "aws"}}),
        ({"server": "https://h:6443"}, {"auth-provider": {"name": "oidc"}}),
        ({"server": "https://h:6443"}, {"username": "a", "password": "b"}),
        ({"server": "https://h:6443"}, {"tokenFile": "/t"}),
        ({"server": "https://h:6443", "proxy-url": "http://p:3128"}, {"token": "t"}),
        ({"server": "https://h:6443", "tls-server-name": "other"}, {"token": "t"}),
        ({"server": "unix:///sock"}, {"token": "t"}),
    ],
)
def test_what_it_cannot_read_whole_is_left_to_the_client(
    cluster: dict[str, Any], user: dict[str, Any]
) -> None:
    assert from_kubeconfig(kubeconfig(cluster, user), Path("/x")) is None


def test_an_environment_proxy_is_left_to_the_client(monkeypatch: pytest.MonkeyPatch) -> None:
    doc = kubeconfig({"server": "https://api.example:6443"}, {"token": "t"})
    monkeypatch.setenv("HTTPS_PROXY", "http://proxy.example:3128")
    assert from_kubeconfig(doc, Path("/x")) is None
    monkeypatch.setenv("NO_PROXY", "api.example")
    assert from_kubeconfig(doc, Path("/x")) is not None


def test_the_kubeconfig_is_found_as_the_client_finds_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    file = tmp_path / "config"
    file.write_text(yaml.safe_dump(kubeconfig({"server": "https://h:6443"}, {"token": "t"})))
    monkeypatch.setattr(kubeconfig_module, "IN_CLUSTER_TOKEN", tmp_path / "no-token")
    assert endpoint(str(file), environ={}) is not None  # --kubeconfig
    assert endpoint(None, environ={"KUBECONFIG": str(file)}) is not None
    assert endpoint(None, environ={"KUBECONFIG": f"{file}:{file}"}) is None  # merged: the client's
    assert endpoint(str(tmp_path / "missing"), environ={}) is None
    (tmp_path / "broken").write_text("{not yaml")
    assert endpoint(str(tmp_path / "broken"), environ={}) is None


def test_in_cluster_reads_the_service_account(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    token = tmp_path / "token"
    token.write_text("sa-token\n")
    monkeypatch.setattr(kubeconfig_module, "IN_CLUSTER_TOKEN", token)
    monkeypatch.setattr(kubeconfig_module, "IN_CLUSTER_CA", tmp_path / "ca.crt")
    target = endpoint(
        None, environ={"KUBERNETES_SERVICE_HOST": "10.96.0.1", "KUBERNETES_SERVICE_PORT": "443"}
    )
    assert target is not None
    assert (target.host, target.port, target.headers["Authorization"], target.ca_file) == (
        "10.96.0.1",
        443,
        "Bearer sa-token",
        str(tmp_path / "ca.crt"),
    )
    assert endpoint(None, environ={}) is None  # no service host: not in a pod


def test_a_listing_query_asks_a_page_from_the_watch_cache_or_goes_on() -> None:
    assert listing_query({"fieldSelector": "a"}, from_cache=True) == (
        ("limit", str(listing.LIST_PAGE)),
        ("fieldSelector", "a"),
        ("resourceVersion", "0"),
    )
    assert listing_query(None, from_cache=False, token="t", page=5) == (("limit", "5"), ("continue", "t"))


_JSON = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**63), max_value=2**64 - 1)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=30,
)


_META_FIELDS = st.sampled_from(sorted(listing.ObjectMeta.__annotations__))


@st.composite
def _listed_objects(draw: st.DrawFn) -> dict[str, Any]:
    meta = draw(st.dictionaries(_META_FIELDS, _JSON, max_size=5))
    if draw(st.booleans()):
        meta["managedFields"] = draw(_JSON)
    obj: dict[str, Any] = {"metadata": meta}
    for key in ("apiVersion", "kind", "spec", "status"):
        if draw(st.booleans()):
            obj[key] = draw(_JSON)
    return obj


@given(st.lists(_listed_objects(), max_size=4), st.dictionaries(st.text(), _JSON, max_size=3))
def test_a_lean_listing_decodes_to_what_json_would_build_less_managed_fields(
    items: list[dict[str, Any]], list_meta: dict[str, Any]
) -> None:
    # Node and pod listings decode with msgspec, the rest with json: the cache must not tell them
    # apart, but for managedFields, which nothing reads.
    body = json.dumps(
        {"kind": "PodList", "apiVersion": "v1", "metadata": list_meta, "items": items}, ensure_ascii=False
    ).encode()
    expected = json.loads(body)
    for item in expected["items"]:
        item["metadata"].pop("managedFields", None)
    decoded = listing.decode_listing(200, body)
    assert decoded == expected and type(decoded) is dict
    assert all(type(item) is dict and type(item["metadata"]) is dict for item in decoded["items"])


@given(_listed_objects(), st.sampled_from(["ADDED", "MODIFIED", "DELETED", "BOOKMARK"]))
def test_a_lean_watch_event_decodes_to_what_json_would_build_less_managed_fields(
    obj: dict[str, Any], kind: str
) -> None:
    # Node and pod watches decode as their listings do; the other kinds' events whole.
    line = json.dumps({"type": kind, "object": obj}, ensure_ascii=False).encode()
    expected = json.loads(line)
    expected["object"]["metadata"].pop("managedFields", None)
    decoded = listing.decode_watch_event(line, lean=True)
    assert decoded == expected and type(decoded["object"]["metadata"]) is dict
    assert listing.decode_watch_event(line, lean=False) == json.loads(line)


async def test_a_lean_watch_still_reads_the_code_of_an_error() -> None:
    # An ERROR's object is a Status, not a node or a pod: decoded lean, its code would be lost.
    status = {"kind": "Status", "status": "Failure", "message": "too old resource version", "code": 410}
    line = json.dumps({"type": "ERROR", "object": status}).encode()
    assert listing.decode_watch_event(line, lean=True) == {"type": "ERROR", "object": status}
    informer = Informer(cast(Api, WatchApi([line + b"\n"])), "/api/v1/pods", lambda *_: None, lean=True)
    with pytest.raises(Expired):
        await informer._watch()


@given(_JSON)
def test_a_failed_requests_reply_decodes_whole(value: Any) -> None:
    body = json.dumps(value, ensure_ascii=False).encode()
    decoded = listing.decode_listing(403, body)
    assert decoded == json.loads(body) and type(decoded) is type(json.loads(body))
    assert listing.decode_listing(200, b"") is None
