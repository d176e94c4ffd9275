"""The API client: no per-request environment lookups, a proxy from the environment resolved once."""

from __future__ import annotations

import pytest
from kubernetes_asyncio import client

from kubesched.kube.client import api_client
from kubesched.kube.early_listing import environment_proxy


def test_a_proxy_comes_from_the_environment_unless_no_proxy_exempts_the_host(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for name in ("HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy", "NO_PROXY", "no_proxy"):
        monkeypatch.delenv(name, raising=False)
    assert environment_proxy("https://10.0.0.1:6443") is None
    monkeypatch.setenv("HTTPS_PROXY", "http://proxy.example:3128")
    assert environment_proxy("https://10.0.0.1:6443") == "http://proxy.example:3128"
    monkeypatch.setenv("NO_PROXY", "10.0.0.1,localhost")
    assert environment_proxy("https://10.0.0.1:6443") is None
    assert environment_proxy("https://api.example:6443") == "http://proxy.example:3128"


async def test_the_client_reads_neither_proxy_nor_netrc_per_request(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HTTPS_PROXY", "http://proxy.example:3128")
    monkeypatch.delenv("NO_PROXY", raising=False)
    monkeypatch.delenv("no_proxy", raising=False)
    conf = client.Configuration(host="https://api.example:6443")
    async with api_client(conf) as api:
        assert api.rest_client.pool_manager.trust_env is False
        assert api.rest_client.proxy == "http://proxy.example:3128"
