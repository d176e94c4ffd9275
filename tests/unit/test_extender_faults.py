"""Extenders that misbehave: replies that are not JSON or not of their verb's shape, huge bodies,
servers that never answer or stall half-way, TLS failures, connections refused or dropped.

Every such call fails with one message naming the extender, the verb and what was wrong, within
the extender's httpTimeout (never an unhandled exception, a hang or an unbounded read). Then
`ignorable` keeps its meaning (core/generic_scheduler.go, 1.20): an ignorable filter extender is
skipped with a warning and the rest of the policy places the pod; one that is not fails the pod's
attempt with that message. Prioritize failures are skipped either way; a failing preempt call
stops the preemption unless the extender is ignorable.

The checks of each verb's reply are pure and tested as tables first; then each fault is served
by a real extender process (tests/extender_server.py) to the HTTP transport the scheduler uses.
"""

from __future__ import annotations

import hashlib
import json
import random
import re
import socket
import time
from collections.abc import Callable, Iterator, MutableMapping
from pathlib import Path
from typing import Any

import pytest
import structlog

from kubesched.algorithm import extenders
from kubesched.algorithm.extender_wire import (
    ExtenderError,
    decode_reply,
    read_bind_reply,
    read_filter_reply,
    read_preempt_reply,
    read_prioritize_reply,
)
from kubesched.algorithm.extenders import ExtenderConfig, HTTPExtender
from kubesched.algorithm.generic import Algorithm, ExtenderFailure, FitError
from kubesched.algorithm.preemption import PreemptionOutcome, attempt
from kubesched.kube.extender_transport import HTTPTransport
from kubesched.model.objects import Pod
from kubesched.policy.compile import compile_policy
from kubesched_dev.fixtures import model_node, model_pod, node_info, snapshot

from ..extender_server import ExtenderProcess, TLSFiles, make_tls

TIMEOUT = 0.5  # the extenders' httpTimeout here
BOUND = TIMEOUT + 3.0  # what a failing call may take at most: generous, for a loaded 2-core machine
# PodFitsResources and LeastRequestedPriority alone put a 500m pod on "big".
NODES = snapshot(model_node("small", cpu="1"), model_node("big", cpu="8"))

Logs = list[MutableMapping[str, Any]]


# ------------------------------------------------------------------------ the replies, pure

NOT_JSON = [
    pytest.param(b"not json", "invalid JSON in reply: Expecting value: line 1 column 1 (char 0)", id="text"),
    pytest.param(
        b'{"NodeNames": [', "invalid JSON in reply: Expecting value: line 1 column 16 (char 15)", id="cut"
    ),
    pytest.param(b"", "empty reply (expected JSON)", id="empty"),
    pytest.param(b" \r\n", "empty reply (expected JSON)", id="blank"),
    pytest.param(b"\xff\xfe\x00", "invalid JSON in reply: ", id="not UTF-8"),
    pytest.param(b"[" * 100_000, "invalid JSON in reply: maximum recursion depth exceeded", id="deep"),
    pytest.param(b"1" * 5000, "invalid JSON in reply: Exceeds the limit (4300 digits)", id="long number"),
]


@pytest.mark.parametrize(("body", "message"), NOT_JSON)
def test_a_reply_that_is_not_json(body: bytes, message: str) -> None:
    with pytest.raises(ExtenderError) as caught:
        decode_reply(body)
    assert str(caught.value).startswith(message)
    assert len(str(caught.value)) < 300


