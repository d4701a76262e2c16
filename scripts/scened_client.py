#!/usr/bin/env python3
"""A small scened client using only the Python standard library.

    from scened_client import Client, Mirror
    with Client("127.0.0.1", 7878) as c:
        c.call("world.create", world="main")
        car = c.call("transform.create", world="main", t=[0, 0, 0], name="car")["entity"]
        results = c.pipeline([{"cmd": "transform.get", "world": "main", "entity": car}] * 3)
        c.set_parts("main", car, r=[0, 0.3826834, 0, 0.9238795])   # turn it, keep the rest
        local, world = c.get_trs("main", car)   # {"t": [...], "r": [...], "s": [...]} or None
        mirror = Mirror()
        sub = c.subscribe("main", on_event=mirror.apply)
        c.poll(1.0)                      # frames arrive; mirror.matrices holds the world

Run it as a program for a self-check against a running daemon:
    python3 scripts/scened_client.py --port 7878 --selftest
"""

import argparse
import json
import os
import socket
import sys
import time


class ScenedError(Exception):
    """An error reply: .code is the protocol's error code, .message its text."""

    def __init__(self, code, message):
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message


class Client:
    def __init__(self, host=None, port=None, token=None, timeout=10.0):
        host = host or os.environ.get("SCENED_HOST", "127.0.0.1")
        port = int(port or os.environ.get("SCENED_PORT", 7878))
        token = token or os.environ.get("SCENED_AUTH_TOKEN") or None
        self.token = token
        self.timeout = timeout
        self.owners = {}  # world -> "HOST:PORT" learned from a cluster's MOVED answers
        self.on_event = None
        self._connect(host, port)

    def _connect(self, host, port):
        self.sock = socket.create_connection((host, port), timeout=self.timeout)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.addr = f"{host}:{port}"
        self.buf = b""
        if self.token:
            self._call_here("hello", token=self.token)

    def _move_to(self, addr):
        """Moves to the daemon at addr (HOST:PORT); the old connection is closed."""
        host, _, port = addr.rpartition(":")
        old = self.sock
        self._connect(host.strip("[]"), int(port))
        old.close()

    def close(self):
        self.sock.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def _read_line(self, timeout=None):
        """The next line as a dict, or None when timeout (seconds) passes first."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while b"\n" not in self.buf:
            if deadline is not None:
                left = deadline - time.monotonic()
                if left <= 0:
                    return None
                self.sock.settimeout(left)
            try:
                chunk = self.sock.recv(1 << 20)
            except socket.timeout:
                return None
            finally:
                self.sock.settimeout(10.0)
            if not chunk:
                raise ConnectionError("the daemon closed the connection")
            self.buf += chunk
        line, self.buf = self.buf.split(b"\n", 1)
        return json.loads(line)

    def _next_response(self):
        while True:
            msg = self._read_line()
            if "event" in msg and "ok" not in msg:
                if self.on_event:
                    self.on_event(msg)
                continue
            return msg

    @staticmethod
    def _result(resp):
        if not resp.get("ok"):
            err = resp.get("error", {})
            raise ScenedError(err.get("code", "ERROR"), err.get("message", ""))
        return {k: v for k, v in resp.items() if k not in ("ok", "id")}

    def _call_here(self, cmd, **fields):
        self.sock.sendall((json.dumps(dict(cmd=cmd, **fields)) + "\n").encode())
        return self._next_response()

    def call(self, cmd, **fields):
        """One request; returns its result fields or raises ScenedError. In a cluster a request
        naming a world goes to the daemon last known to own it, and MOVED is followed (at most
        3 hops, each owner remembered); the old connection, and its subscriptions, close."""
        world = fields.get("world")
        if world in self.owners and self.owners[world] != self.addr:
            try:
                self._move_to(self.owners[world])
            except OSError:
                pass
        for hop in range(4):
            resp = self._call_here(cmd, **fields)
            err = resp.get("error") or {}
            if resp.get("ok") or err.get("code") != "MOVED" or world is None or hop == 3:
                return self._result(resp)
            self.owners[world] = err["addr"]
            self._move_to(err["addr"])

    def pipeline(self, requests):
        """Sends every request in one write; returns the raw responses in order."""
        data = "".join(json.dumps(r) + "\n" for r in requests).encode()
        self.sock.sendall(data)
        return [self._next_response() for _ in requests]

    def set_parts(self, world, entity, t=None, r=None, s=None, world_space=False):
        """Replaces the parts given (translation t, rotation quaternion r, scale s) of the local
        matrix (world_space: the world matrix) and keeps the others; a current matrix that is
        not translation x rotation x scale raises ScenedError (BAD_REQUEST)."""
        parts = {k: v for k, v in (("t", t), ("r", r), ("s", s)) if v is not None}
        cmd = "transform.set_world" if world_space else "transform.set_local"
        return self.call(cmd, world=world, entity=entity, partial=True, **parts)

    def get(self, world, entity, tick=None, trs=False):
        """transform.get: the transform now, or at a past tick of a world that keeps history (a
        fraction interpolates between two ticks); the result answers "tick" either way."""
        fields = {"world": world, "entity": entity}
        if tick is not None:
            fields["tick"] = tick
        if trs:
            fields["trs"] = True
        return self.call("transform.get", **fields)

    def get_trs(self, world, entity):
        """(local, world): the parts of both matrices, each {"t": [x,y,z], "r": [x,y,z,w],
        "s": [sx,sy,sz]} with w >= 0 and a mirror as a negative sx, or None for a matrix that
        is not translation x rotation x scale."""
        res = self.call("transform.get", world=world, entity=entity, trs=True)
        return res["local_trs"], res["world_trs"]

    def subscribe(self, world, root=None, hz=None, on_event=None):
        self.on_event = on_event
        fields = {"world": world}
        if root is not None:
            fields["root"] = root
        if hz is not None:
            fields["hz"] = hz
        return self.call("subscribe", **fields)["sub"]

    def poll(self, seconds):
        """Hands stream events to on_event for the given time; returns how many arrived."""
        deadline = time.monotonic() + seconds
        count = 0
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                return count
            msg = self._read_line(left)
            if msg is None:
                return count
            if self.on_event:
                self.on_event(msg)
            count += 1


class Mirror:
    """A local copy of a world's (or subtree's) world matrices, kept from frames."""

    def __init__(self):
        self.matrices = {}
        self.tick = 0
        self.ended = None

    def apply(self, event):
        kind = event.get("event")
        if kind == "frame":
            if event["full"]:
                self.matrices = {}
            for item in event["set"]:
                self.matrices[item["e"]] = item["m"]
            for e in event["removed"]:
                self.matrices.pop(e, None)
            self.tick = event["tick"]
        elif kind in ("world_destroyed", "unsubscribed"):
            self.ended = kind


def close(a, b, tol=1e-6):
    return len(a) == len(b) and all(abs(x - y) <= tol for x, y in zip(a, b))


def selftest(args):
    """Builds a small world, mirrors it, checks the mirror against transform.get."""
    world = f"pyclient-{os.getpid()}"
    with Client(args.host, args.port, args.token) as c, Client(args.host, args.port, args.token) as s:
        c.call("world.create", world=world)
        car = c.call("transform.create", world=world, name="car", t=[1, 2, 3])["entity"]
        wheels = [c.call("transform.create", world=world, parent=car, name=f"wheel{i}",
                         t=[i, 0, 0])["entity"] for i in range(4)]
        replies = c.pipeline([{"cmd": "transform.get", "world": world, "entity": w, "id": i}
                              for i, w in enumerate(wheels)])
        assert [r["id"] for r in replies] == list(range(4)), replies
        try:
            c.call("transform.create", world=world, name="car")
            raise AssertionError("a duplicate root name was accepted")
        except ScenedError as e:
            assert e.code == "ALREADY_EXISTS", e.code
        # Parts: turn a wheel in place, move it in world space keeping the turn, read back.
        c.set_parts(world, wheels[1], r=[0, 0, 1, 1])
        local, world_trs = c.get_trs(world, wheels[1])
        assert local["t"] == [1, 0, 0] and local["s"] == [1, 1, 1], local
        assert close(local["r"], [0, 0, 0.70710677, 0.70710677]), local
        assert close(world_trs["t"], [2, 2, 3]), world_trs
        c.set_parts(world, wheels[1], t=[5, 5, 5], world_space=True)
        local, world_trs = c.get_trs(world, wheels[1])
        assert close(local["t"], [4, 3, 2]) and close(world_trs["t"], [5, 5, 5]), (local, world_trs)
        assert close(local["r"], [0, 0, 0.70710677, 0.70710677]), local
        # a mirror reads as a negative sx; a sheared matrix has no parts, and refuses a partial set
        c.call("transform.set_local", world=world, entity=wheels[2], s=[1, -1, 1])
        assert c.get_trs(world, wheels[2])[0]["s"] == [-1, 1, 1]
        c.call("transform.set_local", world=world, entity=wheels[2],
               matrix=[1, 0, 0, 0, 0.5, 1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1])
        assert c.get_trs(world, wheels[2]) == (None, None)
        try:
            c.set_parts(world, wheels[2], t=[0, 0, 0])
            raise AssertionError("a partial set on a sheared matrix was accepted")
        except ScenedError as e:
            assert e.code == "BAD_REQUEST", e.code
        mirror = Mirror()
        s.subscribe(world, on_event=mirror.apply)
        c.call("transform.set_local", world=world, entity=car, t=[10, 0, 0])
        deadline = time.monotonic() + 5
        want = c.call("transform.get", world=world, entity=wheels[3])["world"]
        while mirror.matrices.get(wheels[3]) != want and time.monotonic() < deadline:
            s.poll(0.1)
        assert mirror.matrices.get(wheels[3]) == want, (mirror.matrices, want)
        assert len(mirror.matrices) == 5, mirror.matrices
        # Rewind: a world that keeps history answers what a frame of a past tick carried.
        past = f"{world}-past"
        c.call("world.create", world=past, history=600)
        e = c.call("transform.create", world=past, t=[1, 0, 0])["entity"]
        before = c.get(past, e)["tick"]
        while c.get(past, e)["tick"] <= before and time.monotonic() < deadline:
            time.sleep(0.01)
        then = c.get(past, e)["tick"]
        c.call("transform.set_local", world=past, entity=e, t=[9, 0, 0])
        while c.get(past, e)["tick"] <= then + 1 and time.monotonic() < deadline:
            time.sleep(0.01)
        assert c.get(past, e, tick=then)["world"][12] == 1, c.get(past, e, tick=then)
        assert c.get(past, e)["world"][12] == 9
        try:
            c.get(past, e, tick=then + 100000)
            raise AssertionError("a tick outside the window was answered")
        except ScenedError as err:
            assert err.code == "NOT_FOUND", err.code
        c.call("world.destroy", world=past)
        c.call("world.destroy", world=world)
        while mirror.ended is None and time.monotonic() < deadline:
            s.poll(0.1)
        assert mirror.ended == "world_destroyed", mirror.ended
    print("selftest passed")


def main():
    p = argparse.ArgumentParser(description="scened client (standard library only)")
    p.add_argument("--host")
    p.add_argument("--port", type=int)
    p.add_argument("--token")
    p.add_argument("--selftest", action="store_true", help="check the client against a daemon")
    p.add_argument("cmd", nargs="?", help="a command, e.g. world.list")
    p.add_argument("fields", nargs="*", help="key=value (values parsed as JSON when they can be)")
    args = p.parse_args()
    if args.selftest:
        selftest(args)
        return 0
    if not args.cmd:
        p.print_usage()
        return 2
    fields = {}
    for kv in args.fields:
        key, _, value = kv.partition("=")
        try:
            fields[key] = json.loads(value)
        except ValueError:
            fields[key] = value
    with Client(args.host, args.port, args.token) as c:
        try:
            print(json.dumps(c.call(args.cmd, **fields)))
        except ScenedError as e:
            print(f"{e.code}: {e.message}", file=sys.stderr)
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
