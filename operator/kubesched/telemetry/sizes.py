"""How many entries each of the scheduler's own maps, sets and lists holds (`/debug/sizes`).

A structure keyed by pods that keeps what no longer exists grows for as long as the process runs;
a soak test samples these figures with the RSS and checks that each returns to its starting size
once the cluster is back to its starting pods (bench/soak.py). Found by walking the attributes of
our own objects, so a new structure is reported without being registered anywhere.
"""

from __future__ import annotations

import asyncio
import ctypes
import functools
import gc
import sys
import tracemalloc
from collections import Counter, deque
from collections.abc import Mapping
from typing import Any

from prometheus_client import REGISTRY

CONTAINERS = (dict, set, list, deque)
DEPTH = 5  # scheduler -> recorder -> correlator -> spam filter -> LRU -> its OrderedDict


def container_sizes(roots: Mapping[str, object], depth: int = DEPTH) -> dict[str, int]:
    """len() of every container held by an attribute of `roots`, or of a kubesched object they hold,
    by attribute path (`scheduler.queue._pods`); an object reachable twice is reported once."""
    sizes: dict[str, int] = {}
    seen: set[int] = set()
    # Depth first, with a stack of its own: a recursive closure is a reference cycle, left to the GC.
    stack: list[tuple[object, str, int]] = [
        (root, name, depth) for name, root in reversed(list(roots.items()))
    ]
    while stack:
        obj, path, left = stack.pop()
        if id(obj) in seen:
            continue
        seen.add(id(obj))
        inner = []
        for name, value in _attributes(obj):
            where = f"{path}.{name}"
            if isinstance(value, CONTAINERS):
                sizes[where] = len(value)
                # Copied in one step: the event recorder's thread changes its maps while this runs.
                leaves = list(value.values()) if isinstance(value, dict) else []
                if leaves and all(isinstance(v, CONTAINERS) for v in leaves):
                    sizes[f"{where}[*]"] = sum(len(v) for v in leaves)  # a map of maps: its leaves
            elif left and type(value).__module__.startswith("kubesched."):
                inner.append((value, where, left - 1))
        stack.extend(reversed(inner))
    return sizes


def process_sizes() -> dict[str, int]:
    """Label sets of every labelled metric, the event loop's tasks and the objects the GC tracks."""
    sizes = {
        f"metrics.{collector._name}": len(collector._metrics)  # type: ignore[attr-defined]
        for collector in list(REGISTRY._collector_to_names)
        if isinstance(getattr(collector, "_metrics", None), dict)
    }
    sizes["asyncio.tasks"] = len(asyncio.all_tasks())
    sizes["gc.objects"] = len(gc.get_objects())
    # Where the RSS goes: Python's small objects and the arenas holding them, and what glibc's malloc
    # holds in use and free.
    sizes["python.allocated_blocks"] = sys.getallocatedblocks()
    sizes.update(_pymalloc_kib())
    sizes.update(_malloc_kib())
    if tracemalloc.is_tracing():
        # Beside the RSS: traced memory flat while the RSS grows points at the allocator, not at us.
        sizes["tracemalloc.traced_kib"] = tracemalloc.get_traced_memory()[0] // 1024
    return sizes


def cyclic_garbage() -> dict[str, int]:
    """Run a full collection and say what it freed, every type, most first: objects in reference
    cycles, which the collector's rare full collections (app/tuning.py) leave in memory until then.
    Every type, not the top few: a handful of ours would hide behind others' thousands."""
    gc.set_debug(gc.DEBUG_SAVEALL)  # what it frees is kept in gc.garbage, to be counted
    try:
        gc.collect()
        found = Counter(f"{type(obj).__module__}.{type(obj).__qualname__}" for obj in gc.garbage)
    finally:
        gc.set_debug(0)
        gc.garbage.clear()
        gc.collect()  # now frees them: cleared from gc.garbage, they are unreachable cycles again
    return dict(found.most_common())


class MemoryDiff:
    """Allocations grown since the baseline (the first call, or the last with `rebase`), by
    traceback or by line, while tracemalloc traces (PYTHONTRACEMALLOC=N); None when it does not."""

    def __init__(self) -> None:
        self._baseline: tracemalloc.Snapshot | None = None

    def top(
        self, limit: int = 25, group: str = "traceback", rebase: bool = False
    ) -> list[dict[str, Any]] | None:
        if not tracemalloc.is_tracing():
            return None
        snapshot = tracemalloc.take_snapshot().filter_traces(
            (tracemalloc.Filter(False, tracemalloc.__file__),)
        )
        if self._baseline is None or rebase:
            self._baseline = snapshot
        diffs = snapshot.compare_to(self._baseline, group)[:limit]
        return [
            {
                # Innermost frame first, as many as PYTHONTRACEMALLOC keeps.
                "where": " < ".join(f"{f.filename}:{f.lineno}" for f in reversed(d.traceback)),
                "size_diff": d.size_diff,
                "count_diff": d.count_diff,
                "size": d.size,
            }
            for d in diffs
        ]