FILTER_REPLIES: list[tuple[Any, str]] = [
    ([], "reply must be an object, got []"),
    (None, "reply must be an object, got null"),
    ({"Nodes": "n1"}, 'reply field "Nodes" must be an object, got "n1"'),
    (
        {"Nodes": {"items": {"n1": {}}}},
        'reply field "Nodes.items" must be a list of Node objects, got {"n1": {}}',
    ),
    ({"Nodes": {"items": ["n1"]}}, 'reply field "Nodes.items[0]" must be an object, got "n1"'),
    (
        {"Nodes": {"items": [{"metadata": []}]}},
        'reply field "Nodes.items[0].metadata" must be an object, got []',
    ),
    (
        {"Nodes": {"items": [{"metadata": {"name": "n1"}}, {"metadata": {"name": 7}}]}},
        'reply field "Nodes.items[1].metadata.name" must be a string, got 7',
    ),
    ({"NodeNames": 3}, 'reply field "NodeNames" must be a list of strings, got 3'),
    ({"NodeNames": ["n1", None]}, 'reply field "NodeNames[1]" must be a string, got null'),
    (
        {"FailedNodes": ["n1"]},
        'reply field "FailedNodes" must be an object of node name to reason, got ["n1"]',
    ),
    ({"FailedNodes": {"n1": 3}}, 'reply field "FailedNodes.n1" must be a string, got 3'),
    (
        {"FailedAndUnresolvableNodes": {"n1": False}},
        'reply field "FailedAndUnresolvableNodes.n1" must be a string, got false',
    ),
    ({"Error": {"code": 1}}, 'reply field "Error" must be a string, got {"code": 1}'),
    # Go's decoder matches names case-insensitively; a value of the wrong type fails all the same.
    ({"nodenames": "n1"}, 'reply field "NodeNames" must be a list of strings, got "n1"'),
    # What is shown of a wrong value is cut short.
    (
        {"Error": list(range(1000))},
        'reply field "Error" must be a string, got '
        "[0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21...",
    ),
]

PRIORITIZE_REPLIES: list[tuple[Any, str]] = [
    (
        {"Host": "n1", "Score": 1},
        'reply must be a list of HostPriority objects, got {"Host": "n1", "Score": 1}',
    ),
    (None, "reply must be a list of HostPriority objects, got null"),
    ([5], 'reply field "[0]" must be an object, got 5'),
    ([{"Host": 5, "Score": 1}], 'reply field "[0].Host" must be a string, got 5'),
    ([{"Host": "n1", "Score": "10"}], 'reply field "[0].Score" must be an integer, got "10"'),
    ([{"Host": "n1", "Score": 1.0}], 'reply field "[0].Score" must be an integer, got 1.0'),
    ([{"Host": "n1", "Score": True}], 'reply field "[0].Score" must be an integer, got true'),
    (
        [{"Host": "n1", "Score": 10}, {"Host": "n2", "Score": 11}],
        'reply field "[1].Score" must be between 0 and 10, got 11',
    ),
    ([{"Host": "n1", "Score": -1}], 'reply field "[0].Score" must be between 0 and 10, got -1'),
    ([{"Host": "n1", "Score": 10**30}], f'reply field "[0].Score" must be between 0 and 10, got {10**30}'),
]

PREEMPT_REPLIES: list[tuple[Any, str]] = [
    ("yes", 'reply must be an object, got "yes"'),
    ({"NodeNameToMetaVictims": 3}, 'reply field "NodeNameToMetaVictims" must be an object, got 3'),
    (
        {"NodeNameToMetaVictims": {"n1": None}},
        'reply field "NodeNameToMetaVictims.n1" must be an object, got null',
    ),
    (
        {"NodeNameToMetaVictims": {"n1": {"Pods": {"UID": "u"}}}},
        'reply field "NodeNameToMetaVictims.n1.Pods" must be a list of MetaPod objects, got {"UID": "u"}',
    ),
    (
        {"NodeNameToMetaVictims": {"n1": {"Pods": ["u"]}}},
        'reply field "NodeNameToMetaVictims.n1.Pods[0]" must be an object, got "u"',
    ),
    (
        {"NodeNameToMetaVictims": {"n1": {"Pods": [{"UID": 5}]}}},
        'reply field "NodeNameToMetaVictims.n1.Pods[0].UID" must be a string, got 5',
    ),
    (
        {"NodeNameToMetaVictims": {"n1": {"Pods": [], "NumPDBViolations": "0"}}},
        'reply field "NodeNameToMetaVictims.n1.NumPDBViolations" must be an integer, got "0"',
    ),
    (
        {"NodeNameToMetaVictims": {"n1": {"Pods": [], "NumPDBViolations": -2}}},
        'reply field "NodeNameToMetaVictims.n1.NumPDBViolations" must be at least 0, got -2',
    ),
]

