"""Reads from followers: three daemons on a real etcd, each with its own data directory and
--replicas 1. Clients made with follower_reads=True read a world from the daemon that follows
its group (no MOVED followed), and their writes still go to the owner; the asyncio client's
subscription made there receives the owner's changes."""

from __future__ import annotations

import asyncio
import os
import shutil
import tempfile

import pytest

import scened
from conftest import run
from daemons import Daemon, Etcd, wait_until


@pytest.fixture(scope="module")
def replicas():
    etcd = Etcd()
    data = tempfile.mkdtemp(prefix="scened-data-")
    daemons = []
    try:
        for node in ("n0", "n1", "n2"):
            own = os.path.join(data, node)
            os.mkdir(own)
            daemons.append(Daemon("--cluster", etcd.url, "--data", own, "--node", node,
                                  "--lease-ttl", "2", "--fsync", "no", "--replicas", "1",
                                  name=f"scened {node}"))
        for d in daemons:
            with scened.Client("127.0.0.1", d.port) as c:
                wait_until(f"{d.name} to see every node",
                           lambda: len(c.call("cluster.nodes")["nodes"]) == 3)
        yield daemons
    finally:
        for d in reversed(daemons):
            d.stop()
        etcd.stop()
        shutil.rmtree(data, ignore_errors=True)


def made_on_n0(daemons, w):
    """World w made on n0 with a transform at (1, 2, 3); its entity and the follower's daemon."""
    owner = daemons[0]
    with scened.Client("127.0.0.1", owner.port) as c:
        assert c.call("world.create", world=w, node="n0")["node"] == "n0"
        e = c.call("transform.create", world=w, t=[1, 2, 3])["entity"]

        def follower():
            for item in c.call("world.list", cluster=True)["worlds"]:
                if item["name"] == w and len(item.get("followers", [])) == 1:
                    return item["followers"][0]
            return None
        name = wait_until("the group's follower to be recorded", follower)
    # Until the follower has applied both records (before that it answers MOVED, or NOT_FOUND).
    with scened.Client("127.0.0.1", daemons[int(name[1:])].port) as f:
        wait_until("the follower to apply the owner's records",
                   lambda: f.call("info")["metrics"].get("replica_applied_total", {})
                   .get(w.split(".")[0], 0) >= 2)
    return e, daemons[int(name[1:])]


def test_blocking_client_reads_from_the_follower(replicas):
    w = f"fs{os.getpid()}.main"
    e, follower = made_on_n0(replicas, w)
    owner = replicas[0]
    with scened.Client("127.0.0.1", follower.port) as plain:
        assert plain.get(w, e)["world"][12:15] == [1, 2, 3]  # MOVED followed to the owner
        assert plain.addr == owner.addr
    with scened.Client("127.0.0.1", follower.port, follower_reads=True) as c:
        assert c.call("hello")["follower_reads"] is True
        assert c.get(w, e)["world"][12:15] == [1, 2, 3]
        assert c.addr == follower.addr and c.owners == {}  # answered there, no MOVED
        assert c.call("transform.children", world=w, entity=e)["children"] == []
        with scened.Client("127.0.0.1", owner.port) as o:
            o.set_parts(w, e, t=[4, 5, 6])
        wait_until("the change to reach the follower", lambda: _world_at(c, w, e) == [4, 5, 6])
        assert c.addr == follower.addr
        c.set_parts(w, e, t=[7, 8, 9])  # a write: MOVED to the owner, followed
        assert c.addr == owner.addr and c.owners == {w: owner.addr}
        assert c.get(w, e)["world"][12:15] == [7, 8, 9]
        c.call("world.destroy", world=w)


def _world_at(c, w, e):
    return c.get(w, e)["world"][12:15]


def test_async_client_subscribes_on_the_follower(replicas):
    w = f"fa{os.getpid()}.main"
    e, follower = made_on_n0(replicas, w)
    owner = replicas[0]

    async def main():
        async with scened.AsyncClient("127.0.0.1", follower.port, follower_reads=True) as c:
            assert (await c.call("hello"))["follower_reads"] is True
            sub = await c.subscribe(w)
            assert sub._conn.addr == follower.addr and c.owners == {}
            await until_at(sub, e, [1, 2, 3])  # the full frame, from the follower's copy
            async with scened.AsyncClient("127.0.0.1", owner.port) as o:
                await o.set_parts(w, e, t=[10, 0, 0])
                await until_at(sub, e, [10, 0, 0])  # the owner's change, applied there
                await o.call("world.destroy", world=w)
            async for _ in sub.frames():  # the frames before the end
                pass
            assert sub.ended == "world_destroyed"
    run(main())


async def until_at(sub, e, t):
    """Reads sub's frames until its mirror has e translated by t."""
    async for _ in sub.frames():
        m = sub.mirror.matrices.get(e)
        if m is not None and list(m[12:15]) == t:
            return
    raise AssertionError(f"the subscription ended ({sub.ended}) before {e} was at {t}")
