"""scened.AsyncClient against the real daemon: pipelined calls, errors, subscriptions whose
mirror is kept current whether or not frames() is iterated (json, b64 and packed frames), their
ends; and against a fake daemon what a real one cannot be made to do: answer late, close, send
a frame that cannot be decoded."""

from __future__ import annotations

import asyncio
import base64
import os
import time

import pytest

import scened
from conftest import FakeDaemon, run
from test_client import within_grid


def world_name(tag):
    return f"pyaio-{tag}-{os.getpid()}"


async def until(what, check, seconds=15.0):
    """Awaits (on the event loop, so the client keeps reading) until check() is truthy."""
    deadline = time.monotonic() + seconds
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.01)


def test_pipelined_calls(daemon):
    w = world_name("pipe")

    async def main():
        async with scened.AsyncClient("127.0.0.1", daemon.port) as c:
            await c.call("world.create", world=w)
            made = await asyncio.gather(*(c.call("transform.create", world=w, t=[i, 0, 0])
                                          for i in range(300)))
            ids = [m["entity"] for m in made]
            assert len(set(ids)) == 300
            await asyncio.gather(*(c.call("transform.set_local", world=w, entity=e, partial=True,
                                          t=[i, i * 0.5, -i]) for i, e in enumerate(ids)))
            got = await asyncio.gather(*(c.get(w, e) for e in ids))
            assert [g["world"][12:15] for g in got] == [[i, i * 0.5, -i] for i in range(300)]
            with pytest.raises(scened.ScenedError) as e:
                await c.call("transform.get", world=w, entity=ids[-1] + 10_000)
            assert e.value.code == "NOT_FOUND"
            # an error among pipelined calls fails that call alone
            answers = await asyncio.gather(c.call("ping"), c.call("world.create", world=w),
                                           c.call("ping"), return_exceptions=True)
            assert isinstance(answers[1], scened.ScenedError)
            assert answers[1].code == "ALREADY_EXISTS" and answers[0] == answers[2] == {}
            await c.set_parts(w, ids[0], r=[0, 0, 1, 1])
            assert (await c.get(w, ids[0], trs=True))["local_trs"]["t"] == [0, 0, 0]
            await c.call("world.destroy", world=w)
        with pytest.raises(ConnectionError):  # closed: no new connection behind the caller's back
            await c.call("ping")
    run(main())


def test_requests_are_written_before_answers_come():
    """Three calls awaited together are all on the wire before any answer: this daemon answers
    only once it has read the third."""
    fake = FakeDaemon(lambda req: [(0, {"ok": True, "n": n}) for n in range(3)]
                      if req.get("n") == 2 else [])

    async def main():
        async with scened.AsyncClient("127.0.0.1", fake.port, timeout=5) as c:
            got = await asyncio.gather(*(c.call("ping", n=n) for n in range(3)))
            assert got == [{"n": 0}, {"n": 1}, {"n": 2}]
    try:
        run(main())
    finally:
        fake.close()


@pytest.mark.parametrize("form", ["json", "b64", "packed"])
def test_mirror_without_and_with_frames(daemon, form):
    w = world_name(f"sub-{form}")
    matrices = "b64" if form == "b64" else "json"

    def matches(sub, entity, want):
        got = sub.mirror.matrices.get(entity)
        if got is None:
            return False
        return within_grid(list(got), want, sub.mirror.step) if form == "packed" else \
            list(got) == want

    async def main():
        async with scened.AsyncClient("127.0.0.1", daemon.port, matrices=matrices) as c:
            assert c.matrices == matrices
            await c.call("world.create", world=w)
            ids = [(await c.call("transform.create", world=w, t=[i, 0, 0]))["entity"]
                   for i in range(4)]
            options = {"packed": {"step": 0.001, "origin": [1, 2, 3]}} if form == "packed" \
                else {}
            sub = await c.subscribe(w, hz=50, root=None, **options)
            if form == "packed":  # known from the answer, before any frame
                assert (sub.mirror.step, sub.mirror.origin) == (0.001, (1.0, 2.0, 3.0))
            # nobody iterates frames(): the mirror follows anyway
            for step in range(3):
                await c.call("transform.set_local", world=w, entity=ids[1], t=[step, 3.5, -2])
                want = scened.matrix((await c.get(w, ids[1]))["world"])
                await until(f"the mirror at step {step}", lambda: matches(sub, ids[1], want))
            assert sorted(sub.mirror.matrices) == ids
            # frames() yields the frames, each after the mirror took it
            await c.call("transform.set_local", world=w, entity=ids[3], t=[9, 9, 9])
            want = scened.matrix((await c.get(w, ids[3]))["world"])
            async for frame in sub.frames():
                assert frame["event"] == "frame" and frame["sub"] == sub.id
                if matches(sub, ids[3], want):
                    break
            if form == "packed":  # a new grid, from the frame after the answer
                await sub.update(packed={"step": 0.01, "origin": [0, 0, 0]})
                assert (sub.mirror.step, sub.mirror.origin) == (0.01, (0.0, 0.0, 0.0))
                await c.call("transform.set_local", world=w, entity=ids[0], t=[5.5, 0, 0])
                want = scened.matrix((await c.get(w, ids[0]))["world"])
                await until("the mirror on the new grid", lambda: matches(sub, ids[0], want))
            await c.call("world.destroy", world=w)
            rest = [f async for f in sub.frames()]  # ends with the world
            assert all(f["event"] == "frame" for f in rest)
            assert sub.ended == "world_destroyed" and sub.mirror.ended == "world_destroyed"
            assert [f async for f in sub.frames()] == []
    run(main())