BIND_REPLIES: list[tuple[Any, str]] = [
    (None, "reply must be an object, got null"),
    ("", 'reply must be an object, got ""'),
    ({"Error": 5}, 'reply field "Error" must be a string, got 5'),
]

READERS: dict[str, Callable[[Any], Any]] = {
    "filter": read_filter_reply,
    "prioritize": read_prioritize_reply,
    "preempt": read_preempt_reply,
    "bind": read_bind_reply,
}


@pytest.mark.parametrize(
    ("verb", "reply", "message"),
    [
        *(("filter", *row) for row in FILTER_REPLIES),
        *(("prioritize", *row) for row in PRIORITIZE_REPLIES),
        *(("preempt", *row) for row in PREEMPT_REPLIES),
        *(("bind", *row) for row in BIND_REPLIES),
    ],
)
def test_a_reply_of_the_wrong_shape_names_the_field(verb: str, reply: Any, message: str) -> None:
    with pytest.raises(ExtenderError) as caught:
        READERS[verb](reply)
    assert str(caught.value) == message


def test_replies_of_the_right_shape_read_as_go_would() -> None:
    """Null or missing fields are Go's zero values; field names match case-insensitively."""
    filtered = read_filter_reply(
        {
            "nodes": {"items": [{"metadata": {"name": "n1"}}, {}]},
            "NodeNames": None,
            "failedNodes": {"n2": "x"},
        }
    )
    assert (filtered.nodes, filtered.node_names, filtered.failed, filtered.error) == (
        ["n1", ""],
        None,
        {"n2": "x"},
        "",
    )
    assert read_prioritize_reply([{"host": "n1", "score": 10}, {"Host": "n2"}]) == [("n1", 10), ("n2", 0)]
    assert read_preempt_reply({"NodeNameToMetaVictims": {"n1": {"Pods": [{"UID": "u"}]}}}) == {
        "n1": (["u"], 0)
    }
    assert read_preempt_reply({"NodeNameToMetaVictims": None}) == {}
    assert read_bind_reply({}) == read_bind_reply({"Error": None}) == ""


class Canned:
    """A transport that answers every call with the same bytes."""

    def __init__(self, reply: bytes) -> None:
        self.reply = reply

    def post(self, verb: str, body: bytes) -> bytes:
        return self.reply

    def close(self) -> None:
        pass


def canned(reply: bytes, **config: Any) -> HTTPExtender:
    config.setdefault("filter_verb", "filter")
    return HTTPExtender(ExtenderConfig("http://ext:8888/x/", **config), Canned(reply))


def test_what_a_filter_reply_means_for_the_nodes_it_was_asked_about() -> None:
    n1, n2, n3 = (node_info(model_node(name)) for name in ("n1", "n2", "n3"))
    ext = canned(
        b'{"NodeNames": ["n2", "n2"], "FailedNodes": {"n1": "busy", "n3": "busy", "n9": "gone"},'
        b' "FailedAndUnresolvableNodes": {"n3": "never here"}}',
        node_cache_capable=True,
    )
    fitting, failed = ext.filter(model_pod(), [n1, n2, n3])
    # Named twice, kept once; FailedAndUnresolvableNodes first; no reason for a node not asked about.
    assert [n.name for n in fitting] == ["n2"]
    assert failed == {"n1": "busy", "n3": "never here"}


