"""The blocking client: one connection at a time, calls answered in order, events handed to
on_event while a call waits or while poll runs."""

from __future__ import annotations

import json
import socket
import ssl
import time
from typing import Any, Callable, Dict, List, Mapping, Optional, Tuple

from .protocol import (MOVED_HOPS, defaults, ends_subscription, hello_fields, is_event,
                       moved_to, needs_hello, request_line, result, split_addr, tls_of)

_NOT_GIVEN: Any = object()  # an argument left out, told apart from None (sent as null)

Event = Dict[str, Any]


class Client:
    """A connection to a daemon. timeout (seconds, None for none) bounds the connect, the TLS
    handshake, each write and each wait for a response; a call that gets no response in time
    raises TimeoutError, and that response is dropped when it comes, so that the next call
    still gets its own."""

    def __init__(self, host: Optional[str] = None, port: Optional[int] = None,
                 token: Optional[str] = None, timeout: Optional[float] = 10.0,
                 matrices: str = "json", tls: bool = False, tls_ca: Optional[str] = None,
                 tls_cert: Optional[str] = None, tls_key: Optional[str] = None,
                 follower_reads: bool = False) -> None:
        host, port, self.token = defaults(host, port, token)
        # hello with "follower_reads" on every connection: in a cluster with replicas, a
        # daemon that follows a world's group answers reads and subscribe from its copy
        self.follower_reads = follower_reads
        self.timeout = timeout
        self.owners: Dict[str, str] = {}  # world -> "HOST:PORT" learned from MOVED answers
        self.tls = tls_of(tls, tls_ca, tls_cert, tls_key)  # kept for the connections of MOVED
        self.on_event: Optional[Callable[[Event], Any]] = None
        self.matrices = "json"
        self._wanted_matrices = matrices
        self._connect(host, port)

    def _connect(self, host: str, port: int) -> None:
        sock = socket.create_connection((host, port), timeout=self.timeout)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        if self.tls:
            try:
                sock = self.tls.wrap_socket(sock, server_hostname=host)
            except BaseException:
                sock.close()
                raise
        self.sock = sock
        self.addr = f"{host}:{port}"
        self.buf = b""
        self.grids: Dict[int, Mapping[str, Any]] = {}  # packed subscription -> its "packed"
        self._held: Optional[BaseException] = None  # what on_event raised while a call waited
        self._late = 0  # responses of calls that timed out, dropped when they come
        if needs_hello(self._wanted_matrices, self.token, self.follower_reads):
            self.set_matrices(self._wanted_matrices)

    def set_matrices(self, form: str) -> None:
        """How the daemon sends this connection matrices from now on: "json" or "b64" (a hello,
        with the token when there is one). A connection made after a MOVED keeps the form."""
        self._wanted_matrices = form
        answer = result(self._call_here(
            "hello", hello_fields(form, self.token, self.follower_reads)))
        self.matrices = answer.get("matrices", form)

    def _move_to(self, addr: str) -> None:
        """Moves to the daemon at addr (HOST:PORT); the old connection is closed."""
        old = self.sock
        self._connect(*split_addr(addr))
        old.close()

    def close(self) -> None:
        self.sock.close()

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def _read_line(self, deadline: Optional[float]) -> Optional[Event]:
        """The next line as a dict, or None when the deadline (time.monotonic()) passes first;
        no deadline waits as long as it takes."""
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
            except (ssl.SSLEOFError, ssl.SSLZeroReturnError):
                chunk = b""
            finally:
                if deadline is not None:
                    self.sock.settimeout(self.timeout)
            if not chunk:
                raise ConnectionError("the daemon closed the connection")
            self.buf += chunk
        line, self.buf = self.buf.split(b"\n", 1)
        return json.loads(line)

    def _next_response(self) -> Event:
        """The next response; events on the way go to on_event. An exception on_event raises
        (a packed frame the mirror refuses) waits for the next poll, so that the call still
        gets its own response and the connection stays in step."""
        deadline = None if self.timeout is None else time.monotonic() + self.timeout
        while True:
            msg = self._read_line(deadline)
            if msg is None:
                self._late += 1
                raise TimeoutError(f"no response from {self.addr} in {self.timeout} s")
            if is_event(msg):
                try:
                    self._dispatch(msg)
                except Exception as e:  # noqa: BLE001 (raised again by poll)
                    if self._held is None:
                        self._held = e
            elif self._late:
                self._late -= 1
            else:
                return msg

    def _dispatch(self, event: Event) -> None:
        """Hands an event to on_event. A packed frame gets its subscription's grid as "grid"
        (the "packed" field given to subscribe or update, as it stands when the frame
        arrives: a new one applies from the first frame after the update's answer)."""
        sub = event.get("sub")
        if event.get("event") == "frame" and "packed" in event and sub in self.grids:
            event["grid"] = self.grids[sub]
        elif ends_subscription(event.get("event")):
            self.grids.pop(sub, None)
        if self.on_event:
            self.on_event(event)

    def _call_here(self, cmd: str, fields: Mapping[str, Any]) -> Event:
        self.sock.sendall(request_line(cmd, fields))
        return self._next_response()

    def call(self, cmd: str, **fields: Any) -> Dict[str, Any]:
        """One request; returns its result fields or raises ScenedError. In a cluster a request
        naming a world goes to the daemon last known to own it, and MOVED is followed (at most
        3 hops, each owner remembered); the old connection, and its subscriptions, close."""
        world = fields.get("world")
        if isinstance(world, str) and self.owners.get(world, self.addr) != self.addr:
            try:
                self._move_to(self.owners[world])
            except OSError:
                pass
        for hop in range(MOVED_HOPS + 1):
            resp = self._call_here(cmd, fields)
            addr = moved_to(resp, world)
            if addr is None or hop == MOVED_HOPS:
                return result(resp)
            self.owners[world] = addr
            self._move_to(addr)
        raise AssertionError("unreachable")

    def pipeline(self, requests: List[Mapping[str, Any]]) -> List[Event]:
        """Sends every request in one write; returns the raw responses in order."""
        data = "".join(json.dumps(r) + "\n" for r in requests).encode()
        self.sock.sendall(data)
        return [self._next_response() for _ in requests]

    def set_parts(self, world: str, entity: int, t: Optional[List[float]] = None,
                  r: Optional[List[float]] = None, s: Optional[List[float]] = None,
                  world_space: bool = False) -> Dict[str, Any]:
        """Replaces the parts given (translation t, rotation quaternion r, scale s) of the local
        matrix (world_space: the world matrix) and keeps the others; a current matrix that is
        not translation x rotation x scale raises ScenedError (BAD_REQUEST)."""
        parts = {k: v for k, v in (("t", t), ("r", r), ("s", s)) if v is not None}
        cmd = "transform.set_world" if world_space else "transform.set_local"
        return self.call(cmd, world=world, entity=entity, partial=True, **parts)

    def get(self, world: str, entity: int, tick: Optional[float] = None,
            trs: bool = False) -> Dict[str, Any]:
        """transform.get: the transform now, or at a past tick of a world that keeps history (a
        fraction interpolates between two ticks); the result answers "tick" either way."""
        fields: Dict[str, Any] = {"world": world, "entity": entity}
        if tick is not None:
            fields["tick"] = tick
        if trs:
            fields["trs"] = True
        return self.call("transform.get", **fields)

    def get_trs(self, world: str, entity: int) -> Tuple[Any, Any]:
        """(local, world): the parts of both matrices, each {"t": [x,y,z], "r": [x,y,z,w],
        "s": [sx,sy,sz]} with w >= 0 and a mirror as a negative sx, or None for a matrix that
        is not translation x rotation x scale."""
        res = self.call("transform.get", world=world, entity=entity, trs=True)
        return res["local_trs"], res["world_trs"]

    def subscribe(self, world: str, root: Optional[int] = None, hz: Optional[float] = None,
                  on_event: Optional[Callable[[Event], Any]] = None,
                  near: Optional[Mapping[str, Any]] = None,
                  packed: Optional[Mapping[str, Any]] = None, **fields: Any) -> int:
        """Subscribes to a world; returns the subscription id. Events of this connection go to
        on_event from then on. near is a region, as the protocol's object:
        {"entity": E} or {"point": [x, y, z]}, with "radius", "margin" and "bands"; packed,
        {"step": s, "origin": [x, y, z]}, asks for packed frames (a Mirror decodes them);
        fields are any other subscribe fields, sent as given."""
        self.on_event = on_event
        fields["world"] = world
        for key, value in (("root", root), ("hz", hz), ("near", near), ("packed", packed)):
            if value is not None:
                fields[key] = value
        sub = self.call("subscribe", **fields)["sub"]
        if isinstance(packed, Mapping):
            self.grids[sub] = packed
        return sub

    def update(self, sub: int, near: Any = _NOT_GIVEN, packed: Any = _NOT_GIVEN,
               **fields: Any) -> Dict[str, Any]:
        """subscribe.update: changes a subscription of this connection without a new full frame;
        the next frame carries what came into scope and, in "removed", what left. near=None
        sends null, which removes the region; a field not given is not sent."""
        for key, value in (("near", near), ("packed", packed)):
            if value is not _NOT_GIVEN:
                fields[key] = value
        answer = self.call("subscribe.update", sub=sub, **fields)
        if isinstance(packed, Mapping):
            self.grids[sub] = packed  # from the next frame on
        return answer

    def unsubscribe(self, sub: int) -> Dict[str, Any]:
        """Ends a subscription of this connection; no frame of it follows the answer."""
        answer = self.call("unsubscribe", sub=sub)
        self.grids.pop(sub, None)
        return answer

    def poll(self, seconds: float) -> int:
        """Hands stream events to on_event for the given time; returns how many arrived. What
        on_event raised while a call waited for its response is raised here first."""
        if self._held is not None:
            held, self._held = self._held, None
            raise held
        deadline = time.monotonic() + seconds
        count = 0
        while time.monotonic() < deadline:
            msg = self._read_line(deadline)
            if msg is None:
                return count
            if not is_event(msg) and self._late:
                self._late -= 1  # the response of a call that timed out
                continue
            self._dispatch(msg)
            count += 1
        return count
