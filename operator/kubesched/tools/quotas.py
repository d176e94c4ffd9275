"""`kubectl kubesched quota`: every ElasticQuota, what its pods use against its min and max, and the
pods waiting on it, from a cluster state (tools/snapshot.ClusterState).

Use is counted as the scheduler counts it (model/quota.py, on the same cache a scheduler replica
fills): the requests of the bound, unfinished pods of the quota's namespace. A pod waits on a quota
when it is pending and its PodScheduled=False condition names the quota ("ElasticQuota ns/name"):
the scheduler wrote that the quota refused its last attempt (the pod's own, or its PodGroup's). A
quota that is not in force (invalid, or another in its namespace is older) says why, and counts
nothing: the scheduler ignores it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

from kubesched.model.quota import KIND, elastic_quota_from_dict, in_one_unit
from kubesched.tools.snapshot import ClusterState
from kubesched.tools.table import table


@dataclass(frozen=True, slots=True)
class QuotaResource:
    """One resource of a quota, in one unit ("-": a max that does not name it, unlimited; the use
    of a quota not in force)."""

    resource: str
    used: str
    min: str
    max: str


@dataclass(frozen=True, slots=True)
class QuotaReport:
    namespace: str
    name: str
    in_force: bool
    problem: str  # why it is not in force ("" when it is)
    resources: tuple[QuotaResource, ...]
    waiting: tuple[str, ...]  # the names of the pods waiting on it, in listing order


def quota_reports(state: ClusterState, namespace: str | None = None) -> list[QuotaReport]:
    """Every ElasticQuota of `state` (of `namespace` only, when given), by namespace and name."""
    parsed = [elastic_quota_from_dict(raw) for raw in state.objects.get(KIND, ())]
    parsed = [q for q in parsed if namespace is None or q.namespace == namespace]
    if not parsed:
        return []
    quotas = state.cache().quotas()
    waiting = _waiting(state)
    reports = []
    for quota in sorted(parsed, key=lambda q: (q.namespace, q.name)):
        in_force = quotas.of(quota.namespace)
        if quota.error:
            problem = f"ignored: its spec is invalid: {quota.error}"
        elif in_force is not None and in_force.key != quota.key:
            problem = (
                f"ignored: ElasticQuota {in_force.name}, older, is in force in namespace {quota.namespace}"
            )
        else:
            problem = ""
        used = quotas.used_by(quota.namespace) if not problem else {}
        lines = []
        for name in sorted({*used, *quota.min, *quota.max}):
            bound = quota.max.get(name)
            shown = in_one_unit(
                name, used.get(name, 0), quota.min.get(name, 0), *([] if bound is None else [bound])
            )
            counted = "-" if problem else shown[0]  # the scheduler counts nothing against it
            lines.append(QuotaResource(name, counted, shown[1], "-" if bound is None else shown[2]))
        mentioned = f"ElasticQuota {quota.key}"
        names = tuple(name for ns, name, message in waiting if ns == quota.namespace and mentioned in message)
        reports.append(QuotaReport(quota.namespace, quota.name, not problem, problem, tuple(lines), names))
    return reports


def _waiting(state: ClusterState) -> list[tuple[str, str, str]]:
    """(namespace, name, message) of the pending pods whose PodScheduled condition is False."""
    found = []
    for raw in state.pods:
        meta = raw.get("metadata") or {}
        if (raw.get("spec") or {}).get("nodeName") or meta.get("deletionTimestamp"):
            continue
        for condition in (raw.get("status") or {}).get("conditions") or ():
            if condition.get("type") == "PodScheduled" and condition.get("status") == "False":
                found.append(
                    (str(meta.get("namespace")), str(meta.get("name")), str(condition.get("message")))
                )
    return found


def as_dict(reports: Sequence[QuotaReport]) -> dict[str, Any]:
    def one(report: QuotaReport) -> dict[str, Any]:
        out = asdict(report)
        out["inForce"] = out.pop("in_force")
        return out

    return {"quotas": [one(r) for r in reports]}


def render_table(reports: Sequence[QuotaReport], wide: bool = False) -> str:
    """One row per resource of each quota; wide: the waiting pods' names too."""
    if not reports:
        return "No ElasticQuotas found."
    header = ["NAMESPACE", "NAME", "RESOURCE", "USED", "MIN", "MAX", "WAITING"]
    rows = [[*header, "WAITING PODS"] if wide else header]
    notes = []
    for report in reports:
        head = [report.namespace, report.name]
        count = str(len(report.waiting))
        entries: Sequence[QuotaResource] = report.resources or (QuotaResource("-", "", "", ""),)
        for i, line in enumerate(entries):
            row = [*(head if i == 0 else ["", ""]), line.resource, line.used, line.min, line.max]
            row.append(count if i == 0 else "")
            if wide:
                row.append(", ".join(report.waiting) if i == 0 else "")
            rows.append(row)
        if report.problem:
            notes.append(f"{report.namespace}/{report.name}: {report.problem}")
    return "\n".join([*table(rows), *(f"note: {note}" for note in notes)])


__all__ = ["QuotaReport", "QuotaResource", "as_dict", "quota_reports", "render_table"]
