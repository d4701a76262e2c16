"""The asyncio client: calls pipelined on one connection per daemon, MOVED followed to the
world's owner, subscriptions whose mirrors are kept current as frames are read."""

from __future__ import annotations

import asyncio
from typing import Any, Dict, List, Mapping, Optional

from .connection import Connection
from .protocol import (MOVED_HOPS, defaults, hello_fields, moved_to, needs_hello,
                       request_line, result, split_addr, tls_of)
from .subscription import Subscription


class AsyncClient:
    """async with AsyncClient(host, port) as c: await c.call(cmd, **fields).

    Each call's request is written when the call is made, and the responses are matched to the
    requests in order, so calls awaited together (asyncio.gather) are pipelined. timeout
    (seconds, None for none) bounds the connect, the TLS handshake and each call's wait for
    its response (TimeoutError; that response is dropped when it comes). In a cluster a call
    naming a world goes to the daemon last known to own it, and MOVED is followed (at most 3
    hops) over a connection to the owner, opened once and kept: the connections already open,
    their calls in flight and their subscriptions, stay."""

    def __init__(self, host: Optional[str] = None, port: Optional[int] = None,
                 token: Optional[str] = None, matrices: str = "json",
                 timeout: Optional[float] = 10.0, *, tls: bool = False,
                 tls_ca: Optional[str] = None, tls_cert: Optional[str] = None,
                 tls_key: Optional[str] = None, backlog: int = 256,
                 follower_reads: bool = False) -> None:
        host, port, self.token = defaults(host, port, token)
        # hello with "follower_reads" on every connection: in a cluster with replicas, a
        # daemon that follows a world's group answers reads and subscribe from its copy
        self.follower_reads = follower_reads
        self.addr = f"{host}:{port}"
        self.timeout = timeout
        self.matrices = matrices
        self.backlog = backlog  # frames a Subscription keeps for frames()
        self.owners: Dict[str, str] = {}  # world -> "HOST:PORT" learned from MOVED answers
        self.tls = tls_of(tls, tls_ca, tls_cert, tls_key)
        self._ready: Dict[str, Connection] = {}  # open connections by address
        self._opening: Dict[str, asyncio.Task] = {}
        self._closed = False

    async def __aenter__(self) -> "AsyncClient":
        await self.connect()
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.close()

    async def connect(self) -> "AsyncClient":
        """Opens the connection to the daemon given (and says hello, for a token or b64)."""
        await self._connection(self.addr)
        return self

    async def close(self) -> None:
        """Closes every connection; calls waiting fail with ConnectionError and every
        subscription ends ("closed"). Calls after it raise ConnectionError."""
        self._closed = True
        for task in list(self._opening.values()):
            task.cancel()
        conns, self._ready = list(self._ready.values()), {}
        await asyncio.gather(*(c.close() for c in conns))

    # ---- connections ---------------------------------------------------------------------

    async def _connection(self, addr: str) -> Connection:
        if self._closed:
            raise ConnectionError("the client is closed")
        conn = self._ready.get(addr)
        if conn is not None:
            if conn.lost is not None:
                raise conn.lost
            return conn
        task = self._opening.get(addr)
        if task is None:
            task = asyncio.ensure_future(self._open(addr))
            self._opening[addr] = task
            task.add_done_callback(lambda _: self._opening.pop(addr, None))
        return await asyncio.shield(task)

    async def _open(self, addr: str) -> Connection:
        host, port = split_addr(addr)
        loop = asyncio.get_running_loop()
        tls: Dict[str, Any] = {}
        if self.tls is not None:
            tls = dict(ssl=self.tls, server_hostname=host, ssl_handshake_timeout=self.timeout)
        try:
            _, conn = await asyncio.wait_for(
                loop.create_connection(lambda: Connection(addr, self.timeout), host, port, **tls),
                self.timeout)
        except asyncio.TimeoutError:  # the builtin one before Python 3.11
            raise TimeoutError(f"no connection to {addr} in {self.timeout} s") from None
        try:
            if needs_hello(self.matrices, self.token, self.follower_reads):
                answer = result(await conn.send(  # type: ignore[misc]
                    request_line("hello", hello_fields(self.matrices, self.token,
                                                       self.follower_reads))))
                self.matrices = answer.get("matrices", self.matrices)
        except BaseException:
            await conn.close()
            raise
        self._ready[addr] = conn
        return conn

    async def _connection_for(self, world: Any) -> Connection:
        """The connection to world's owner when one is known and reachable, else the first."""
        owner = self.owners.get(world) if isinstance(world, str) else None
        if owner is not None and owner != self.addr:
            try:
                return await self._connection(owner)
            except (OSError, asyncio.TimeoutError):
                del self.owners[world]  # gone: the first daemon answers (or says MOVED again)
        return await self._connection(self.addr)

    # ---- calls ---------------------------------------------------------------------------

    async def _request(self, cmd: str, fields: Mapping[str, Any],
                       on_answer: Any = None) -> Dict[str, Any]:
        """The response to a request (MOVED followed), ok or not."""
        world = fields.get("world")
        owner = self.owners.get(world, self.addr) if isinstance(world, str) else self.addr
        conn = self._ready.get(owner)
        if conn is None or conn.lost is not None:
            conn = await self._connection_for(world)
        line = request_line(cmd, fields)
        hop = 0
        while True:
            resp = await conn.send(line, on_answer)  # type: ignore[misc]
            addr = moved_to(resp, world)
            if addr is None or hop == MOVED_HOPS:
                return resp
            self.owners[world] = addr
            conn = await self._connection(addr)
            hop += 1

    async def call(self, cmd: str, **fields: Any) -> Dict[str, Any]:
        """One request; its result fields, or ScenedError with the error's code."""
        return result(await self._request(cmd, fields))

    async def pipeline(self, requests: List[Mapping[str, Any]]) -> List[Dict[str, Any]]:
        """Many requests ({"cmd": ..., fields}) at once; their raw responses, in order."""
        async def one(r: Mapping[str, Any]) -> Dict[str, Any]:
            fields = dict(r)
            return await self._request(fields.pop("cmd"), fields)
        return list(await asyncio.gather(*(one(r) for r in requests)))

    async def get(self, world: str, entity: int, tick: Optional[float] = None,
                  trs: bool = False) -> Dict[str, Any]:
        """transform.get, now or at a past tick of a world that keeps history."""
        fields: Dict[str, Any] = {"world": world, "entity": entity}
        if tick is not None:
            fields["tick"] = tick
        if trs:
            fields["trs"] = True
        return await self.call("transform.get", **fields)

    async def set_parts(self, world: str, entity: int, t: Optional[List[float]] = None,
                        r: Optional[List[float]] = None, s: Optional[List[float]] = None,
                        world_space: bool = False) -> Dict[str, Any]:
        """Replaces the parts given of the local (world_space: world) matrix, keeps the rest."""
        parts = {k: v for k, v in (("t", t), ("r", r), ("s", s)) if v is not None}
        cmd = "transform.set_world" if world_space else "transform.set_local"
        return await self.call(cmd, world=world, entity=entity, partial=True, **parts)

    async def subscribe(self, world: str, **options: Any) -> Subscription:
        """Subscribes to world with any subscribe fields (root, hz, near, packed, ...; one given
        as None is left out), on the world's owner. The Subscription's mirror takes every
        frame from the first on."""
        fields = {k: v for k, v in options.items() if v is not None}
        fields["world"] = world
        made: List[Subscription] = []

        def answered(conn: Connection, resp: Dict[str, Any], abandoned: bool) -> None:
            if abandoned:  # nobody will read it: end it rather than leave it streaming
                conn.send(request_line("unsubscribe", {"sub": resp["sub"]}), wait=False)
                return
            sub = Subscription(conn, resp["sub"], world, fields.get("packed"), self.backlog)
            conn.subs[sub.id] = sub
            made.append(sub)

        result(await self._request("subscribe", fields, answered))
        return made[0]
