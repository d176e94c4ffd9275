"""The API client: no per-request environment lookups, a proxy from the environment resolved once."""

from __future__ import annotations

import subprocess
import sys

import pytest
from kubernetes_asyncio import client

from kubesched.kube.client import api_client, from_generated
from kubesched.kube.kubeconfig import environment_proxy


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
        assert api._open().trust_env is False
        assert api.configuration.proxy == "http://proxy.example:3128"
        assert api.configuration.host == "https://api.example:6443"
        with pytest.raises(ValueError, match="raw responses"):
            await api.call_api("/api", "GET", _preload_content=True)


async def test_a_generated_configuration_keeps_its_token_renewal() -> None:
    # An exec plugin's token is renewed by the generated loader's hook, asked before each request.
    renewals: list[int] = []
    conf = client.Configuration(
        host="https://[fd00::1]:6443/base/",
        api_key={"BearerToken": "old"},
        api_key_prefix={"BearerToken": "Bearer"},
    )

    def renew(configuration: client.Configuration) -> None:
        renewals.append(1)
        configuration.api_key["BearerToken"] = f"token-{len(renewals)}"

    conf.refresh_api_key_hook = renew
    conf.verify_ssl = False
    ours = from_generated(conf)
    assert ours.host == "https://[fd00::1]:6443/base" and ours.endpoint.insecure
    assert ours.authorization is not None
    assert [await ours.authorization(), await ours.authorization()] == ["Bearer token-1", "Bearer token-2"]


def test_the_run_command_imports_no_generated_client_and_kopf_goes_without_it() -> None:
    # `kubesched run` imports what it runs before it connects, Kopf not among it: Kopf comes once
    # scheduling has started (import_kopf_wiring). The generated client would add about 0.6 s to
    # every start, and Kopf takes it for absent; a kubeconfig that needs its loader still gets it
    # (load_configuration imports it then), as does anything imported afterwards.
    script = """
import sys
import kubesched.app.run
print(sorted(m for m in sys.modules if m.startswith(("kubernetes_asyncio", "kopf"))))
kubesched.app.run.import_kopf_wiring()
print(sorted(m for m in sys.modules if m.startswith("kubernetes_asyncio")))
from kopf._cogs.helpers import thirdparty
print(thirdparty.V1ObjectMetaAsync)
import kubernetes_asyncio.client
print(kubernetes_asyncio.client.V1ObjectMeta.__name__)
"""
    result = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120, check=False
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.split("\n")[:4] == ["[]", "[]", "None", "V1ObjectMeta"], result.stdout