def test_unsubscribe_and_update_near(daemon):
    w = world_name("near")

    async def main():
        async with scened.AsyncClient("127.0.0.1", daemon.port) as c:
            await c.call("world.create", world=w)
            here = (await c.call("transform.create", world=w, t=[0, 0, 0]))["entity"]
            far = (await c.call("transform.create", world=w, t=[500, 0, 0]))["entity"]
            sub = await c.subscribe(w, near={"point": [0, 0, 0], "radius": 10})
            await until("the region", lambda: here in sub.mirror.matrices)
            assert far not in sub.mirror.matrices
            await sub.update(near=None)  # sent as null: the whole world
            await until("the whole world", lambda: far in sub.mirror.matrices)
            await sub.unsubscribe()
            assert sub.ended == "unsubscribe"
            queued = [f async for f in sub.frames()]  # what came before the answer, then the end
            assert all(f["sub"] == sub.id for f in queued)
            assert [f async for f in sub.frames()] == []
            with pytest.raises(scened.ScenedError) as e:
                await sub.unsubscribe()
            assert e.value.code == "NOT_FOUND"
            await c.call("world.destroy", world=w)
    run(main())


def test_timeout_is_the_callers():
    """A call without an answer in timeout raises TimeoutError then; the late answer is
    dropped and the next call gets its own."""
    def answer(req):
        if req.get("late"):
            return [(0.8, {"ok": True, "pong": "late"})]
        return [(0, {"ok": True, "pong": req.get("n")})]
    fake = FakeDaemon(answer)

    async def main():
        async with scened.AsyncClient("127.0.0.1", fake.port, timeout=0.5) as c:
            t0 = time.monotonic()
            with pytest.raises(TimeoutError):
                await c.call("ping", late=True)
            assert 0.4 < time.monotonic() - t0 < 5  # its own 0.5 s, not a default
            assert await c.call("ping", n=2) == {"pong": 2}
    try:
        run(main())
    finally:
        fake.close()


def test_requests_carry_only_their_fields():
    fake = FakeDaemon(lambda req: [(0, {"ok": True, "sub": 4} if req["cmd"] == "subscribe"
                                    else {"ok": True})])

    async def main():
        async with scened.AsyncClient("127.0.0.1", fake.port, token="t0k", matrices="b64") as c:
            sub = await c.subscribe("w", root=7, hz=None, packed={"step": 0.5})
            await sub.update(near=None)
            await c.set_parts("w", 7, s=[2, 2, 2], world_space=True)
            await sub.unsubscribe()
    try:
        run(main())
    finally:
        fake.close()
    assert fake.requests == [
        {"cmd": "hello", "matrices": "b64", "token": "t0k"},
        {"cmd": "subscribe", "root": 7, "packed": {"step": 0.5}, "world": "w"},
        {"cmd": "subscribe.update", "near": None, "sub": 4},
        {"cmd": "transform.set_world", "world": "w", "entity": 7, "partial": True,
         "s": [2, 2, 2]},
        {"cmd": "unsubscribe", "sub": 4},
    ]


def frame(sub, tick, full, **rest):
    return {"event": "frame", "sub": sub, "world": "w", "tick": tick, "full": full, **rest}


def test_backlog_refused_frames_and_a_lost_connection():
    """A reader behind by more than the backlog loses the oldest frames, never the mirror's;
    a packed frame that cannot be decoded is raised by frames() and changes nothing; a lost
    connection fails what waits and ends frames() with ConnectionError."""
    m = [1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1]

    def answer(req):
        if req["cmd"] == "subscribe" and "packed" not in req:
            return [(0, {"ok": True, "sub": 1})] + [
                (0, frame(1, t, t == 1, set=[{"e": t, "m": m}], removed=[])) for t in range(1, 6)]
        if req["cmd"] == "subscribe":
            good = bytes.fromhex("01 06 05 020406 000208e0 00")
            return [(0, {"ok": True, "sub": 2}),
                    (0, frame(2, 1, True, packed=base64.b64encode(good).decode())),
                    (0, frame(2, 2, False, packed=base64.b64encode(b"\x01\x63\x00\x00").decode()))]
        if req["cmd"] == "ping":
            return [(0, {"ok": True})]
        return None  # "bye": no answer; the fake closes when the test ends
    fake = FakeDaemon(answer)

    async def main():
        c = scened.AsyncClient("127.0.0.1", fake.port, backlog=2, timeout=5)
        await c.connect()
        sub = await c.subscribe("w")
        await c.call("ping")  # all five frames have been read by now
        assert sorted(sub.mirror.matrices) == [1, 2, 3, 4, 5] and sub.dropped == 3
        assert [f["tick"] async for f in _take(sub.frames(), 2)] == [4, 5]
        packed = await c.subscribe("w", packed={"step": 0.5})
        await c.call("ping")
        with pytest.raises(ValueError, match="refused at byte"):
            async for f in packed.frames():
                assert f["tick"] == 1
        assert sorted(packed.mirror.matrices) == [6] and packed.mirror.tick == 1
        waiting = asyncio.ensure_future(c.call("bye"))
        await asyncio.sleep(0.1)
        fake.close()
        with pytest.raises(ConnectionError):
            await waiting
        with pytest.raises(ConnectionError):
            async for _ in sub.frames():
                pass
        assert sub.ended == "closed" and isinstance(sub.error, ConnectionError)
        with pytest.raises(ConnectionError):
            await c.call("ping")
        await c.close()
    try:
        run(main())
    finally:
        fake.close()


async def _take(frames, n):
    async for f in frames:
        yield f
        n -= 1
        if n == 0:
            return
