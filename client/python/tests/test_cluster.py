"""MOVED, over TLS: two daemons sharing a real etcd. A client of the first daemon creates and
uses a world placed on the second; both clients follow MOVED there, remember the owner, and
the asyncio client's subscription lives on the owner's connection."""

from __future__ import annotations

import os
import tempfile

import pytest

import scened
from conftest import run
from daemons import Daemon, Etcd, wait_until


@pytest.fixture(scope="module")
def cluster(certs):
    etcd = Etcd()
    data = tempfile.mkdtemp(prefix="scened-data-")
    daemons = []
    try:
        for node in ("n0", "n1"):
            daemons.append(Daemon("--cluster", etcd.url, "--data", data, "--node", node,
                                  "--lease-ttl", "2", "--fsync", "no",
                                  "--tls-cert", certs["server.pem"], "--tls-key",
                                  certs["server.key"], name=f"scened {node}"))
        for d in daemons:
            with scened.Client("127.0.0.1", d.port, tls_ca=certs["ca.pem"]) as c:
                wait_until(f"{d.name} to see both nodes",
                           lambda: len(c.call("cluster.nodes")["nodes"]) == 2)
        yield daemons
    finally:
        for d in reversed(daemons):
            d.stop()
        etcd.stop()


def test_blocking_client_follows_moved(cluster, certs):
    first, second = cluster
    w = f"g{os.getpid()}.sync"
    with scened.Client("127.0.0.1", first.port, tls_ca=certs["ca.pem"]) as c:
        assert c.call("world.create", world=w, node="n1")["node"] == "n1"
        assert c.addr == second.addr and c.owners[w] == second.addr
        e = c.call("transform.create", world=w, t=[1, 1, 1])["entity"]
        assert c.get(w, e)["world"][12:15] == [1, 1, 1]
    with scened.Client("127.0.0.1", first.port, tls_ca=certs["ca.pem"]) as c:
        assert c.get(w, e)["world"][12:15] == [1, 1, 1]  # asked of the first, answered by MOVED
        assert c.owners == {w: second.addr}
        c.call("world.destroy", world=w)


def test_async_client_follows_moved(cluster, certs):
    first, second = cluster
    w = f"g{os.getpid()}.aio"

    async def main():
        async with scened.AsyncClient("127.0.0.1", first.port, tls_ca=certs["ca.pem"]) as c:
            assert (await c.call("world.create", world=w, node="n1"))["node"] == "n1"
            assert c.owners == {w: second.addr}
            sub = await c.subscribe(w)
            assert sub._conn.addr == second.addr
            made = [(await c.call("transform.create", world=w, t=[i, 0, 0]))["entity"]
                    for i in range(3)]
            assert (await c.call("info"))["node"] == "n0"  # no world: the first daemon answers
            async for _ in sub.frames():
                if all(e in sub.mirror.matrices for e in made):
                    break
            await c.call("world.destroy", world=w)
            async for _ in sub.frames():  # the frames before the end
                pass
            assert sub.ended == "world_destroyed"
    run(main())
