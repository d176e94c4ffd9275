"""Fixtures for tests that talk to a real kube-apiserver (tests/integration, tests/e2e).

Nothing here is autouse: unit tests never start the control plane. The first test that asks for
`control_plane` (or `api`, `namespace`, `clean_nodes`) starts one for the whole session, about 7 s.

Faster local iteration: `python -m kubesched_dev.devcluster up`, then
`KUBESCHED_TEST_KUBECONFIG=.cluster/kubeconfig pytest ...` reuses that control plane (and leaves it up).
"""

from __future__ import annotations

import os
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
import pytest_asyncio
from kubernetes_asyncio.client import ApiClient

from kubesched_dev import fixtures as testing
from kubesched_dev.devcluster import ControlPlaneError, LocalControlPlane

REUSE_ENV = ("KUBESCHED_TEST_KUBECONFIG", "KUBECONFIG_TEST")


@pytest.fixture(scope="session")
def control_plane() -> Iterator[LocalControlPlane]:
    """One etcd + kube-apiserver 1.20.2 for the session (or the one `devcluster up` started)."""
    reuse = next((os.environ[name] for name in REUSE_ENV if os.environ.get(name)), None)
    if reuse:
        try:
            cp = LocalControlPlane.attach(Path(reuse).resolve().parent)
        except ControlPlaneError as e:
            raise pytest.UsageError(
                f"{reuse} must be a kubeconfig written by `python -m kubesched_dev.devcluster up`: {e}"
            ) from e
        if not (cp.is_running() and cp.is_ready()):
            raise pytest.UsageError(f"the control plane of {reuse} is not up: run `devcluster up` again")
        yield cp  # not ours to stop
        return
    cp = LocalControlPlane()
    cp.start()
    try:
        yield cp
    finally:
        cp.stop()


@pytest_asyncio.fixture(scope="session", loop_scope="session")
async def api(control_plane: LocalControlPlane) -> AsyncIterator[ApiClient]:
    """A kubernetes_asyncio ApiClient with the admin token (group system:masters)."""
    client = await testing.new_api_client(control_plane.kubeconfig)
    try:
        yield client
    finally:
        await client.close()


@pytest_asyncio.fixture
async def namespace(api: ApiClient) -> AsyncIterator[str]:
    """A fresh namespace for one test, deleted (with its pods) afterwards."""
    name = f"test-{uuid.uuid4().hex[:10]}"
    await testing.create_namespace(api, name)
    yield name
    await testing.delete_namespace(api, name)


@pytest_asyncio.fixture
async def clean_nodes(api: ApiClient) -> AsyncIterator[None]:
    """Delete every Node after the test: nodes are cluster-scoped and tests share the API server."""
    yield
    await testing.delete_all_nodes(api)
