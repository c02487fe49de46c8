"""Every benign behaviour changes the form of what is written, never its meaning."""

from __future__ import annotations

import copy
import threading
import time

import pytest

from reference_gateway import behaviours, status
from reference_gateway.controller import WorkQueue
from reference_gateway.revisions import REVISIONS

from .objects import LATER, NOW, NS, controller_for

SEED, V05 = REVISIONS["seed"], REVISIONS["v0.5"]
POOL = ("InferencePool", NS, "pool")
ROUTE = ("HTTPRoute", NS, "route")
META = ("type", "status", "reason", "observedGeneration", "lastTransitionTime")


def with_status(pool, result):
    out = copy.deepcopy(pool)
    out["status"] = copy.deepcopy(result.status)
    return out


def meaning(conditions):
    """What a condition list says, whatever its order, extra types and messages."""
    return sorted((c["type"], c["status"], c["reason"], c["observedGeneration"]) for c in conditions
                  if c["type"] in ("Accepted", "ResolvedRefs"))


def pool_conditions(objs, pool=None, world=None, now=NOW):
    if pool is None:
        pool, world = objs.basic()
    return objs.entry_for(status.pool_status(pool, world, SEED, [], now).status, "gw")["conditions"]


def route_conditions(objs, now=NOW):
    _, world = objs.basic()
    return status.route_status(world.routes[(NS, "route")], world, now)["parents"][0]["conditions"]


def test_every_behaviour_is_described_and_known():
    assert set(behaviours.BEHAVIOURS) == {"eager-writer", "slow", "reordered-conditions", "extra-conditions",
                                          "frequent-rewrites", "no-placeholder-restore"}
    with pytest.raises(ValueError):
        behaviours.activate(["no-such-behaviour"])
    with pytest.raises(KeyError):
        behaviours.on("no-such-behaviour")


@pytest.mark.parametrize("name", sorted(behaviours.BEHAVIOURS))
def test_no_behaviour_changes_what_the_conditions_say(objs, name):
    plain_pool, plain_route = pool_conditions(objs), route_conditions(objs)
    behaviours.activate([name])
    pool, route = pool_conditions(objs), route_conditions(objs)
    assert meaning(pool) == meaning(plain_pool) and meaning(route) == meaning(plain_route)
    assert len(pool) <= 8 and len(route) <= 8
    for c in pool + route:
        assert set(META) <= set(c) and c["lastTransitionTime"] == NOW


def test_reordered_conditions(objs):
    behaviours.activate(["reordered-conditions"])
    assert [c["type"] for c in pool_conditions(objs)] == ["ResolvedRefs", "Accepted"]
    assert [c["type"] for c in route_conditions(objs)] == ["ResolvedRefs", "Accepted"]


def test_extra_conditions(objs):
    behaviours.activate(["extra-conditions"])
    for conds in (pool_conditions(objs), route_conditions(objs)):
        assert [c["type"] for c in conds] == ["Accepted", "ResolvedRefs", "example.com/Programmed", "Reconciled"]
        assert all(c["status"] == "True" for c in conds[2:])


def test_frequent_rewrites_change_only_the_messages(objs):
    behaviours.activate(["frequent-rewrites"])
    pool, world = objs.basic()
    first = status.pool_status(pool, world, SEED, [], NOW)
    same_round = status.pool_status(with_status(pool, first), world, SEED, first.owned, LATER).status
    assert same_round == first.status  # nothing to write between two rounds
    behaviours.next_rewrite_round()
    again = status.pool_status(with_status(pool, first), world, SEED, first.owned, LATER).status
    before, after = first.status["parent"][0]["conditions"], again["parent"][0]["conditions"]
    assert [{k: c[k] for k in META} for c in before] == [{k: c[k] for k in META} for c in after]
    assert all("(rewrite 0)" in b["message"] and "(rewrite 1)" in a["message"] for b, a in zip(before, after))


def test_frequent_rewrites_reach_only_managed_objects(objs):
    theirs = objs.pool("theirs")  # no route: not managed
    ctl, _ = controller_for(objs, [objs.gateway_class(), objs.gateway(), objs.route(), objs.pool(),
                                   objs.service(), theirs])
    behaviours.activate(["frequent-rewrites"])
    ctl.reconcile(POOL)
    ctl.reconcile(ROUTE)
    ctl.reconcile(("InferencePool", NS, "theirs"))
    with ctl.cache.lock:
        managed = {pk for pk, p in ctl.cache.pools.items()
                   if status.pool_has_entry_of(p, ctl.cache, SEED, ctl._owned.get(pk, []))}
        routes = {rk for rk, r in ctl.cache.routes.items() if status.route_has_entry_of(r, ctl.cache)}
    assert managed == {(NS, "pool")} and routes == {(NS, "route")}