@pytest.mark.parametrize(
    ("reply", "message"),
    [
        (b'{"NodeNames": ["n9"]}', 'claims a filtered node "n9" which is not found in the input node list'),
        (b'{"Error": "licence server down"}', "error in reply: licence server down"),
        (b'{"Error": "' + b"x" * 3000 + b'"}', f"error in reply: {'x' * 512}... (3000 characters)"),
        (b"<html>502</html>", "invalid JSON in reply: Expecting value: line 1 column 1 (char 0)"),
    ],
)
def test_a_filter_error_names_the_extender_and_the_verb(reply: bytes, message: str) -> None:
    with pytest.raises(ExtenderError) as caught:
        canned(reply, node_cache_capable=True).filter(model_pod(), [node_info(model_node("n1"))])
    assert str(caught.value) == f"extender http://ext:8888/x/filter: {message}"


def test_a_long_reason_is_cut_short() -> None:
    reason = "no " * 1000
    ext = canned(
        f'{{"NodeNames": [], "FailedNodes": {{"n1": "{reason}"}}}}'.encode(), node_cache_capable=True
    )
    _, failed = ext.filter(model_pod(), [node_info(model_node("n1"))])
    assert failed == {"n1": f"{reason[:512]}... (3000 characters)"}


# ----------------------------------------------------------------- the faults, over HTTP
# Each row: what the extender process does instead of answering, and the message expected after
# "extender <urlPrefix>/<verb>: " (a pattern).


def fault(behaviour: dict[str, Any], expected: str, name: str, **entry: Any) -> Any:
    return pytest.param(behaviour, expected, entry, id=name)


FILTER_FAULTS = [
    fault(
        {"raw": "not json"}, r"invalid JSON in reply: Expecting value: line 1 column 1 \(char 0\)", "not JSON"
    ),
    fault({"raw": ""}, r"empty reply \(expected JSON\)", "empty"),
    fault({"reply": [1, 2]}, r"reply must be an object, got \[1, 2\]", "a list"),
    fault(
        {"reply": {"NodeNames": 3}},
        r'reply field "NodeNames" must be a list of strings, got 3',
        "NodeNames",
        nodeCacheCapable=True,
    ),
    fault(
        {"reply": {"Nodes": {"items": [{"metadata": {"name": 7}}]}}},
        r'reply field "Nodes\.items\[0\]\.metadata\.name" must be a string, got 7',
        "Nodes",
    ),
    fault(
        {"reply": {"FailedNodes": {"big": 1}}},
        r'reply field "FailedNodes\.big" must be a string, got 1',
        "FailedNodes",
    ),
    fault({"reply": {"Error": 500}}, r'reply field "Error" must be a string, got 500', "Error"),
    fault(
        {"reply": {"NodeNames": ["nowhere"]}},
        r'claims a filtered node "nowhere" which is not found in the input node list',
        "unknown node",
        nodeCacheCapable=True,
    ),
    fault(
        {"status": 503},
        r'HTTP status 503 Service Unavailable \(expected 200\): \{"error": "configured failure"\}',
        "HTTP 503",
    ),
    fault({"body_bytes": 20_000_000}, r"reply larger than 10 MiB", "huge body"),
    fault(
        {"announce_bytes": 20_000_000},
        r"reply larger than 10 MiB \(Content-Length: 20000000\)",
        "huge Content-Length",
    ),
    fault({"hang": True}, r"no reply within 0\.5s", "never answers"),
    fault({"stall_body": True}, r"no reply within 0\.5s", "stalls in the body"),
    fault({"drip": 0.05}, r"no reply within 0\.5s", "a byte now and then"),
    fault({"close": True}, r"the server closed the connection without a reply", "closes"),
]

