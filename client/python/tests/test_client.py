"""scened.Client against the real daemon: calls and their errors, pipelining, parts, reads,
subscriptions of every form into a Mirror, and the caller's timeout honoured."""

from __future__ import annotations

import os
import time

import pytest

import scened
from conftest import FakeDaemon
from daemons import wait_until


def close_to(a, b, tol=1e-5):
    return len(a) == len(b) and all(abs(x - y) <= tol for x, y in zip(a, b))


def within_grid(got, want, step):
    """A packed frame's matrix against the exact one: the translation within half a step (and
    float32 rounding), the rest within what a four-byte rotation holds (0.5 degrees)."""
    return (close_to(got[12:15], want[12:15], step / 2 + 1e-5)
            and close_to(got[:12], want[:12], 0.01)
            and got[15] == want[15])


def world_name(tag):
    return f"py-{tag}-{os.getpid()}"


def test_calls_errors_pipeline_parts(daemon):
    w = world_name("calls")
    with scened.Client("127.0.0.1", daemon.port) as c:
        assert c.call("world.create", world=w) == {}
        car = c.call("transform.create", world=w, name="car", t=[1, 2, 3])["entity"]
        with pytest.raises(scened.ScenedError) as e:
            c.call("transform.create", world=w, name="car")
        assert e.value.code == "ALREADY_EXISTS"
        with pytest.raises(scened.ScenedError) as e:
            c.call("transform.get", world=w, entity=car + 1000)
        assert e.value.code == "NOT_FOUND"
        answers = c.pipeline([{"cmd": "transform.get", "world": w, "entity": car, "id": i}
                              for i in range(5)])
        assert [a["id"] for a in answers] == list(range(5)) and all(a["ok"] for a in answers)
        c.set_parts(w, car, r=[0, 0, 1, 1])
        local = c.get(w, car, trs=True)["local_trs"]
        assert local["t"] == [1, 2, 3] and close_to(local["r"], [0, 0, 0.70710677, 0.70710677])
        c.set_parts(w, car, t=[4, 5, 6])
        assert c.get(w, car)["world"][12:15] == [4, 5, 6]
        c.call("world.destroy", world=w)


@pytest.mark.parametrize("form", ["json", "b64", "packed"])
def test_subscription_mirror(daemon, form):
    """Every form of frame fills the same Mirror, which follows transform.get (packed: within
    the grid) and knows a packed subscription's step and origin."""
    w = world_name(f"sub-{form}")
    matrices = "b64" if form == "b64" else "json"
    with scened.Client("127.0.0.1", daemon.port, matrices=matrices) as c, \
            scened.Client("127.0.0.1", daemon.port, matrices=matrices) as s:
        assert s.matrices == matrices
        c.call("world.create", world=w)
        ids = [c.call("transform.create", world=w, t=[i, 0, 0])["entity"] for i in range(5)]
        mirror = scened.Mirror()
        options = {"packed": {"step": 0.001, "origin": [1, 2, 3]}} if form == "packed" else {}
        sub = s.subscribe(w, on_event=mirror.apply, hz=50, **options)
        for step in range(3):
            c.call("transform.set_local", world=w, entity=ids[2], t=[step, 7.25, -1])
            want = scened.matrix(c.get(w, ids[2])["world"])

            def caught_up():
                s.poll(0.05)
                got = mirror.matrices.get(ids[2])
                if got is None:
                    return False
                return within_grid(list(got), want, 0.001) if form == "packed" else list(got) == want
            wait_until(f"the {form} mirror to show step {step}", caught_up)
        assert sorted(mirror.matrices) == ids
        if form == "packed":
            assert mirror.grid(sub) == (0.001, (1.0, 2.0, 3.0))
            assert mirror.step == 0.001 and mirror.origin == (1.0, 2.0, 3.0)
        else:
            assert mirror.grid(sub) is None and mirror.step is None
        c.call("world.destroy", world=w)
        wait_until("the end of the world", lambda: s.poll(0.05) >= 0 and mirror.ended)
        assert mirror.ended == "world_destroyed"


def test_timeout_is_the_callers():
    """A call that gets no response in the client's timeout raises TimeoutError after that
    time (not a fixed 10 s), and its response, when it comes, is dropped: the next call gets
    its own."""
    def answer(req):
        if req["cmd"] == "ping" and req.get("late"):
            return [(0.8, {"ok": True, "pong": "late"})]
        return [(0, {"ok": True, "pong": req.get("n")})]
    fake = FakeDaemon(answer)
    try:
        with scened.Client("127.0.0.1", fake.port, timeout=0.5) as c:
            assert c.sock.gettimeout() == 0.5
            t0 = time.monotonic()
            with pytest.raises(TimeoutError):
                c.call("ping", late=True)
            assert 0.4 < time.monotonic() - t0 < 5  # its own 0.5 s, not a default
            assert c.call("ping", n=2) == {"pong": 2}  # waits past the late one, drops it
            assert c.poll(0.1) == 0 and c.sock.gettimeout() == 0.5
    finally:
        fake.close()


def test_a_long_timeout_is_kept(daemon):
    """Client(timeout=T) keeps T on its socket after calls and polls (it used to be reset to
    10 s)."""
    with scened.Client("127.0.0.1", daemon.port, timeout=25.0) as c:
        c.call("ping")
        c.poll(0.01)
        assert c.sock.gettimeout() == 25.0
    with scened.Client("127.0.0.1", daemon.port, timeout=None) as c:
        c.call("ping")
        c.poll(0.01)
        assert c.sock.gettimeout() is None


def test_requests_carry_only_their_fields():
    """What the client sends is cmd and the fields given, no member of its own."""
    fake = FakeDaemon(lambda req: [(0, {"ok": True, "sub": 3} if req["cmd"] == "subscribe"
                                    else {"ok": True})])
    try:
        with scened.Client("127.0.0.1", fake.port) as c:
            c.set_parts("w", 5, t=[1, 2, 3])
            c.get("w", 5)
            c.subscribe("w", packed={"step": 0.01})
            c.update(3, near=None)
            c.unsubscribe(3)
        assert fake.requests == [
            {"cmd": "transform.set_local", "world": "w", "entity": 5, "partial": True,
             "t": [1, 2, 3]},
            {"cmd": "transform.get", "world": "w", "entity": 5},
            {"cmd": "subscribe", "world": "w", "packed": {"step": 0.01}},
            {"cmd": "subscribe.update", "sub": 3, "near": None},
            {"cmd": "unsubscribe", "sub": 3},
        ]
    finally:
        fake.close()
