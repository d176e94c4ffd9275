from __future__ import annotations

import asyncio
import threading

import pytest
import uvloop
from click.testing import CliRunner

from kubesched.app.eventloop import event_loop
from kubesched.app.settings import RunSettings
from kubesched.cli import main, run


def loop_type_in_a_thread() -> type:
    """The type of the loop `asyncio.run` makes on a new thread, as the elector's and recorder's do."""
    seen: list[type] = []

    async def look() -> None:
        seen.append(type(asyncio.get_running_loop()))

    thread = threading.Thread(target=lambda: asyncio.run(look()))
    thread.start()
    thread.join()
    return seen[0]


def test_uvloop_for_every_loop_within_and_the_policy_before_after() -> None:
    before = asyncio.get_event_loop_policy()
    with event_loop("uvloop"):
        assert loop_type_in_a_thread() is uvloop.Loop
    assert asyncio.get_event_loop_policy() is before
    assert loop_type_in_a_thread() is not uvloop.Loop


def test_asyncio_is_the_standard_library_loop() -> None:
    with event_loop("asyncio"):
        loop_type = loop_type_in_a_thread()
    assert issubclass(loop_type, asyncio.BaseEventLoop) and loop_type is not uvloop.Loop


def test_the_policy_is_restored_when_the_run_fails() -> None:
    before = asyncio.get_event_loop_policy()
    with pytest.raises(RuntimeError, match="boom"), event_loop("uvloop"):
        raise RuntimeError("boom")
    assert asyncio.get_event_loop_policy() is before


def test_an_unknown_loop_is_refused_and_changes_nothing() -> None:
    before = asyncio.get_event_loop_policy()
    with pytest.raises(ValueError, match="uvloop, asyncio"), event_loop("tokio"):
        pass
    assert asyncio.get_event_loop_policy() is before


def test_the_flag() -> None:
    assert RunSettings().process.event_loop == "uvloop"
    settings = RunSettings.from_flags(run.make_context("run", ["--event-loop", "asyncio"]).params)
    assert settings.process.event_loop == "asyncio"
    result = CliRunner().invoke(main, ["run", "--event-loop", "tokio"])
    assert result.exit_code == 2 and "--event-loop" in result.output