class _MallInfo2(ctypes.Structure):
    _fields_ = [
        (name, ctypes.c_size_t)
        for name in (
            "arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks", "uordblks",
            "fordblks", "keepcost",
        )
    ]  # fmt: skip


@functools.cache
def _libc() -> ctypes.CDLL:
    """The loaded C library, looked up once: each CDLL made is a reference cycle of its own (a class
    made for its functions), left to the collector."""
    return ctypes.CDLL(None)


@functools.cache
def _mallinfo2() -> Any:
    """glibc's mallinfo2 in the loaded C library; None under another."""
    mallinfo2 = getattr(_libc(), "mallinfo2", None)
    if mallinfo2 is not None:
        mallinfo2.restype = _MallInfo2
    return mallinfo2


def _malloc_kib() -> dict[str, int]:
    """glibc's bytes in use and free (mallinfo2), in KiB; nothing from another C library.

    In use counts the blocks served with a mapping of their own (`malloc.mapped_kib`, from 128 KiB
    up: app/tuning.py) at their whole size, though only the pages written to are resident: each TLS
    connection's 256 KiB read buffer is one, of which a bind's connection writes a few KiB."""
    mallinfo2 = _mallinfo2()
    if mallinfo2 is None:
        return {}
    info = mallinfo2()
    return {
        "malloc.in_use_kib": (info.uordblks + info.hblkhd) // 1024,
        "malloc.mapped_kib": info.hblkhd // 1024,
        "malloc.free_kib": info.fordblks // 1024,
    }


PYMALLOC_FIGURES = {
    "# arenas allocated current": "python.arenas",
    "# bytes in allocated blocks": "python.blocks_kib",
    "# bytes in available blocks": "python.free_blocks_kib",
}


def _pymalloc_kib() -> dict[str, int]:
    """Python's own allocator: arenas mapped (1 MiB each), and the bytes of their blocks in use and
    free. Arenas many times the blocks in use is fragmentation: an arena is unmapped only once every
    block in it is free. The figures come from the report sys._debugmallocstats() prints, read from
    a memory stream instead of stderr; nothing when either function is missing."""
    report = _pymalloc_report()
    if report is None:
        return {}
    libc = _libc()
    buffer, size = ctypes.c_void_p(), ctypes.c_size_t()
    stream = libc.open_memstream(ctypes.byref(buffer), ctypes.byref(size))
    if not stream:
        return {}
    try:
        report(stream)
    finally:
        libc.fclose(stream)
    try:
        text = ctypes.string_at(buffer, size.value).decode(errors="replace")
    finally:
        libc.free(buffer)
    figures = {}
    for line in text.splitlines():
        label, _, value = line.partition("=")
        name = PYMALLOC_FIGURES.get(label.strip())
        if name is not None:
            number = int(value.strip().replace(",", ""))
            figures[name] = number if name == "python.arenas" else number // 1024
    return figures


@functools.cache
def _pymalloc_report() -> Any:
    """CPython's _PyObject_DebugMallocStats, set up to write to a C library's memory stream; None
    where either is missing."""
    libc = _libc()
    report = getattr(ctypes.pythonapi, "_PyObject_DebugMallocStats", None)
    if report is None or not hasattr(libc, "open_memstream"):
        return None
    libc.open_memstream.restype = ctypes.c_void_p
    libc.open_memstream.argtypes = [ctypes.POINTER(ctypes.c_void_p), ctypes.POINTER(ctypes.c_size_t)]
    libc.fclose.argtypes = [ctypes.c_void_p]
    libc.free.argtypes = [ctypes.c_void_p]
    report.argtypes = [ctypes.c_void_p]
    report.restype = ctypes.c_int
    return report


def _attributes(obj: object) -> list[tuple[str, Any]]:
    found = dict(getattr(obj, "__dict__", {}))
    for cls in type(obj).__mro__:
        slots = getattr(cls, "__slots__", ())
        for slot in (slots,) if isinstance(slots, str) else slots:
            if slot not in found and slot != "__weakref__" and hasattr(obj, slot):
                found[slot] = getattr(obj, slot)
    return list(found.items())
