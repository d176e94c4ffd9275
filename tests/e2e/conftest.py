"""Several `kubesched run` replicas against the real API server: marked `integration`, nodes cleaned up."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

HERE = Path(__file__).parent


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    # This hook sees the items of the whole session, not only of this folder.
    for item in items:
        if item.path.is_relative_to(HERE):
            item.add_marker(pytest.mark.integration)


@pytest.fixture(autouse=True)
def _nodes_deleted_after_each_test(clean_nodes: None) -> Iterator[None]:
    yield
