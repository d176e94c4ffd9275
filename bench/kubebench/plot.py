"""The PNG: one panel per figure, a group of bars per scenario, min-max whiskers over the repeats."""

from __future__ import annotations

import textwrap
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")  # no display here; must precede pyplot

import matplotlib.pyplot as plt

from kubebench.report import GANG_RATIO, VERSUS_KUBE_SCHEDULER, median
from kubebench.schedulers import (
    KUBE_SCHEDULER,
    KUBESCHED,
    KUBESCHED_GANGS,
    KUBESCHED_QUOTAS,
    KUBESCHED_SAMPLED,
    LABELS,
    NULL,
)

COLORS = {
    NULL: "#9e9e9e",
    KUBE_SCHEDULER: "#3f6fb5",
    KUBESCHED: "#e07b24",
    KUBESCHED_SAMPLED: "#f2b880",
    KUBESCHED_GANGS: "#8e4f9e",
    KUBESCHED_QUOTAS: "#4f9e6b",
}
PANELS = (
    ("pods_per_s", "throughput, pods/s (first to last bind)", "higher is better"),
    ("makespan_pods_per_s", "pods/s from the scheduler's start (makespan)", "higher is better"),
    ("first_bind_s", "scheduler start to first bind, s", "lower is better"),
    ("latency_p99_ms", "creation-to-bound p99, ms (dot: p50)", "lower is better"),
    ("cpu_s_per_1000_pods", "scheduler CPU s per 1,000 pods", "lower is better"),
    ("peak_rss_mib", "scheduler peak RSS, MiB", "lower is better"),
)


def plot(
    rows: list[dict[str, Any]],
    scenarios: list[str],
    titles: dict[str, str],
    schedulers: list[str],
    heading: str,
    path: Path,
    found_ratios: list[dict[str, Any]] | None = None,
) -> Path:
    """Draw the summary rows; kubesched's bars (every variant) carry their ratio to kube-scheduler
    ("k-s"), and those of kubesched with PodGroups their ratio to kubesched without ("no groups")."""
    versus = {
        (entry["scenario"], kind, key): value
        for entry in found_ratios or []
        for kind, name in VERSUS_KUBE_SCHEDULER
        for key, value in (entry.get(name) or {}).items()
        if value is not None
    }
    versus_no_groups = {
        (entry["scenario"], key): value
        for entry in found_ratios or []
        for key, value in (entry.get(GANG_RATIO) or {}).items()
        if value is not None
    }
    # One panel a row, as wide as the scenarios need; each scenario has slots only for the binders
    # that ran it (the constraint classes three, the gang run two).
    fig, axes = plt.subplots(len(PANELS), 1, figsize=(max(14.0, 2.4 * len(scenarios)), 4.2 * len(PANELS)))
    pairs = {(r["scenario"], r["scheduler"]) for r in rows}
    ran = {scenario: [k for k in schedulers if (scenario, k) in pairs] for scenario in scenarios}
    for ax, (key, title, hint) in zip(axes.flat, PANELS, strict=True):
        for kind in schedulers:
            xs, widths, heights, lows, highs, p50s = [], [], [], [], [], []
            for x, scenario in enumerate(scenarios):
                if kind not in ran[scenario]:
                    continue
                row = next(r for r in rows if r["scenario"] == scenario and r["scheduler"] == kind)
                width = 0.8 / len(ran[scenario])
                position = x + (ran[scenario].index(kind) - (len(ran[scenario]) - 1) / 2) * width
                value = median(row, key)
                if value is None:
                    mark = "failed" if row["ok_runs"] == 0 else "n/a"
                    ax.text(position, 0, mark, rotation=90, ha="center", va="bottom", fontsize=7)
                    continue
                metric = row["metrics"][key]
                xs.append(position)
                widths.append(width)
                heights.append(value)
                lows.append(value - metric["min"])
                highs.append(metric["max"] - value)
                p50s.append(median(row, "latency_p50_ms"))
                text = f"{value:.0f}" if value >= 10 else f"{value:.2f}"
                vs = versus.get((scenario, kind, key))
                if vs is not None:
                    text += f"\n{vs:.2f}x k-s"  # kubesched / kube-scheduler
                vs = versus_no_groups.get((scenario, key)) if kind == KUBESCHED_GANGS else None
                if vs is not None:
                    text += f"\n{vs:.2f}x no groups"
                ax.text(position, value, text, ha="center", va="bottom", fontsize=7)
            ax.bar(
                xs,
                heights,
                widths,
                yerr=[lows, highs],
                capsize=2,
                color=COLORS.get(kind, "black"),
                label=LABELS.get(kind, kind),
            )
            if key == "latency_p99_ms":
                ax.plot(xs, p50s, "o", color="black", markersize=3)
        ax.set_ylim(top=ax.get_ylim()[1] * 1.12)  # room for the labels above the bars
        ax.set_title(f"{title}  ({hint})", fontsize=10)
        ax.set_xticks(range(len(scenarios)))
        ax.set_xticklabels([textwrap.fill(titles.get(s, s), 30) for s in scenarios], fontsize=8)
        ax.grid(axis="y", alpha=0.3)
        ax.set_axisbelow(True)
    axes.flat[0].legend(fontsize=8)
    fig.suptitle(heading, fontsize=11)
    fig.tight_layout(rect=(0, 0, 1, 0.99))  # below the heading
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