PRIORITIZE_FAULTS = [
    fault(
        {"raw": "{"},
        r"invalid JSON in reply: Expecting property name enclosed in double quotes: "
        r"line 1 column 2 \(char 1\)",
        "not JSON",
    ),
    fault(
        {"reply": {"small": 10}},
        r'reply must be a list of HostPriority objects, got \{"small": 10\}',
        "an object",
    ),
    fault(
        {"reply": [{"Host": "small", "Score": "10"}]},
        r'reply field "\[0\]\.Score" must be an integer, got "10"',
        "Score",
    ),
    fault(
        {"reply": [{"Host": ["small"], "Score": 10}]},
        r'reply field "\[0\]\.Host" must be a string, got \["small"\]',
        "Host",
    ),
    fault(
        {"reply": [{"Host": "small", "Score": 100}]},
        r'reply field "\[0\]\.Score" must be between 0 and 10, got 100',
        "out of range",
    ),
    fault({"body_bytes": 20_000_000}, r"reply larger than 10 MiB", "huge body"),
    fault({"hang": True}, r"no reply within 0\.5s", "never answers"),
]

PREEMPT_FAULTS = [
    fault({"raw": "yes"}, r"invalid JSON in reply: Expecting value: line 1 column 1 \(char 0\)", "not JSON"),
    fault(
        {"reply": {"NodeNameToMetaVictims": ["n2"]}},
        r'reply field "NodeNameToMetaVictims" must be an object, got \["n2"\]',
        "NodeNameToMetaVictims",
    ),
    fault(
        {"reply": {"NodeNameToMetaVictims": {"n2": {"Pods": [{"UID": 1}]}}}},
        r'reply field "NodeNameToMetaVictims\.n2\.Pods\[0\]\.UID" must be a string, got 1',
        "UID",
    ),
    fault(
        {"reply": {"NodeNameToMetaVictims": {"n2": {"Pods": [{"UID": "x"}]}}}},
        r'claims to preempt pod \(UID: "x"\) on node "n2", but the pod is not found on that node',
        "unknown pod",
    ),
    fault(
        {"reply": {"NodeNameToMetaVictims": {"n7": {"Pods": []}}}},
        r'claims to preempt on node "n7", which is not found',
        "unknown node",
    ),
    fault({"hang": True}, r"no reply within 0\.5s", "never answers"),
]

BIND_FAULTS = [
    fault({"reply": None}, r"reply must be an object, got null", "null"),
    fault(
        {"reply": {"Error": ["conflict"]}},
        r'reply field "Error" must be a string, got \["conflict"\]',
        "Error",
    ),
    fault({"error": "quota exceeded"}, r"error in reply: quota exceeded", "an error"),
    fault({"raw": "OK"}, r"invalid JSON in reply: Expecting value: line 1 column 1 \(char 0\)", "not JSON"),
    fault(
        {"announce_bytes": 11 * 1024 * 1024},
        r"reply larger than 10 MiB \(Content-Length: 11534336\)",
        "huge Content-Length",
    ),
    fault({"stall_body": True}, r"no reply within 0\.5s", "stalls"),
]

# What the server of the TLS tests answers when a call gets through.
TLS_ANSWER: dict[str, Any] = {"reject": {"big": "no licence"}}


def _segment(behaviour: dict[str, Any]) -> str:
    """The last segment of the URL prefix under which the shared extender process behaves so."""
    return hashlib.sha1(json.dumps(behaviour, sort_keys=True).encode()).hexdigest()[:12]


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Callable[[dict[str, Any]], str]]:
    """One extender process for all the rows of the tables: the URL prefix of a row's behaviour."""
    tables = {"filter": FILTER_FAULTS, "prioritize": PRIORITIZE_FAULTS, "preempt": PREEMPT_FAULTS}
    tables["bind"] = BIND_FAULTS
    behaviours = {
        f"{_segment(row.values[0])}/{verb}": row.values[0] for verb, rows in tables.items() for row in rows
    }
    behaviours[f"{_segment(TLS_ANSWER)}/filter"] = TLS_ANSWER
    with ExtenderProcess(behaviours, tmp_path_factory.mktemp("served") / "extender.log") as ext:
        base = ext.url.rsplit("/", 1)[0]
        yield lambda behaviour: f"{base}/{_segment(behaviour)}"


