"""Every test here talks to the real API server: marked `integration`, and cleans up nodes after itself.

The CRDs in crds/ are installed once per session, before any test, as a cluster would have them.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
import pytest_asyncio
from kubernetes_asyncio.client import ApiClient

from kubesched_dev.fixtures import install_crds

from .test_policies import Policies

HERE = Path(__file__).parent
CRDS = HERE.parents[1] / "crds"


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    # This hook sees the items of the whole session, not only of this folder.
    for item in items:
        if item.path.is_relative_to(HERE):
            item.add_marker(pytest.mark.integration)


@pytest.fixture(autouse=True)
def _nodes_deleted_after_each_test(clean_nodes: None) -> Iterator[None]:
    yield


@pytest_asyncio.fixture(scope="session", loop_scope="session", autouse=True)
async def _crds_installed(api: ApiClient) -> list[str]:
    return await install_crds(api, CRDS)


@pytest_asyncio.fixture
async def policies(api: ApiClient) -> AsyncIterator[Policies]:
    made = Policies(api)
    yield made
    await made.cleanup()
