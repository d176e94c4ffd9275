"""`kubesched run`'s first steps: the listings sent before the command line is parsed, and handed
to the command only for the kubeconfig they were sent for."""

from __future__ import annotations

import gc
import sys
from collections.abc import Iterator

import pytest

from kubesched import launch
from kubesched.app.tuning import GIL_SWITCH_INTERVAL
from kubesched.kube import early_listing


@pytest.fixture
def started(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str | None]]:
    """`early_listing.start` records the kubeconfig it was asked for and sends nothing; what it
    returns stands in for the listings (a distinct object per call)."""
    calls: list[str | None] = []

    def start(kubeconfig: str | None) -> object:
        calls.append(kubeconfig)
        return object()

    monkeypatch.setattr(early_listing, "start", start)
    switch, enabled = sys.getswitchinterval(), gc.isenabled()
    yield calls
    early_listing._begun.clear()
    sys.setswitchinterval(switch)
    if enabled:
        gc.enable()


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        ([], None),
        (["--kubeconfig", "/a"], "/a"),
        (["--kubeconfig=/a"], "/a"),
        (["--kubeconfig=/a", "--log-level", "debug", "--kubeconfig", "/b"], "/b"),  # click keeps the last
        (["--kubeconfig"], None),  # no value: click refuses the line
        (["--", "--kubeconfig", "/a"], None),
        (["--kubeconfig-x=/a"], None),
    ],
)
def test_the_kubeconfig_flag_is_read_as_click_reads_it(args: list[str], expected: str | None) -> None:
    assert launch.kubeconfig_flag(args) == expected


def test_run_sends_the_listings_for_its_kubeconfig_and_tunes_the_process_first(
    started: list[str | None],
) -> None:
    launch.prepare(["run", "--kubeconfig", "/k", "--scheduler-name", "s"])
    assert started == ["/k"]
    assert not gc.isenabled() and sys.getswitchinterval() == pytest.approx(GIL_SWITCH_INTERVAL)


@pytest.mark.parametrize(
    "argv", [[], ["version"], ["explain", "--kubeconfig", "/k"], ["run", "--help"], ["run", "-h"]]
)
def test_other_commands_send_nothing(started: list[str | None], argv: list[str]) -> None:
    launch.prepare(argv)
    assert started == []
    assert not early_listing._begun


def test_the_command_takes_what_was_sent_for_the_same_kubeconfig_once(started: list[str | None]) -> None:
    early_listing.begin("/k")
    sent = early_listing._begun["/k"]
    assert early_listing.begun("/k") is sent
    again = early_listing.begun("/k")  # taken already: sent anew
    assert again is not sent and started == ["/k", "/k"]


def test_a_wrong_guess_is_dropped_and_the_parsed_kubeconfig_listed(started: list[str | None]) -> None:
    early_listing.begin(None)  # --kubeconfig not seen on the command line
    assert early_listing.begun("/parsed") is not None
    assert started == [None, "/parsed"] and not early_listing._begun