@pytest.fixture(scope="module")
def tls(tmp_path_factory: pytest.TempPathFactory) -> TLSFiles:
    return make_tls(tmp_path_factory.mktemp("tls"))


@pytest.fixture(scope="module")
def tls_served(tmp_path_factory: pytest.TempPathFactory, tls: TLSFiles) -> Iterator[str]:
    """An extender process serving HTTPS with a certificate of `tls`: its URL prefix."""
    log = tmp_path_factory.mktemp("tls-served") / "extender.log"
    with ExtenderProcess({"filter": TLS_ANSWER}, log, tls=tls) as ext:
        yield ext.url


@pytest.fixture
def start(tmp_path: Path) -> Iterator[Callable[..., ExtenderProcess]]:
    """Extender processes of the test's own, for what the shared one would mix up (its log)."""
    started: list[ExtenderProcess] = []

    def run(behaviour: dict[str, Any], extra: tuple[str, ...] = ()) -> ExtenderProcess:
        process = ExtenderProcess(behaviour, tmp_path / f"extender-{len(started)}.log", extra).__enter__()
        started.append(process)
        return process

    yield run
    for process in started:
        process.__exit__(None, None, None)


@pytest.fixture
def logs(monkeypatch: pytest.MonkeyPatch) -> Iterator[Logs]:
    """The extenders' log events. The module's logger is replaced for the capture: one cached by an
    earlier structlog configuration would bypass it."""
    with structlog.testing.capture_logs() as captured:
        monkeypatch.setattr(extenders, "log", structlog.get_logger(extenders.__name__))
        yield captured


def policy(url: str, ignorable: bool, **entry: Any) -> Algorithm:
    extender = {"urlPrefix": url, "httpTimeout": f"{TIMEOUT * 1000:g}ms", "ignorable": ignorable, **entry}
    spec = {
        "predicates": [{"name": "PodFitsResources"}],
        "priorities": [{"name": "LeastRequestedPriority", "weight": 1}],
        "extenders": [extender],
    }
    return compile_policy(spec, transport=HTTPTransport)


def place(algorithm: Algorithm) -> tuple[str, str, float]:
    """(the node chosen or "", the attempt's error or "", seconds taken)."""
    began = time.monotonic()
    try:
        node = algorithm.schedule(model_pod(cpu="500m"), NODES, random.Random(0)).node_name
    except FitError as exc:
        assert isinstance(exc, ExtenderFailure), exc
        return "", str(exc), time.monotonic() - began
    return node, "", time.monotonic() - began


def skipped(logs: Logs) -> list[tuple[str, str, str]]:
    return [(e["extender"], e["verb"], e["log_level"]) for e in logs if e["event"] == "extender_skipped"]


def check_filter_fault(url: str, expected: str, logs: Logs, **entry: Any) -> None:
    """Not ignorable: the attempt fails with `expected`, named. Ignorable: a warning with the same
    message, and the pod placed by the rest of the policy."""
    message = rf"extender {re.escape(url)}/filter: {expected}"
    node, error, took = place(policy(url, False, filterVerb="filter", **entry))
    assert node == "" and re.fullmatch(message, error), f"placed on {node!r}, error {error!r}"
    assert took < BOUND, f"{took:.2f}s to fail with {error!r}"
    logs.clear()
    node, error, took = place(policy(url, True, filterVerb="filter", **entry))
    assert (node, error) == ("big", ""), logs
    assert took < BOUND, f"{took:.2f}s to skip: {logs}"
    assert skipped(logs) == [(url, "filter", "warning")], logs
    assert re.fullmatch(message, logs[0]["error"]), logs


