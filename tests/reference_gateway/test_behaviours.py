"""Every benign behaviour changes the form of what is written, never its meaning, under both APIs."""

from __future__ import annotations

import copy
import threading
import time

import pytest

from reference_gateway import behaviours, status
from reference_gateway.controller import WorkQueue

from .objects import LATER, NOW, NS, PLACEHOLDER, Objects, controller_for

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


def pool_status(objs, pool, world, remembered=(), now=NOW):
    return status.pool_status(pool, world, objs.rev, list(remembered), now)


def pool_conditions(objs, now=NOW):
    pool, world = objs.basic()
    return objs.entry_for(pool_status(objs, pool, world, now=now).status, "gw")["conditions"]


def route_conditions(objs, now=NOW):
    _, world = objs.basic()
    return status.route_status(world.routes[(NS, "route")], world, now)["parents"][0]["conditions"]


def test_every_behaviour_is_described_and_known():
    assert set(behaviours.BEHAVIOURS) == {"eager-writer", "slow", "reordered-conditions", "extra-conditions",
                                          "frequent-rewrites", "no-placeholder-restore", "lagging-cache",
                                          "slow-dataplane"}
    assert behaviours.TRAFFIC <= set(behaviours.BEHAVIOURS)
    with pytest.raises(ValueError):
        behaviours.activate(["no-such-behaviour"])
    with pytest.raises(KeyError):
        behaviours.on("no-such-behaviour")
    assert "changes nothing" in behaviours.BEHAVIOURS["no-placeholder-restore"]


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
    first = pool_status(objs, pool, world)
    same_round = pool_status(objs, with_status(pool, first), world, first.owned, LATER).status
    assert same_round == first.status  # nothing to write between two rounds
    behaviours.next_rewrite_round()
    again = pool_status(objs, with_status(pool, first), world, first.owned, LATER).status
    before, after = objs.parents(first.status)[0]["conditions"], objs.parents(again)[0]["conditions"]
    assert [{k: c[k] for k in META} for c in before] == [{k: c[k] for k in META} for c in after]
    assert all("(rewrite 0)" in b["message"] and "(rewrite 1)" in a["message"]
               for b, a in zip(before, after, strict=True))


def test_frequent_rewrites_reach_only_managed_objects(objs):
    theirs = objs.pool("theirs")  # no route: not managed
    ctl, _ = controller_for(objs, [*objs.basic_objects(), theirs])
    behaviours.activate(["frequent-rewrites"])
    ctl.reconcile(objs.pool_item())
    ctl.reconcile(ROUTE)
    ctl.reconcile(objs.pool_item("theirs"))
    pool_kind = objs.pool_item()[0]
    with ctl.cache.lock:
        managed = {pk for pk, p in objs.pools(ctl.cache).items()
                   if status.pool_has_entry_of(p, ctl.cache, objs.rev, ctl._owned.get((pool_kind, *pk), []))}
        routes = {rk for rk, r in ctl.cache.routes.items() if status.route_has_entry_of(r, ctl.cache)}
    assert managed == {(NS, "pool")} and routes == {(NS, "route")}


def test_eager_writer_writes_every_pool_at_once(objs):
    lone = objs.pool("lone", ns="elsewhere", status=objs.fresh or None)  # no Gateway, no route in its namespace
    item = objs.pool_item("lone", "elsewhere")
    ctl, kube = controller_for(objs, [lone])
    ctl.reconcile(item)
    assert kube.puts == []
    behaviours.activate(["eager-writer"])
    ctl.reconcile(item)
    # An empty list of parent entries, under the API's name for it (v0.5: the placeholder removed).
    assert [p["status"] for p in kube.puts] == [{objs.f.status_key: []}]
    ctl.reconcile(item)  # written: nothing more to do
    assert len(kube.puts) == 1


def test_eager_writer_keeps_foreign_entries_and_the_placeholder_it_put_back(objs):
    key = objs.f.status_key
    theirs = objs.foreign_entry("x")
    assert status.eager_pool_status({key: [theirs]}, objs.rev, managed=False) == {key: [theirs]}
    assert status.eager_pool_status({}, objs.rev, managed=False) == {key: []}
    if objs.f.placeholder:
        fresh = {key: [PLACEHOLDER]}
        assert status.eager_pool_status(fresh, objs.rev, managed=False) == {key: []}
        assert status.eager_pool_status(fresh, objs.rev, managed=True) == fresh


def test_eager_writer_removes_then_restores_the_placeholder_under_v05(v05):
    behaviours.activate(["eager-writer"])
    pool = v05.pool(status=v05.fresh)
    item = v05.pool_item()
    ctl, kube = controller_for(v05, [v05.gateway_class(), v05.gateway(), v05.route(), pool, v05.service()])
    ctl.reconcile(item)
    assert [e["parentRef"]["kind"] for e in kube.objects[item]["status"]["parent"]] == ["Gateway"]
    ctl.cache.apply("HTTPRoute", "DELETED", v05.route())
    ctl.reconcile(item)
    ctl.reconcile(item)  # and it stays: the pool was managed
    assert kube.objects[item]["status"]["parent"] == [PLACEHOLDER]


@pytest.mark.parametrize("name", ["seed", "v1.0", "v1.6"])
def test_eager_writer_leaves_an_empty_list_where_there_is_no_placeholder(name):
    objs = Objects(name)
    behaviours.activate(["eager-writer"])
    item = objs.pool_item()
    ctl, kube = controller_for(objs, objs.basic_objects())
    ctl.reconcile(item)
    ctl.cache.apply("HTTPRoute", "DELETED", objs.route())
    ctl.reconcile(item)
    ctl.reconcile(item)
    assert kube.objects[item]["status"] == {objs.f.status_key: []}
    assert len(kube.puts) == 2


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
    q.add([("InferencePool", NS, "pool")])
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
    assert behaviours.dataplane_delay() == 0
    behaviours.activate(["slow-dataplane"], slow_seconds=5)
    assert (behaviours.write_delay(), behaviours.dataplane_delay()) == (0, 5)


def test_status_helpers_do_not_mutate(objs):
    behaviours.activate(list(behaviours.BEHAVIOURS))
    pool, world = objs.basic()
    before = copy.deepcopy(pool)
    status.eager_pool_status(pool_status(objs, pool, world).status, objs.rev, managed=False)
    assert pool == before


def test_no_placeholder_restore(objs):
    """v0.5: the list is left empty instead of holding the placeholder again; elsewhere it changes nothing."""
    pool, world = objs.basic()
    first = pool_status(objs, pool, world)
    del world.routes[(NS, "route")]
    released = pool_status(objs, with_status(pool, first), world, first.owned).status
    assert objs.parents(released) == objs.released
    behaviours.activate(["no-placeholder-restore"])
    assert pool_status(objs, with_status(pool, first), world, first.owned).status == {objs.f.status_key: []}