def test_eager_writer_writes_every_pool_at_once(objs):
    lone = objs.pool("lone", ns="elsewhere")  # no Gateway, no route in its namespace
    ctl, kube = controller_for(objs, [lone])
    ctl.reconcile(("InferencePool", "elsewhere", "lone"))
    assert kube.puts == []
    behaviours.activate(["eager-writer"])
    ctl.reconcile(("InferencePool", "elsewhere", "lone"))
    assert [p["status"] for p in kube.puts] == [{"parent": []}]
    ctl.reconcile(("InferencePool", "elsewhere", "lone"))  # written: nothing more to do
    assert len(kube.puts) == 1


def test_eager_writer_keeps_foreign_entries_and_the_placeholder_it_put_back(objs):
    theirs = {"parentRef": {"group": "gateway.networking.k8s.io", "kind": "Gateway", "name": "x"}, "conditions": []}
    assert status.eager_pool_status({"parent": [theirs]}, V05, managed=False) == {"parent": [theirs]}
    fresh = {"parent": [V05.placeholder()]}
    assert status.eager_pool_status(fresh, V05, managed=False) == {"parent": []}
    assert status.eager_pool_status(fresh, V05, managed=True) == fresh
    assert status.eager_pool_status({}, SEED, managed=False) == {"parent": []}


def test_eager_writer_under_v05_removes_then_restores_the_placeholder(objs):
    behaviours.activate(["eager-writer"])
    pool, world = objs.basic()
    pool["status"] = {"parent": [V05.placeholder()]}
    ctl, kube = controller_for(objs, [objs.gateway_class(), objs.gateway(), objs.route(), pool, objs.service()])
    ctl.revision = V05
    ctl.reconcile(POOL)
    assert [e["parentRef"]["kind"] for e in kube.objects[POOL]["status"]["parent"]] == ["Gateway"]
    ctl.cache.apply("HTTPRoute", "DELETED", objs.route())
    ctl.reconcile(POOL)
    ctl.reconcile(POOL)  # and it stays: the pool was managed
    assert kube.objects[POOL]["status"]["parent"] == [V05.placeholder()]


def test_slow_queue_hands_out_each_item_its_delay_after_its_event():
    q = WorkQueue(delay=0.3)
    started = time.monotonic()
    items = [("InferencePool", NS, f"p{i}") for i in range(20)]
    q.add(items[:10])
    time.sleep(0.1)
    q.add(items[10:])
    q.add(items[:1])  # already waiting: keeps its earlier due time
    got = []
    for _ in items:
        item, _enqueued = q.get()
        got.append((item, time.monotonic() - started))
    assert [i for i, _ in got] == items
    first, second = [t for _, t in got[:10]], [t for _, t in got[10:]]
    assert all(0.3 <= t < 0.38 for t in first), first  # not one after another
    assert all(0.4 <= t < 0.48 for t in second), second
    q.close()


def test_slow_queue_wakes_for_an_earlier_item():
    q = WorkQueue(delay=5)
    q.add([POOL])
    result = []
    t = threading.Thread(target=lambda: result.append(q.get()))
    t.start()
    time.sleep(0.05)
    q.add_after(ROUTE, 0.05)  # a retry, due long before the slow item
    t.join(2)
    assert result and result[0][0] == ROUTE
    q.close()


def test_slow_delay_comes_from_the_switch():
    assert behaviours.write_delay() == 0
    behaviours.activate(["slow"], slow_seconds=12)
    assert behaviours.write_delay() == 12


def test_status_helpers_do_not_mutate(objs):
    behaviours.activate(list(behaviours.BEHAVIOURS))
    pool, world = objs.basic()
    before = copy.deepcopy(pool)
    status.eager_pool_status(status.pool_status(pool, world, SEED, [], NOW).status, SEED, managed=False)
    assert pool == before


def test_no_placeholder_restore_leaves_the_list_empty(objs):
    pool, world = objs.basic()
    first = status.pool_status(pool, world, V05, [], NOW)
    del world.routes[(NS, "route")]
    released = status.pool_status(with_status(pool, first), world, V05, first.owned, NOW).status
    assert released["parent"] == [V05.placeholder()]
    behaviours.activate(["no-placeholder-restore"])
    assert status.pool_status(with_status(pool, first), world, V05, first.owned, NOW).status["parent"] == []