@pytest.mark.parametrize(("behaviour", "expected", "entry"), FILTER_FAULTS)
def test_a_misbehaving_filter_extender(
    served: Callable[[dict[str, Any]], str],
    logs: Logs,
    behaviour: dict[str, Any],
    expected: str,
    entry: dict[str, Any],
) -> None:
    check_filter_fault(served(behaviour), expected, logs, **entry)


def test_a_refused_connection(logs: Logs) -> None:
    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{probe.getsockname()[1]}/scheduler"
    check_filter_fault(url, "connection refused", logs)


TLS_FAULTS = [
    pytest.param(
        "https", {}, r"TLS: certificate verify failed: unable to get local issuer certificate", id="untrusted"
    ),
    pytest.param(
        "https",
        {"serverName": "wrong.example"},
        r"TLS: certificate verify failed: Hostname mismatch, certificate is not valid for 'wrong\.example'\.",
        id="wrong name",
    ),
    pytest.param(
        "plain HTTP server",
        {},
        r"TLS: wrong version number \(is the server speaking plain HTTP\?\)",
        id="plain HTTP server",
    ),
    pytest.param(
        "plain HTTP client", {}, r"the server closed the connection without a reply", id="plain HTTP client"
    ),
]


@pytest.mark.parametrize(("case", "tls_config", "expected"), TLS_FAULTS)
def test_tls_failures(
    served: Callable[[dict[str, Any]], str],
    tls_served: str,
    tls: TLSFiles,
    logs: Logs,
    case: str,
    tls_config: dict[str, str],
    expected: str,
) -> None:
    url = {
        "https": tls_served,
        "plain HTTP server": served(TLS_ANSWER).replace("http://", "https://"),
        "plain HTTP client": tls_served.replace("https://", "http://"),
    }[case]
    entry = {"tlsConfig": {"caFile": str(tls.ca), **tls_config}} if tls_config else {}
    check_filter_fault(url, expected, logs, **entry)


def test_tls_that_is_set_up_right_works(tls_served: str, tls: TLSFiles) -> None:
    """The control for the TLS failures: the same server, trusted through its CA, under its name."""
    for name in ("", "localhost"):
        entry = {"filterVerb": "filter", "tlsConfig": {"caFile": str(tls.ca), "serverName": name}}
        assert place(policy(tls_served, False, **entry))[:2] == ("small", "")
    # 1.20's makeTransport: enableHTTPS without a CA verifies nothing.
    assert place(policy(tls_served, False, filterVerb="filter", enableHTTPS=True))[:2] == ("small", "")


@pytest.mark.parametrize("behaviour", [{"hang": True}, {"stall_body": True}, {"drip": 0.05}])
def test_a_call_given_up_on_closes_its_connection(
    start: Callable[..., ExtenderProcess], behaviour: dict[str, Any]
) -> None:
    """The worker thread that made the call stops with it, rather than wait for the server."""
    ext = start({"filter": behaviour})
    assert "no reply within" in place(policy(ext.url, False, filterVerb="filter"))[1]
    deadline = time.monotonic() + BOUND
    while ext.gone() != ["filter"] and time.monotonic() < deadline:
        time.sleep(0.05)
    assert ext.gone() == ["filter"]


def test_a_kept_alive_connection_the_server_closed_is_retried_once(
    start: Callable[..., ExtenderProcess],
) -> None:
    ext = start({"filter": TLS_ANSWER}, ("--keep-alive", "0.2"))
    algorithm = policy(ext.url, False, filterVerb="filter")
    assert place(algorithm)[:2] == ("small", "")
    time.sleep(0.6)  # the server drops the idle connection
    assert place(algorithm)[:2] == ("small", "")
    assert [r["verb"] for r in ext.requests()] == ["filter", "filter"]


