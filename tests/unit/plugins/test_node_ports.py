"""PodFitsHostPorts (nodeports, HostPortInfo.CheckConflict): protocol, port and 0.0.0.0 semantics."""

from __future__ import annotations

import pytest

from kubesched.plugins.node_ports.filtering import ERR_REASON_PORTS, PodFitsHostPorts
from kubesched_dev.fixtures import model_node, model_pod, node_info, run_filter

CONFLICT = (ERR_REASON_PORTS,)


def port(host_port: int, ip: str = "", protocol: str = "") -> dict:
    out: dict = {"containerPort": host_port, "hostPort": host_port}
    if ip:
        out["hostIP"] = ip
    if protocol:
        out["protocol"] = protocol
    return out


@pytest.mark.parametrize(
    ("name", "wanted", "used", "expected"),
    [
        ("no ports wanted", [], [port(80)], ()),
        ("container port without hostPort", [{"containerPort": 80}], [port(80)], ()),
        ("free port", [port(8080)], [port(80)], ()),
        ("same port, default ip and protocol", [port(80)], [port(80)], CONFLICT),
        ("same port, other protocol", [port(80, protocol="UDP")], [port(80)], ()),
        ("empty protocol means TCP", [port(80, protocol="TCP")], [port(80)], CONFLICT),
        ("two specific ips do not conflict", [port(80, "10.0.0.1")], [port(80, "10.0.0.2")], ()),
        ("same specific ip", [port(80, "10.0.0.1")], [port(80, "10.0.0.1")], CONFLICT),
        ("wanted 0.0.0.0 against a specific ip", [port(80, "0.0.0.0")], [port(80, "10.0.0.1")], CONFLICT),
        ("wanted specific ip against 0.0.0.0", [port(80, "10.0.0.1")], [port(80)], CONFLICT),
        (
            "one of several conflicts",
            [port(81), port(82, protocol="UDP")],
            [port(82, "1.2.3.4", "UDP")],
            CONFLICT,
        ),
    ],
)
def test_ports(name: str, wanted: list[dict], used: list[dict], expected: tuple[str, ...]) -> None:
    info = node_info(model_node("n"), [model_pod("existing", ports=used)])
    assert run_filter(PodFitsHostPorts(), model_pod(ports=wanted), info) == expected
