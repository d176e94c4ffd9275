"""Start-up listings come a page at a time, from one snapshot of the API server."""

from __future__ import annotations

import pytest
from kubernetes_asyncio.client import ApiClient

from kubesched.kube import listing
from kubesched_dev.fixtures import create_nodes, make_node


async def test_listings_are_fed_a_page_at_a_time_and_miss_nothing(
    api: ApiClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    await create_nodes(api, [make_node(f"page-{i}") for i in range(5)])
    monkeypatch.setattr(listing, "LIST_PAGE", 2)
    pages = [(page, version) async for page, version in listing.list_pages(api, "/api/v1/nodes")]
    assert [len(page) for page, _ in pages] == [2, 2, 1]
    assert len({version for _, version in pages}) == 1
    names = [n["metadata"]["name"] for page, _ in pages for n in page]
    assert sorted(names) == [f"page-{i}" for i in range(5)]
    items, version = await listing.list_versioned(api, "/api/v1/nodes")
    assert [n["metadata"]["name"] for n in items] == names and version == pages[0][1]