@pytest.mark.parametrize(("behaviour", "expected", "entry"), PRIORITIZE_FAULTS)
def test_a_misbehaving_prioritize_extender_is_skipped(
    served: Callable[[dict[str, Any]], str],
    logs: Logs,
    behaviour: dict[str, Any],
    expected: str,
    entry: dict[str, Any],
) -> None:
    url = served(behaviour)
    message = rf"extender {re.escape(url)}/prioritize: {expected}"
    for ignorable in (False, True):
        logs.clear()
        node, error, took = place(policy(url, ignorable, prioritizeVerb="prioritize", weight=100))
        assert (node, error) == ("big", ""), logs  # LeastRequestedPriority alone decides
        assert took < BOUND, f"{took:.2f}s: {logs}"
        assert skipped(logs) == [(url, "prioritize", "warning")], logs
        assert re.fullmatch(message, logs[0]["error"]), logs


def test_a_prioritize_extender_that_answers_well_decides(start: Callable[..., ExtenderProcess]) -> None:
    """The control for the prioritize faults: valid scores, weighted, outweigh LeastRequested."""
    ext = start({"prioritize": {"scores": {"small": 10}}})
    assert place(policy(ext.url, False, prioritizeVerb="prioritize", weight=100))[:2] == ("small", "")


def crowded() -> tuple[Pod, Any]:
    """n1 holds one low-priority pod and n2 two: evicting on n1 costs least, without extenders."""
    n1 = node_info(model_node("n1", cpu="2"), [model_pod("v1", cpu="2")])
    n2 = node_info(model_node("n2", cpu="2"), [model_pod("v2a", cpu="1"), model_pod("v2b", cpu="1")])
    return model_pod("urgent", cpu="2", priority=100), snapshot(n1, n2)


@pytest.mark.parametrize(("behaviour", "expected", "entry"), PREEMPT_FAULTS)
def test_a_misbehaving_preempt_extender(
    served: Callable[[dict[str, Any]], str],
    logs: Logs,
    behaviour: dict[str, Any],
    expected: str,
    entry: dict[str, Any],
) -> None:
    url = served(behaviour)
    message = rf"extender {re.escape(url)}/preempt: {expected}"
    for ignorable in (False, True):
        logs.clear()
        extender = {
            "urlPrefix": url,
            "preemptVerb": "preempt",
            "httpTimeout": "500ms",
            "ignorable": ignorable,
        }
        spec = {"predicates": [{"name": "PodFitsResources"}], "priorities": [], "extenders": [extender]}
        algorithm = compile_policy(spec, transport=HTTPTransport)
        pod, snap = crowded()
        with pytest.raises(FitError) as caught:
            algorithm.schedule(pod, snap, random.Random(0))
        began = time.monotonic()
        outcome = attempt(
            caught.value, snap, algorithm.predicates, (), random.Random(0), "", algorithm.extenders
        )
        took = time.monotonic() - began
        assert isinstance(outcome, PreemptionOutcome) and took < BOUND, f"{took:.2f}s: {outcome}"
        chosen = outcome.preemption
        if ignorable:  # skipped: the cheapest eviction, as without extenders
            assert chosen.node_name == "n1", chosen
            assert skipped(logs) == [(url, "preempt", "warning")], logs
            assert re.fullmatch(message, logs[0]["error"]), logs
        else:  # the preemption stops with the error; an earlier nomination stays
            assert chosen.node_name == "" and not chosen.clear_nomination, chosen
            assert re.fullmatch(message, chosen.message), chosen.message


@pytest.mark.parametrize(("behaviour", "expected", "entry"), BIND_FAULTS)
def test_a_misbehaving_bind_extender(
    served: Callable[[dict[str, Any]], str], behaviour: dict[str, Any], expected: str, entry: dict[str, Any]
) -> None:
    url = served(behaviour)
    binder = policy(url, False, bindVerb="bind").binder_for(model_pod())
    assert binder is not None
    began = time.monotonic()
    with pytest.raises(ExtenderError) as caught:
        binder.bind(model_pod(), "big")
    assert re.fullmatch(rf"extender {re.escape(url)}/bind: {expected}", str(caught.value)), caught.value
    assert time.monotonic() - began < BOUND
