"""One scheduler, several profiles: which pods are queued, and which algorithm each pod runs."""

from __future__ import annotations

import random
from typing import Any, cast

from kubesched.algorithm.batch import schedule_batch
from kubesched.algorithm.generic import FitError, ScheduleResult
from kubesched.kube.binding import Binder
from kubesched.kube.events import Recorder
from kubesched.model.objects import node_from_dict, pod_from_dict
from kubesched.policy.compile import compile_policy, default_algorithm
from kubesched.runtime.cache import SchedulerCache
from kubesched.runtime.scheduler import Scheduler, SchedulerSettings
from kubesched_dev.fixtures import make_node, make_pod

OWN = "own"
PICKY = {"disktype": "ssd"}  # no node has this label


def new_scheduler() -> Scheduler:
    # Neither binds nor events happen here: nothing is scheduled.
    return Scheduler(SchedulerSettings(OWN), default_algorithm(), cast(Binder, None), cast(Recorder, None))


def add(scheduler: Scheduler, name: str, scheduler_name: str, **kwargs: Any) -> str:
    raw = make_pod(name, scheduler_name=scheduler_name, cpu="100m", **kwargs)
    scheduler.on_pod("ADDED", raw)
    return str(raw["metadata"]["uid"])


def test_a_profile_picks_up_its_waiting_pods_when_it_appears_and_drops_them_when_it_goes() -> None:
    scheduler = new_scheduler()
    ours = add(scheduler, "ours", OWN)
    early = add(scheduler, "early", "batch")
    assert ours in scheduler.queue and early not in scheduler.queue

    assert scheduler.set_profiles({"batch": compile_policy({})})
    assert early in scheduler.queue
    late = add(scheduler, "late", "batch")
    assert late in scheduler.queue

    assert scheduler.set_profiles({})
    assert set(scheduler.profiles) == {OWN}
    assert ours in scheduler.queue
    assert early not in scheduler.queue and late not in scheduler.queue
    # Still pending, and picked up again if the profile comes back.
    assert scheduler.set_profiles({"batch": compile_policy({})})
    assert early in scheduler.queue and late in scheduler.queue


def test_the_own_profile_falls_back_to_the_base_algorithm() -> None:
    scheduler = new_scheduler()
    base = scheduler.profiles[OWN]
    policy = compile_policy({"priorities": []})
    assert scheduler.set_profiles({OWN: policy})
    assert scheduler.profiles[OWN] is policy
    assert not scheduler.set_profiles({OWN: policy})  # nothing changed
    assert scheduler.set_profiles({})
    assert scheduler.profiles[OWN] is base


def test_bound_and_deleted_pods_are_not_picked_up() -> None:
    scheduler = new_scheduler()
    scheduler.on_node(None, make_node("n1"))
    bound = add(scheduler, "bound", "batch", node_name="n1")
    gone = add(scheduler, "gone", "batch")
    scheduler.on_pod("DELETED", make_pod("gone", scheduler_name="batch"))
    scheduler.set_profiles({"batch": compile_policy({})})
    assert bound not in scheduler.queue and gone not in scheduler.queue


def test_a_batch_runs_each_pod_under_its_own_profile() -> None:
    cache = SchedulerCache()
    cache.set_node(node_from_dict(make_node("n1")))
    strict = default_algorithm()
    loose = compile_policy({"predicates": []})  # the mandatory ones only: node selectors ignored
    pods = [
        pod_from_dict(make_pod("strict", scheduler_name="strict", node_selector=PICKY)),
        pod_from_dict(make_pod("loose", scheduler_name="loose", node_selector=PICKY)),
    ]
    outcomes, _ = schedule_batch(
        {"strict": strict, "loose": loose}, pods, cache.snapshot(), random.Random(0), 0
    )
    assert isinstance(outcomes[0], FitError)
    assert set(outcomes[0].node_reasons) == {"n1"}
    assert isinstance(outcomes[1], ScheduleResult) and outcomes[1].node_name == "n1"
