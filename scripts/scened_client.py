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

Over TLS (a daemon with --tls-cert), with the standard library's ssl module; the daemon's
certificate must be signed by a CA of tls_ca (or of the system) and name the host:
    Client("127.0.0.1", 7878, tls_ca="ca.pem")
    Client("127.0.0.1", 7878, tls_ca="ca.pem", tls_cert="client.pem", tls_key="client.key")

Matrices exact to the bit: Client(..., matrices="b64") (or c.set_matrices("b64")) makes the
daemon send every matrix as a base64 string of 16 little-endian float32 and frames as "ids" and
"ms"; matrix() reads either form, matrix_b64() writes one for "matrix_b64":

        c.call("transform.set_local", world="main", entity=car, matrix_b64=matrix_b64(m))
        m = matrix(c.call("transform.get", world="main", entity=car)["world"])

A subscription near an entity (or a point) holds what is within its radius; update changes
the region without a new full frame, and the mirror drops what leaves:

        sub = c.subscribe("main", near={"entity": car, "radius": 50, "margin": 5},
                          on_event=mirror.apply)
        c.update(sub, near={"entity": car, "radius": 200})
        c.update(sub, near=None)         # null: no region, the whole world

Packed frames (a translation on a grid of the subscription's step, a rotation in four bytes, a
scale when there is one) decode into the same mirror; over WebSocket, decode_ws_binary reads a
binary message's header and Mirror.apply_packed takes the rest (after set_packed):

        sub = c.subscribe("main", packed={"step": 0.001}, on_event=mirror.apply)
        c.update(sub, packed={"step": 0.01, "origin": [1000, 0, 0]})
        mirror.set_packed(ws_sub, 0.001)
        mirror.apply_packed(*decode_ws_binary(message))

Run it as a program for a self-check against a running daemon:
    python3 scripts/scened_client.py --port 7878 --selftest [--selftest-near] [--tls-ca ca.pem]
and of the packed decoder alone (no daemon): python3 scripts/scened_client.py --selftest-packed
"""

import argparse
import array
import base64
import json
import math
import os
import random
import socket
import ssl
import struct
import sys
import time

_MATRIX = struct.Struct("<16f")
_NOT_GIVEN = object()  # an argument left out, told apart from None (sent as null)


def matrix_b64(m):
    """16 numbers (column-major) as base64 of their float32 bytes, for "matrix_b64"."""
    return base64.b64encode(_MATRIX.pack(*m)).decode("ascii")


def matrix(value):
    """A matrix as the daemon sends it, either form, as 16 floats (b64: the exact float32
    values; json: the numbers as written, which round to the same float32 values)."""
    if isinstance(value, str):
        return list(_MATRIX.unpack(base64.b64decode(value, validate=True)))
    return list(value)


def float32(values):
    """The float32 values of numbers, as floats (what the daemon holds for them)."""
    return list(struct.unpack(f"<{len(values)}f", struct.pack(f"<{len(values)}f", *values)))


def decode_matrices(ms, count):
    """The "ms" of a b64 frame as one flat array of 16 * count float32 (no object per
    matrix): matrix i is values[16 * i : 16 * i + 16]."""
    raw = base64.b64decode(ms, validate=True)
    if len(raw) != 64 * count:
        raise ValueError(f"\"ms\" holds {len(raw)} bytes for {count} matrices")
    values = array.array("f")
    values.frombytes(raw)
    if sys.byteorder == "big":
        values.byteswap()
    return values


# ---- packed frames (the payload's layout and the C codec: proto/packed.h) ------------------

PACKED_T = 1         # a translation: three zigzag varints
PACKED_DELTA = 2     # ... each the difference from the q last received
PACKED_R = 4         # a rotation: a u32 "smallest three"
PACKED_S_UNI = 8     # a uniform scale: one float32
PACKED_S = 16        # a scale: three float32 (a mirror is a negative sx)
PACKED_RAW = 32      # the world matrix as 16 float32, and nothing else
ENTITY_MAX = (1 << 53) - 1
_INT64_MIN, _INT64_MAX = -(1 << 63), (1 << 63) - 1
_WS_HEADER = struct.Struct("<IQB")  # sub, tick, flags (bit 0: full)
_U32 = struct.Struct("<I")
_F32 = struct.Struct("<f")
_SCALE3 = struct.Struct("<3f")


def _smallest_three_component(k):
    """(the double, its float32) of a 10-bit k: c = (k / 511.5 - 1) / sqrt(2)."""
    c = (k / 511.5 - 1) / math.sqrt(2)
    return c, _F32.unpack(_F32.pack(c))[0]


_SMALLEST_THREE = [_smallest_three_component(k) for k in range(1024)]


def quat_from_smallest_three(u):
    """The quaternion (x, y, z, w) of a "smallest three" u32, as float32 values: the omitted
    component sqrt(max(0, 1 - the others' squares)); every u32 gives finite components that
    are not all zero (no k gives c = 0)."""
    big, q, total = u >> 30, [0.0] * 4, 0.0
    shift = 20
    for i in range(4):
        if i != big:
            c, q[i] = _SMALLEST_THREE[(u >> shift) & 1023]
            total += c * c
            shift -= 10
    q[big] = _F32.unpack(_F32.pack(math.sqrt(max(0.0, 1 - total))))[0]
    return q


def _checked_grid(step, origin):
    try:
        step = float(step)
        origin = tuple(float(v) for v in origin)
    except (TypeError, ValueError, OverflowError):
        raise ValueError(f"a packed grid needs a number step and three numbers: "
                         f"{step!r}, {origin!r}") from None
    if not (math.isfinite(step) and step > 0) or len(origin) != 3 or \
            not all(math.isfinite(v) for v in origin):
        raise ValueError(f"a packed step must be positive and finite, the origin three "
                         f"finite numbers: {step!r}, {origin!r}")
    return step, origin


class _Payload:
    """Reads a packed payload; every read is bounded by what is left, and a bad value raises
    ValueError saying where."""

    __slots__ = ("data", "pos")

    def __init__(self, data):
        self.data = data
        self.pos = 0

    def fail(self, why, at=None):
        raise ValueError(f"packed payload refused at byte {self.pos if at is None else at}: {why}")

    def varint(self):
        """Unsigned LEB128 of at most 64 bits (10 bytes, the tenth holding bit 63 alone)."""
        data, start, value = self.data, self.pos, 0
        for i in range(10):
            if start + i >= len(data):
                self.fail("the payload ends inside a value")
            byte = data[start + i]
            if i == 9 and byte & 0x7F > 1:
                self.fail("a varint of more than 64 bits", start)
            value |= (byte & 0x7F) << (7 * i)
            if not byte & 0x80:
                self.pos = start + i + 1
                return value
        self.fail("a varint of more than 64 bits", start)

    def take(self, n):
        if len(self.data) - self.pos < n:
            self.fail("the payload ends inside a value")
        self.pos += n
        return self.data[self.pos - n : self.pos]

    def count(self, min_bytes):
        """A count, at most what the bytes left hold at min_bytes an item."""
        start = self.pos
        n = self.varint()
        if n > (len(self.data) - self.pos) // min_bytes:
            self.fail("a count larger than the payload can hold", start)
        return n

    def next_id(self, prev):
        """The next id of an increasing list: a gap of at least 1, up to 2^53 - 1."""
        start = self.pos
        gap = self.varint()
        if gap == 0:
            self.fail("entity ids not increasing", start)
        if gap > ENTITY_MAX - prev:
            self.fail("an entity id past 2^53 - 1", start)
        return prev + gap


def _flags_valid(flags):
    if flags & PACKED_RAW:
        return flags == PACKED_RAW
    return (not flags & ~63 and (flags & PACKED_T or not flags & PACKED_DELTA)
            and not (flags & PACKED_S_UNI and flags & PACKED_S))


class PackedState:
    """What a packed subscription last received, per entity: the quantized translation q (None
    once the step or origin changed: the next one is absolute), the rotation's "smallest
    three" and the scale ((1, 1, 1) when none was sent). decode() reads a payload against it
    and, when the whole payload is good, brings it up to date; anything else raises
    ValueError and changes nothing. An entity last sent raw, removed, or never sent holds
    nothing, and travels absolute next."""

    def __init__(self, step, origin=(0, 0, 0)):
        self.step, self.origin = _checked_grid(step, origin)
        self.values = {}  # entity -> (q or None, rotation, scale)

    def set_grid(self, step, origin=(0, 0, 0)):
        """A new step or origin forgets every translation (rotations and scales stay); the same
        one changes nothing. A bad one raises ValueError and changes nothing."""
        step, origin = _checked_grid(step, origin)
        if (step, origin) != (self.step, self.origin):
            self.values = {e: (None, r, s) for e, (_, r, s) in self.values.items()}
        self.step, self.origin = step, origin

    def clear(self):
        """Forgets every entity (a full frame): everything comes absolute. Keeps the grid."""
        self.values = {}

    def decode(self, payload):
        """(entries, removed) of a payload (bytes): entries in increasing id, each
        (entity, 16 floats column-major): T * R * S on this grid, or the matrix as sent when
        raw; removed, the ids the frame removes."""
        if not isinstance(payload, (bytes, bytearray, memoryview)):
            raise TypeError(f"a packed payload is bytes, not {type(payload).__name__}")
        r = _Payload(bytes(payload))
        entries, staged = [], []
        entity = 0
        for _ in range(r.count(2)):  # an entry is a gap and flags at least
            entity = r.next_id(entity)
            matrix, value = self._entry(r, entity)
            entries.append((entity, matrix))
            staged.append((entity, value))
        removed = []
        entity = 0
        for _ in range(r.count(1)):
            entity = r.next_id(entity)
            removed.append(entity)
        if r.pos != len(r.data):
            r.fail("bytes after the removed ids")
        for entity, value in staged:
            if value is None:
                self.values.pop(entity, None)
            else:
                self.values[entity] = value
        for entity in removed:
            self.values.pop(entity, None)
        return entries, removed

    def _entry(self, r, entity):
        """One entry after its id: (its matrix, what it leaves in the state: None when raw)."""
        start = r.pos
        flags = r.take(1)[0]
        if not _flags_valid(flags):
            r.fail("flags that name no valid entry", start)
        if flags == PACKED_RAW:
            return list(_MATRIX.unpack(r.take(64))), None
        base = self.values.get(entity)
        q = base[0] if base else None
        needs_q = not flags & PACKED_T or flags & PACKED_DELTA
        if (needs_q and q is None) or (not flags & PACKED_R and base is None):
            r.fail("a part left out or a delta for an entity without that part", start)
        rotation, scale = (base[1], base[2]) if base else (0, (1.0, 1.0, 1.0))
        if flags & PACKED_T:
            moved = []
            for k in range(3):
                at = r.pos
                u = r.varint()
                d = (u >> 1) ^ -(u & 1)  # zigzag
                if flags & PACKED_DELTA:
                    d += q[k]
                    if not _INT64_MIN <= d <= _INT64_MAX:
                        r.fail("a translation delta out of the 64-bit range", at)
                moved.append(d)
            q = tuple(moved)
        if flags & PACKED_R:
            rotation = _U32.unpack(r.take(4))[0]
        if flags & PACKED_S_UNI:
            s = _F32.unpack(r.take(4))[0]
            scale = (s, s, s)
        elif flags & PACKED_S:
            scale = _SCALE3.unpack(r.take(12))
        return self._rebuild(q, rotation, scale), (q, rotation, scale)

    def _rebuild(self, q, rotation, scale):
        """T * R * S, column-major, each element rounded to float32 (as proto/packed_decode.c
        does, so both give the same bits); the quaternion is normalised."""
        x, y, z, w = quat_from_smallest_three(rotation)
        s = 2 / (x * x + y * y + z * z + w * w)
        sx, sy, sz = scale
        (ox, oy, oz), step = self.origin, self.step
        m = array.array("f", (
            (1 - s * (y * y + z * z)) * sx, s * (x * y + w * z) * sx, s * (x * z - w * y) * sx, 0,
            s * (x * y - w * z) * sy, (1 - s * (x * x + z * z)) * sy, s * (y * z + w * x) * sy, 0,
            s * (x * z + w * y) * sz, s * (y * z - w * x) * sz, (1 - s * (x * x + y * y)) * sz, 0,
            ox + q[0] * step, oy + q[1] * step, oz + q[2] * step, 1))
        return m.tolist()


def decode_ws_binary(message):
    """A packed frame as a WebSocket binary message: (sub, tick, full, payload), from the
    little-endian header sub (u32), tick (u64), flags (u8, bit 0 full). A message shorter
    than the header, or with a flag bit other than bit 0, raises ValueError."""
    if len(message) < _WS_HEADER.size:
        raise ValueError(f"a packed binary message of {len(message)} bytes has no whole header")
    sub, tick, flags = _WS_HEADER.unpack_from(message)
    if flags & ~1:
        raise ValueError(f"a packed binary message with unknown flags {flags:#x}")
    return sub, tick, bool(flags & 1), bytes(message[_WS_HEADER.size :])


class ScenedError(Exception):
    """An error reply: .code is the protocol's error code, .message its text."""

    def __init__(self, code, message):
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message


def tls_context(tls_ca=None, tls_cert=None, tls_key=None):
    """A client context: TLS 1.2 or later, the daemon's certificate verified against tls_ca (a
    PEM file; None: the system's CAs) and the host name, and this client's certificate when
    the daemon asks for one (--tls-ca)."""
    ctx = ssl.create_default_context(cafile=tls_ca)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    if tls_cert:
        ctx.load_cert_chain(tls_cert, tls_key)
    return ctx


class Client:
    def __init__(self, host=None, port=None, token=None, timeout=10.0, matrices="json",
                 tls=False, tls_ca=None, tls_cert=None, tls_key=None):
        host = host or os.environ.get("SCENED_HOST", "127.0.0.1")
        port = int(port or os.environ.get("SCENED_PORT", 7878))
        self.token = token or os.environ.get("SCENED_AUTH_TOKEN") or None
        self.timeout = timeout
        self.owners = {}  # world -> "HOST:PORT" learned from a cluster's MOVED answers
        # TLS, kept for the connections a MOVED opens
        self.tls = tls_context(tls_ca, tls_cert, tls_key) if tls or tls_ca or tls_cert else None
        self.on_event = None
        self.matrices = "json"
        self._wanted_matrices = matrices
        self._connect(host, port)

    def _connect(self, host, port):
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
        self.grids = {}  # packed subscription -> its "packed" field ({"step", "origin"}) now
        if self.token or self._wanted_matrices != "json":
            self.set_matrices(self._wanted_matrices)

    def set_matrices(self, form):
        """How the daemon sends this connection matrices from now on: "json" or "b64" (a hello,
        with the token when there is one). A connection made after a MOVED keeps the form."""
        fields = {"matrices": form}
        if self.token:
            fields["token"] = self.token
        self._wanted_matrices = form
        self.matrices = self._result(self._call_here("hello", **fields)).get("matrices", form)

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
            except (ssl.SSLEOFError, ssl.SSLZeroReturnError):
                chunk = b""
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
                self._dispatch(msg)
                continue
            return msg

    def _dispatch(self, event):
        """Hands an event to on_event. A packed frame gets its subscription's grid as "grid"
        (the "packed" field given to subscribe or update, as it stands when the frame
        arrives: a new one applies from the first frame after the update's answer)."""
        sub = event.get("sub")
        if event.get("event") == "frame" and "packed" in event and sub in self.grids:
            event["grid"] = self.grids[sub]
        elif event.get("event") in ("world_destroyed", "unsubscribed"):
            self.grids.pop(sub, None)
        if self.on_event:
            self.on_event(event)

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

    def subscribe(self, world, root=None, hz=None, on_event=None, near=None, packed=None,
                  **fields):
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
        if isinstance(packed, dict):
            self.grids[sub] = packed
        return sub

    def update(self, sub, near=_NOT_GIVEN, packed=_NOT_GIVEN, **fields):
        """subscribe.update: changes a subscription of this connection without a new full frame;
        the next frame carries what came into scope and, in "removed", what left. near=None
        sends null, which removes the region; a field not given is not sent."""
        for key, value in (("near", near), ("packed", packed)):
            if value is not _NOT_GIVEN:
                fields[key] = value
        result = self.call("subscribe.update", sub=sub, **fields)
        if isinstance(packed, dict):
            self.grids[sub] = packed  # from the next frame on
        return result

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
            self._dispatch(msg)
            count += 1


class Mirror:
    """A local copy of a world's (or subtree's, or region's) world matrices, kept from frames of
    any form: matrices[e] is a sequence of 16 numbers (from a b64 frame, a slice of the
    frame's one float32 array; from a packed frame, a list of float32 values). It drops what
    frames list in "removed" (an entity destroyed, or out of a near region), and everything of
    a subscription that ends with "unsubscribed" because its root or its region's center was
    destroyed. One mirror may take the frames of several subscriptions: an entity stays while
    one of them holds it.

    A packed frame is decoded against the subscription's PackedState: a Client's frames carry
    their grid; frames that come another way (WebSocket binary messages, through
    apply_packed) need set_packed first. A payload the state refuses raises ValueError and
    changes nothing."""

    DROPPING_ENDS = ("center_destroyed", "root_destroyed")

    def __init__(self):
        self.matrices = {}
        self.tick = 0
        self.ended = None   # the event that ended a subscription: "world_destroyed", ...
        self.reason = None  # and the reason an "unsubscribed" gave
        self._held = {}     # subscription -> the entities its frames brought
        self._packed = {}   # packed subscription -> its PackedState
        self._grids = {}    # packed subscription -> (step, origin) given to set_packed

    def set_packed(self, sub, step, origin=(0, 0, 0)):
        """The grid of a packed subscription (its "packed" field), for frames without one."""
        self._grids[sub] = _checked_grid(step, origin)

    def apply_packed(self, sub, tick, full, payload, grid=None):
        """A packed frame's payload (bytes), as decode_ws_binary returns it with its header;
        grid is the subscription's "packed" field ({"step", "origin"}), by default the one
        given to set_packed. A full frame starts the subscription's state afresh."""
        if grid is not None:
            step, origin = grid.get("step"), grid.get("origin", (0, 0, 0))
        elif sub in self._grids:
            step, origin = self._grids[sub]
        else:
            raise ValueError(f"a packed frame of subscription {sub}, whose grid is unknown")
        state = self._packed.get(sub)
        if full or state is None:
            state = PackedState(step, origin)
        else:
            state.set_grid(step, origin)
        entries, removed = state.decode(payload)  # refused: no entity has changed
        self._packed[sub] = state
        held = self._held.setdefault(sub, set())
        if full:
            self._drop(sub, list(held))
        for e, m in entries:
            self.matrices[e] = m
            held.add(e)
        self._drop(sub, removed)
        self.tick = tick

    def _drop(self, sub, entities):
        held = self._held.get(sub)
        others = [h for s, h in self._held.items() if s != sub]
        for e in entities:
            if held is not None:
                held.discard(e)
            if not any(e in h for h in others):
                self.matrices.pop(e, None)

    def apply(self, event):
        kind = event.get("event")
        sub = event.get("sub")
        if kind == "frame" and "packed" in event:
            payload = base64.b64decode(event["packed"], validate=True)
            self.apply_packed(sub, event["tick"], event["full"], payload, event.get("grid"))
        elif kind == "frame":
            held = self._held.setdefault(sub, set())
            if event["full"]:
                self._drop(sub, list(held))
            if "ms" in event:
                ids = event["ids"]
                values = decode_matrices(event["ms"], len(ids))
                for i, e in enumerate(ids):
                    self.matrices[e] = values[16 * i : 16 * i + 16]
                held.update(ids)
            else:
                for item in event["set"]:
                    self.matrices[item["e"]] = item["m"]
                    held.add(item["e"])
            self._drop(sub, event["removed"])
            self.tick = event["tick"]
        elif kind in ("world_destroyed", "unsubscribed"):
            self.ended = kind
            self.reason = event.get("reason")
            if self.reason in self.DROPPING_ENDS:
                self._drop(sub, list(self._held.get(sub, ())))
            self._held.pop(sub, None)
            self._packed.pop(sub, None)
            self._grids.pop(sub, None)


def close(a, b, tol=1e-6):
    return len(a) == len(b) and all(abs(x - y) <= tol for x, y in zip(a, b))


def tls_args(args):
    return dict(tls=args.tls, tls_ca=args.tls_ca, tls_cert=args.tls_cert, tls_key=args.tls_key)


def selftest(args):
    """Builds a small world, mirrors it, checks the mirror against transform.get."""
    world = f"pyclient-{os.getpid()}"
    tls = tls_args(args)
    with Client(args.host, args.port, args.token, **tls) as c, \
            Client(args.host, args.port, args.token, **tls) as s:
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
    selftest_b64(args, world + "-b64")
    print("selftest passed")


def random_float32(rng):
    """Random finite float32 bits, often a special value: zeros of both signs, subnormals,
    the extremes."""
    special = [0x00000000, 0x80000000, 0x00000001, 0x807FFFFF, 0x00800000, 0x7F7FFFFF, 0xFF7FFFFF]
    bits = rng.choice(special) if rng.random() < 0.25 else rng.getrandbits(32)
    if bits & 0x7F800000 == 0x7F800000:
        bits &= 0xBFFFFFFF
    return struct.unpack("<f", struct.pack("<I", bits))[0]


def selftest_b64(args, world):
    """Random float32 bits set through matrix_b64 come back to the bit: in a b64 get (the same
    text) and in a b64 frame's mirror; a json get gives the same values."""
    rng = random.Random(14)
    tls = tls_args(args)
    with Client(args.host, args.port, args.token, matrices="b64", **tls) as b, \
            Client(args.host, args.port, args.token, **tls) as j, \
            Client(args.host, args.port, args.token, matrices="b64", **tls) as s:
        assert b.matrices == "b64" and j.matrices == "json", (b.matrices, j.matrices)
        b.call("world.create", world=world)
        want = {}
        for _ in range(20):
            m = [random_float32(rng) for _ in range(16)]
            e = b.call("transform.create", world=world, matrix_b64=matrix_b64(m))["entity"]
            want[e] = m
        for e, m in want.items():
            got = b.call("transform.get", world=world, entity=e)
            assert got["local"] == matrix_b64(m), (got, m)
            assert _MATRIX.pack(*matrix(got["world"])) == _MATRIX.pack(*m)
            # the same values (Python's json reads the daemon's "-0" as the integer 0: equal)
            as_json = j.call("transform.get", world=world, entity=e)["local"]
            assert float32(as_json) == m, (as_json, m)
        try:
            b.call("transform.create", world=world, matrix_b64=matrix_b64(m)[:-2])
            raise AssertionError("a matrix_b64 without padding was accepted")
        except ScenedError as err:
            assert err.code == "BAD_REQUEST", err.code
        mirror = Mirror()
        s.subscribe(world, on_event=mirror.apply)
        deadline = time.monotonic() + 5
        while len(mirror.matrices) < len(want) and time.monotonic() < deadline:
            s.poll(0.1)
        for e, m in want.items():
            assert _MATRIX.pack(*mirror.matrices[e]) == _MATRIX.pack(*m), (e, mirror.matrices[e])
        b.call("world.destroy", world=world)


def selftest_near(args):
    """A near subscription's mirror, frames in either form, against the moves that take
    entities in and out of its region, update widening, narrowing and removing it, the
    refusals, and the end when the center is destroyed."""
    for form in ("json", "b64"):
        selftest_near_form(args, form)
    print("near selftest passed")


def selftest_near_form(args, form):
    world = f"pyclient-near-{form}-{os.getpid()}"
    tls = tls_args(args)
    with Client(args.host, args.port, args.token, **tls) as c, \
            Client(args.host, args.port, args.token, matrices=form, **tls) as s:
        c.call("world.create", world=world)

        def make(x):
            return c.call("transform.create", world=world, t=[x, 0, 0])["entity"]

        def move(e, x):
            c.call("transform.set_local", world=world, entity=e, t=[x, 0, 0])

        center, near, far = make(0), make(5), make(50)
        mirror = Mirror()

        def wait_for(want, what):
            deadline = time.monotonic() + 5
            while set(mirror.matrices) != want and time.monotonic() < deadline:
                s.poll(0.05)
            assert set(mirror.matrices) == want, (what, sorted(mirror.matrices), sorted(want))

        for bad in ({"entity": center}, {"entity": center, "radius": -1},
                    {"point": [0, 0, 0], "entity": center, "radius": 1},
                    {"entity": center, "radius": 1, "colour": 1}):
            try:
                s.subscribe(world, near=bad)
                raise AssertionError(f"near {bad} was accepted")
            except ScenedError as e:
                assert e.code == "BAD_REQUEST", (bad, e.code)
        sub = s.subscribe(world, on_event=mirror.apply,
                          near={"entity": center, "radius": 10, "margin": 2})
        wait_for({center, near}, "the first frame")
        move(near, 11)  # past the radius, within the margin: it stays
        move(far, 3)    # into the region
        wait_for({center, near, far}, "entering")
        move(near, 13)  # past radius + margin: it leaves
        wait_for({center, far}, "leaving")
        want = c.call("transform.get", world=world, entity=far)["world"]
        assert list(mirror.matrices[far]) == want, (mirror.matrices[far], want)
        assert s.update(sub, near={"entity": center, "radius": 100}) == {}
        wait_for({center, near, far}, "a wider radius")
        s.update(sub, near={"point": [3, 0, 0], "radius": 1})
        wait_for({far}, "a narrower region around a point")
        s.update(sub, near=None)  # null: the whole world again
        wait_for({center, near, far}, "no region")
        for fields, code in (({}, "BAD_REQUEST"), ({"near": {"radius": 1}}, "BAD_REQUEST")):
            try:
                s.update(sub, **fields)
                raise AssertionError(f"update {fields} was accepted")
            except ScenedError as e:
                assert e.code == code, (fields, e.code)
        try:
            s.update(sub + 1000, near=None)
            raise AssertionError("an update of an unknown sub was accepted")
        except ScenedError as e:
            assert e.code == "NOT_FOUND", e.code
        s.call("unsubscribe", sub=sub)

        # The center follows its entity; its destruction ends the subscription, emptied.
        mirror = Mirror()
        sub = s.subscribe(world, on_event=mirror.apply, near={"entity": far, "radius": 4})
        wait_for({center, far}, "around a moving center")
        move(far, 48)
        wait_for({far}, "the center moved")
        c.call("transform.destroy", world=world, entity=far)
        deadline = time.monotonic() + 5
        while mirror.ended is None and time.monotonic() < deadline:
            s.poll(0.05)
        assert (mirror.ended, mirror.reason) == ("unsubscribed", "center_destroyed"), \
            (mirror.ended, mirror.reason)
        assert mirror.matrices == {}, mirror.matrices
        c.call("world.destroy", world=world)


# ---- the packed self-test: the decoder against the contract, without a daemon ----------------

# Payloads of tests/unit/test_proto_packed.c, on step 0.5. A: 5 at (1, -2, 3); 7 sheared (raw);
# 300 turned half about x, scaled 2, at (-0.5, 0, 100); 301 mirrored in x; 9, 200 and 1000
# removed. B: 5 moved +0.5 in x (a delta), 7 now T x R x S, 300 unchanged (flags 0). C, after
# the origin moved to (1, 1, 1): 5, unmoved, absolute again.
_FRAME_A = bytes.fromhex(
    "04"                                                # four entries
    "05 05 04 07 0c 000208e0"                           # 5: T|R, q (2, -4, 6); the identity
    "02 20"                                             # 7 (gap 2): raw
    "0000803f 00000000 00000000 00000000 0000803f 0000803f 00000000 00000000"
    "00000000 00000000 0000803f 00000000 00008040 0000a040 0000c040 0000803f"
    "a502 0d 01 00 9003 00020820 00000040"              # 300: T|R|uniform, q (-1, 0, 200), 2
    "01 15 00 00 00 000208e0 000080bf 0000803f 0000803f"  # 301: T|R|scale, q 0, (-1, 1, 1)
    "03 09 bf01 a006")                                  # removed: 9, 200, 1000
_FRAME_B = bytes.fromhex(
    "03 05 03 02 00 00"                                 # 5: T|delta, (1, 0, 0)
    "02 05 10 14 18 000208e0"                           # 7: T|R, q (8, 10, 12)
    "a502 00"                                           # 300: nothing changed
    "00")
_FRAME_C = bytes.fromhex("01 05 01 02 0b 08 00")        # 5: T, q (1, -6, 4) on origin (1, 1, 1)
_SHEARED = [1, 0, 0, 0, 1, 1, 0, 0, 0, 0, 1, 0, 4, 5, 6, 1]


def _f32_bits(text):
    """float32 values from big-endian hex words ("3f800000 ..."): bits written as they read."""
    return [struct.unpack(">f", bytes.fromhex(w))[0] for w in text.split()]


# The three columns of R * S, each element's float32 bits, that proto/packed_decode.c gives:
# the smallest three of the identity (k = 512: c = 0.00069, not 0) and of a half turn about x
# scaled 2. Both decoders must give these bits.
_IDENTITY_RS = _f32_bits("3f7fffe0 3ab55247 bab51227 00000000 bab51227 3f7fffe0 3ab55247 00000000"
                         " 3ab55247 bab51227 3f7fffe0 00000000")
_HALF_X_2_RS = _f32_bits("3fffffe0 3b355247 3b351227 00000000 3b351227 bfffffe0 3b355247 00000000"
                         " 3b355247 bb351227 bfffffe0 00000000")


def _with_t(rs, t, negate_x=False):
    m = list(rs) + [float(v) for v in t] + [1.0]
    if negate_x:
        m[0:3] = [-v for v in m[0:3]]
    return m


def _bits(m):
    return struct.pack("<16f", *m)


def _round_half_away(x):
    """round() of C: halves away from zero (Python's round() takes them to even)."""
    t = math.trunc(x)
    if abs(x - t) >= 0.5:
        t += 1 if x > 0 else -1
    return t


def _varint(v):
    out = bytearray()
    while v >= 0x80:
        out.append(v & 0x7F | 0x80)
        v >>= 7
    out.append(v)
    return bytes(out)


def _zigzag(n):
    return (n << 1) ^ (n >> 63)


def _smallest_three(q):
    """The contract's u32 of a quaternion (x, y, z, w), normalised here."""
    length = math.sqrt(sum(c * c for c in q))
    big = max(range(4), key=lambda i: (abs(q[i]), -i))  # the first largest
    sign = (-1 if q[big] < 0 else 1) / length
    u, shift = big << 30, 20
    for i in range(4):
        if i != big:
            k = _round_half_away((q[i] * sign * math.sqrt(2) + 1) * 511.5)
            u |= min(1023, max(0, k)) << shift
            shift -= 10
    return u


def _quat_of_rotation(c):
    """(x, y, z, w) with w >= 0 of a rotation given as its three unit columns (Shepperd)."""
    m00, m10, m20 = c[0]
    m01, m11, m21 = c[1]
    m02, m12, m22 = c[2]
    trace = m00 + m11 + m22
    if trace > 0:
        s = 2 * math.sqrt(1 + trace)
        q = [(m21 - m12) / s, (m02 - m20) / s, (m10 - m01) / s, s / 4]
    elif m00 >= m11 and m00 >= m22:
        s = 2 * math.sqrt(1 + m00 - m11 - m22)
        q = [s / 4, (m01 + m10) / s, (m02 + m20) / s, (m21 - m12) / s]
    elif m11 >= m22:
        s = 2 * math.sqrt(1 + m11 - m00 - m22)
        q = [(m01 + m10) / s, s / 4, (m12 + m21) / s, (m02 - m20) / s]
    else:
        s = 2 * math.sqrt(1 + m22 - m00 - m11)
        q = [(m02 + m20) / s, (m12 + m21) / s, s / 4, (m10 - m01) / s]
    return [-v for v in q] if q[3] < 0 else q


def _take_apart(m):
    """(t, q, s) of a T x R x S matrix, a mirror as a negative sx; None for anything else
    (shear past a cosine of 1e-5 between columns, a zero or non-finite column, a last row
    other than 0 0 0 1, a non-finite translation)."""
    if m[3] != 0 or m[7] != 0 or m[11] != 0 or m[15] != 1 or \
            not all(math.isfinite(v) for v in m[12:15]):
        return None
    cols, lengths = [], []
    for j in range(3):
        c = m[4 * j : 4 * j + 3]
        length = math.sqrt(sum(v * v for v in c))
        if not (0 < length < math.inf):
            return None
        cols.append([v / length for v in c])
        lengths.append(length)
    for a, b in ((0, 1), (0, 2), (1, 2)):
        if not abs(sum(x * y for x, y in zip(cols[a], cols[b]))) <= 1e-5:
            return None
    (a0, a1, a2), (b0, b1, b2), (c0, c1, c2) = cols
    det = a0 * (b1 * c2 - b2 * c1) - b0 * (a1 * c2 - a2 * c1) + c0 * (a1 * b2 - a2 * b1)
    if det < 0:
        cols[0] = [-v for v in cols[0]]
        lengths[0] = -lengths[0]
    return list(m[12:15]), _quat_of_rotation(cols), lengths


def _f32(values):
    return array.array("f", values).tolist()


def _snap_scale(s):
    """The daemon's snapping (proto/packed.c): magnitudes within 2^-20 of each other are sent
    as uniform (their mean), and as 1 when that close to 1; the mirror's sign stays."""
    a = [abs(v) for v in s]
    if max(a) - min(a) > 2 ** -20 * max(a):
        return _f32(s)
    u = sum(a) / 3
    f = 1.0 if abs(u - 1) <= 2 ** -20 else _f32([u])[0]
    return [-f if s[0] < 0 else f, f, f]


class _PackedEncoder:
    """The daemon's side of a packed subscription, written here from the contract: what the
    subscription last received per entity (q or None, rotation, scale), and payloads."""

    def __init__(self, step, origin=(0, 0, 0)):
        self.step, self.origin, self.values = step, tuple(origin), {}

    def set_grid(self, step, origin):
        if (step, tuple(origin)) != (self.step, self.origin):
            self.step, self.origin = step, tuple(origin)
            self.values = {e: (None, r, s) for e, (_, r, s) in self.values.items()}

    def encode(self, changes, removed=()):
        """changes: (entity, 16 float32) in increasing id; removed: ids, increasing."""
        out = bytearray(_varint(len(changes)))
        prev = 0
        for entity, m in changes:
            out += _varint(entity - prev) + self._entry(entity, m)
            prev = entity
        out += _varint(len(removed))
        prev = 0
        for entity in removed:
            out += _varint(entity - prev)
            prev = entity
            self.values.pop(entity, None)
        return bytes(out)

    def _entry(self, entity, m):
        parts = _take_apart(m)
        q = None
        if parts:
            v = [(t - o) / self.step for t, o in zip(parts[0], self.origin)]
            if all(abs(x) < 2.0 ** 62 for x in v):
                q = tuple(_round_half_away(x) for x in v)
        if q is None:  # raw: non-finite elements as base64 writes them
            self.values.pop(entity, None)
            sent = [0.0 if math.isnan(x) else max(-3.4028234663852886e38,
                                                  min(3.4028234663852886e38, x)) for x in m]
            return bytes([PACKED_RAW]) + _MATRIX.pack(*sent)
        rotation, scale = _smallest_three(parts[1]), _snap_scale(parts[2])
        base = self.values.get(entity)
        flags, body = 0, b""
        if base is None or base[0] is None or q != base[0]:
            delta = base is not None and base[0] is not None
            flags |= PACKED_T | (PACKED_DELTA if delta else 0)
            body += b"".join(_varint(_zigzag(a - b if delta else a))
                             for a, b in zip(q, base[0] if delta else q))
        if base is None or rotation != base[1]:
            flags |= PACKED_R
            body += _U32.pack(rotation)
        if scale != list(base[2] if base else (1.0, 1.0, 1.0)):
            if scale[0] == scale[1] == scale[2]:
                flags |= PACKED_S_UNI
                body += _F32.pack(scale[0])
            else:
                flags |= PACKED_S
                body += _SCALE3.pack(*scale)
        self.values[entity] = (q, rotation, tuple(scale))
        return bytes([flags]) + body


def _compose(t, q, s):
    """T * R * S of a unit quaternion, column-major, rounded to float32."""
    x, y, z, w = q
    columns = [[1 - 2 * (y * y + z * z), 2 * (x * y + w * z), 2 * (x * z - w * y)],
               [2 * (x * y - w * z), 1 - 2 * (x * x + z * z), 2 * (y * z + w * x)],
               [2 * (x * z + w * y), 2 * (y * z - w * x), 1 - 2 * (x * x + y * y)]]
    m = []
    for column, scale in zip(columns, s):
        m += [v * scale for v in column] + [0]
    return _f32(m + list(t) + [1])


def _random_quat(rng):
    """A unit quaternion: uniform, near identity (a few thousandths of a degree to a degree),
    or with a chosen component the largest (so every smallest-three index comes up)."""
    c = [rng.uniform(-1, 1) for _ in range(4)]
    kind = rng.randrange(3)
    if kind == 1:
        small = 10 ** rng.uniform(-5, -1.8)
        c = [c[0] * small, c[1] * small, c[2] * small, 1]
    elif kind == 2:
        big = rng.randrange(4)
        c = [rng.choice((1, -1)) if i == big else c[i] * 0.3 for i in range(4)]
    length = math.sqrt(sum(v * v for v in c))
    return [v / length for v in c]


def _random_trs(rng):
    """A T x R x S matrix: non-uniform, uniform or unit scale, any of them mirrored in one
    axis, translations from 0.1 to 1e5."""
    s = [10 ** rng.uniform(-2, 2) for _ in range(3)]
    kind = rng.randrange(4)
    if kind == 0:
        s = [s[0]] * 3
    elif kind == 1:
        s = [1.0] * 3
    if rng.randrange(3) == 0:
        s[rng.randrange(3)] *= -1
    extent = 10 ** rng.uniform(-1, 5)
    return _compose([rng.uniform(-extent, extent) for _ in range(3)], _random_quat(rng), s)


def _random_non_trs(rng):
    """Not T x R x S: a shear, a zero column, a last row other than 0 0 0 1, or an infinity or
    NaN."""
    m = _random_trs(rng)
    a = rng.randrange(3)
    b = (a + 1 + rng.randrange(2)) % 3
    kind = rng.randrange(4)
    if kind == 0:
        la = math.sqrt(sum(v * v for v in m[4 * a : 4 * a + 3]))
        lb = math.sqrt(sum(v * v for v in m[4 * b : 4 * b + 3]))
        k = rng.uniform(1e-3, 0.5) * rng.choice((1, -1)) * lb / la
        m[4 * b : 4 * b + 3] = _f32([m[4 * b + i] + k * m[4 * a + i] for i in range(3)])
    elif kind == 1:
        m[4 * a : 4 * a + 3] = [0.0] * 3
    elif kind == 2:
        m[4 * a + 3] = 0.25
    else:
        m[rng.randrange(16)] = rng.choice((math.inf, -math.inf, math.nan))
    return m


def _quat_angle_deg(a, b):
    dot = abs(sum(x * y for x, y in zip(a, b)))
    return 2 * math.degrees(math.acos(min(1.0, dot)))


def _within_tolerance(step, want, got):
    """got is want (T x R x S) within the contract's tolerance: translation within step / 2
    per axis (plus float32 rounding), rotation within 0.5 degrees, scale as sent (within
    the snapping and the rounding of T * R * S). Returns the rotation's error, or None."""
    w, g = _take_apart(want), _take_apart(got)
    if g is None:
        return None
    for k in range(3):
        if abs(g[0][k] - w[0][k]) > step / 2 * (1 + 1e-9) + abs(w[0][k]) * 2 ** -23 + 1e-30:
            return None
        if abs(g[2][k] - w[2][k]) > 1e-5 * abs(w[2][k]):
            return None
    deg = _quat_angle_deg(w[1], g[1])
    return deg if deg <= 0.5 else None


def _snapshot(state):
    return state.step, state.origin, dict(state.values)


def _check_fixtures():
    """FRAME_A, B and C decode to the bits the C decoder gives, which are the hand matrices
    within tolerance; the test's encoder writes them byte for byte from those matrices."""
    identity, half_x = (0, 0, 0, 1), (1, 0, 0, 0)
    hand = [_compose((1, -2, 3), identity, (1, 1, 1)), _SHEARED,
            _compose((-0.5, 0, 100), half_x, (2, 2, 2)), _compose((0, 0, 0), identity, (-1, 1, 1))]
    encoder, state = _PackedEncoder(0.5), PackedState(0.5)
    assert encoder.encode(list(zip((5, 7, 300, 301), hand)), (9, 200, 1000)) == _FRAME_A
    entries, removed = state.decode(_FRAME_A)
    assert [e for e, _ in entries] == [5, 7, 300, 301] and removed == [9, 200, 1000], entries
    want = [_with_t(_IDENTITY_RS, (1, -2, 3)), _SHEARED, _with_t(_HALF_X_2_RS, (-0.5, 0, 100)),
            _with_t(_IDENTITY_RS, (0, 0, 0), negate_x=True)]
    for (e, got), w, h in zip(entries, want, hand):
        assert _bits(got) == _bits(w), (e, got, w)
        assert e == 7 or _within_tolerance(0.5, h, got) is not None, (e, got, h)
    assert state.values == {5: ((2, -4, 6), 0xE0080200, (1, 1, 1)),
                            300: ((-1, 0, 200), 0x20080200, (2, 2, 2)),
                            301: ((0, 0, 0), 0xE0080200, (-1, 1, 1))}, state.values

    moved = [_with_t(hand[0][:12], (1.5, -2, 3)), _compose((4, 5, 6), identity, (1, 1, 1)), hand[2]]
    assert encoder.encode(list(zip((5, 7, 300), moved))) == _FRAME_B
    entries, removed = state.decode(_FRAME_B)
    want = [_with_t(_IDENTITY_RS, (1.5, -2, 3)), _with_t(_IDENTITY_RS, (4, 5, 6)), want[2]]
    assert [e for e, _ in entries] == [5, 7, 300] and removed == [], entries
    for (e, got), w in zip(entries, want):
        assert _bits(got) == _bits(w), (e, got, w)

    encoder.set_grid(0.5, (1, 1, 1))
    state.set_grid(0.5, (1, 1, 1))
    assert all(v[0] is None for v in state.values.values()), state.values
    assert encoder.encode([(5, moved[0])]) == _FRAME_C
    entries, removed = state.decode(_FRAME_C)
    assert len(entries) == 1 and _bits(entries[0][1]) == _bits(want[0]), entries


# Every refusal of tests/unit/test_proto_packed.c, against a state holding 5 (q (1, 2, 3), or
# 2^63 - 1 in x for the overflow) and 6 (its translation forgotten).
_REFUSALS = [
    ("empty", ""), ("a count with nothing after it", "01"),
    ("a count the bytes cannot hold", "02050001"),
    ("a count of 11 bytes", "80" * 10 + "00"),
    ("a gap over 64 bits", "01" + "ff" * 9 + "7f0000"),
    ("a first gap of 0", "01000000"), ("a repeated id", "020500000000"),
    ("an id of 2^53", "01" + "80" * 7 + "100000"),
    ("ids that sum past 2^53 - 1", "020500fb" + "ff" * 6 + "0f0000"),
    ("flag 64", "01054000"), ("raw with a translation", "01052100"),
    ("a delta without 1", "01050200"), ("both scales", "01051800"),
    ("a new entity left out", "01070000"),
    ("a new entity without rotation", "01070100000000"),
    ("a new entity without translation", "0107040000000000"),
    ("a delta for a new entity", "01 07 07 00 00 00 000208e0 00"),
    ("a forgotten translation left out", "01060000"),
    ("a delta of a forgotten translation", "01060302000000"),
    ("a delta past 2^63 - 1", "01050302000000"),
    ("translation cut short", "0105010204"), ("rotation cut short", "010504000208"),
    ("scale cut short", "01 05 10 0000803f 000080"),
    ("raw cut short", "01052000000000"), ("no removed count", "010500"),
    ("a removed count the bytes cannot hold", "00030102"),
    ("a removed gap of 0", "00020100"), ("trailing bytes", "000000"),
]


def _refusals_state(at_limit=False):
    state = PackedState(1)
    state.values = {5: ((_INT64_MAX if at_limit else 1, 2, 3), 0xE0080200, (1.0, 1.0, 1.0)),
                    6: (None, 0x20080200, (2.0, 2.0, 2.0))}
    return state


def _check_refusals():
    for what, text in _REFUSALS:
        state = _refusals_state(at_limit="2^63" in what)
        before = _snapshot(state)
        try:
            state.decode(bytes.fromhex(text))
            raise AssertionError(f"{what}: decoded")
        except ValueError:
            pass
        assert _snapshot(state) == before, what
    for bad in ((0, (0, 0, 0)), (-1, (0, 0, 0)), (math.inf, (0, 0, 0)), (1, (0, math.nan, 0)),
                (1, (0, 0)), ("x", (0, 0, 0))):
        state = _refusals_state()
        before = _snapshot(state)
        try:
            state.set_grid(*bad)
            raise AssertionError(f"grid {bad} accepted")
        except ValueError:
            pass
        assert _snapshot(state) == before, bad


def _check_round_trips(rng):
    """Random frames of a pool of entities (T x R x S, or now and then not), removals, a new
    grid or a full frame every 25: each decoded within tolerance, raw ones as sent, and the
    decoder's state what the encoder holds. Returns a few payloads for the fuzzing."""
    steps = (0.001, 0.01, 1 / 3, 0.5, 7, 1e-6)
    encoder, state = _PackedEncoder(1), PackedState(1)
    seen, worst, samples = [0] * 4, 0.0, []
    for frame in range(400):
        if frame % 25 == 0:
            grid = (rng.choice(steps), tuple(rng.uniform(-1e3, 1e3) for _ in range(3)))
            encoder.set_grid(*grid)
            state.set_grid(*grid)
            if rng.randrange(2):
                encoder.values.clear()
                state.clear()
        changes, entity = [], 1 + rng.randrange(5)
        while len(changes) < 16 and entity <= 120:
            m = _random_trs(rng) if rng.randrange(10) else _random_non_trs(rng)
            changes.append((entity * 1000003, m))
            entity += 1 + rng.randrange(8)
        removed, entity = [], entity + rng.randrange(8)
        while len(removed) < 6 and entity <= 170:
            removed.append(entity * 1000003)
            entity += 1 + rng.randrange(40)
        payload = encoder.encode(changes, removed)
        if frame % 150 == 7:
            samples.append((_snapshot(state), payload))
        entries, got_removed = state.decode(payload)
        assert [e for e, _ in entries] == [e for e, _ in changes] and got_removed == removed
        for (e, m), (_, got) in zip(changes, entries):
            parts = _take_apart(m)
            if parts is None:
                sent = [0.0 if math.isnan(x) else x for x in m]
                sent = [math.copysign(3.4028234663852886e38, x) if math.isinf(x) else x
                        for x in sent]
                assert _bits(got) == _bits(sent) and e not in state.values, (e, m, got)
                continue
            seen[_smallest_three(parts[1]) >> 30] += 1
            deg = _within_tolerance(state.step, m, got)
            assert deg is not None, (frame, e, m, got, state.step, state.origin)
            worst = max(worst, deg)
        assert state.values == encoder.values, frame
    assert all(seen), seen
    print(f"  400 frames within tolerance: worst rotation error {worst:.4f} degrees, "
          f"smallest-three indices {seen}")
    return samples


def _check_delta_chain(rng):
    """10,000 ticks of random walks on step 0.001: every translation a delta after the first
    frame, and the decoded one within step / 2 (plus float32 rounding) of the true one."""
    step, origin = 0.001, (123.4, -56.7, 0.25)
    encoder, state = _PackedEncoder(step, origin), PackedState(step, origin)
    ids = [77, 154, 231]
    pos = {e: [rng.uniform(-500, 500) for _ in range(3)] for e in ids}
    quat = {e: _random_quat(rng) for e in ids}
    worst = 0.0
    for tick in range(10000):
        changes = []
        for e in ids:
            pos[e] = [v + rng.uniform(-0.05, 0.05) for v in pos[e]]
            changes.append((e, _compose(pos[e], quat[e], (1, 1, 1))))
        payload = encoder.encode(changes)
        if tick:
            assert all(v[0] is not None for v in encoder.values.values())
            assert payload[2] & (PACKED_T | PACKED_DELTA) == PACKED_T | PACKED_DELTA, payload
        entries, _ = state.decode(payload)
        for (_, want), (_, got) in zip(changes, entries):
            for k in (12, 13, 14):
                err = abs(got[k] - want[k])
                worst = max(worst, err)
                assert err <= step / 2 + abs(want[k]) * 2 ** -23, (tick, want, got)
    assert state.values == encoder.values
    print(f"  10000 ticks of deltas: worst translation error {worst:.6f} (step {step})")


def _decoded_or_refused(state, payload):
    """Decodes payload against state: True when decoded (well-formed), False when refused with
    ValueError, which must leave state as it was; any other exception fails."""
    before = _snapshot(state)
    try:
        entries, removed = state.decode(payload)
    except ValueError:
        assert _snapshot(state) == before, payload.hex()
        return False
    ids = [e for e, _ in entries]
    assert all(0 <= a < b <= ENTITY_MAX for a, b in zip([0] + ids, ids)), ids
    assert all(len(m) == 16 and all(isinstance(v, float) for v in m) for _, m in entries)
    assert all(0 <= a < b <= ENTITY_MAX for a, b in zip([0] + removed, removed)), removed
    return True


def _fixture_states():
    """(the state each fixture is decoded against, the fixture): A, B after A, C after the new
    origin."""
    state, cases = PackedState(0.5), []
    for payload, origin in ((_FRAME_A, (0, 0, 0)), (_FRAME_B, (0, 0, 0)), (_FRAME_C, (1, 1, 1))):
        state.set_grid(0.5, origin)
        cases.append((_snapshot(state), payload))
        state.decode(payload)
    return cases


def _check_fuzz(rng, samples):
    """Random bytes, and every truncation and single-byte change of good payloads (every value
    of every byte of the fixtures, four of each byte of random payloads): each is decoded or
    refused with ValueError (then changing nothing), never another exception."""
    decoded = refused = 0
    alphabet = [0, 1, 2, 3, 4, 5, 7, 8, 0x10, 0x20, 0x7F, 0x80, 0xFF]
    base = _refusals_state()
    for _ in range(3000):
        n = rng.randrange(40)
        payload = bytes(rng.choice(alphabet) if rng.randrange(2) else rng.randrange(256)
                        for _ in range(n))
        state = PackedState(base.step, base.origin)
        state.values = dict(base.values)
        if _decoded_or_refused(state, payload):
            decoded += 1
        else:
            refused += 1
    fixtures = _fixture_states()
    for before, payload in fixtures + samples:
        for n in range(len(payload)):  # every strict prefix is refused
            state = PackedState(before[0], before[1])
            state.values = dict(before[2])
            assert not _decoded_or_refused(state, payload[:n]), (n, payload.hex())
        state = PackedState(before[0], before[1])
        state.values = dict(before[2])
        assert not _decoded_or_refused(state, payload + b"\0")
        values = range(256) if (before, payload) in fixtures else \
            [0, 0xFF, rng.randrange(256), rng.randrange(256)]
        for i in range(len(payload)):
            for v in values:
                mutated = bytearray(payload)
                mutated[i] = v
                state = PackedState(before[0], before[1])
                state.values = dict(before[2])
                if _decoded_or_refused(state, bytes(mutated)):
                    decoded += 1
                else:
                    refused += 1
    assert decoded and refused
    print(f"  fuzzing: {decoded} payloads decoded, {refused} refused, nothing else raised")


def _check_mirror():
    """A Mirror decodes packed frames through each subscription's state: the grid from the
    frame (as a Client adds it) or from set_packed; a full frame starts afresh; a refused
    frame changes nothing; binary WebSocket messages parse to what apply_packed takes."""
    mirror = Mirror()
    frame = {"event": "frame", "sub": 4, "world": "w", "tick": 10, "full": True,
             "packed": base64.b64encode(_FRAME_A).decode(), "grid": {"step": 0.5}}
    mirror.apply(frame)
    assert sorted(mirror.matrices) == [5, 7, 300, 301] and mirror.tick == 10, mirror.matrices
    assert _bits(mirror.matrices[5]) == _bits(_with_t(_IDENTITY_RS, (1, -2, 3)))
    before = dict(mirror.matrices)
    bad = dict(frame, full=False, tick=11, packed=base64.b64encode(b"\x01\x63\x00\x00").decode())
    for refused in (bad, dict(frame, packed="BAEC"[:3]), dict(frame, packed="A*==")):
        try:
            mirror.apply(refused)
            raise AssertionError(f"{refused['packed']} was applied")
        except ValueError:
            pass
        assert mirror.matrices == before and mirror.tick == 10
    mirror.apply(dict(frame, full=False, tick=11, packed=base64.b64encode(_FRAME_B).decode()))
    assert mirror.matrices[5][12] == 1.5 and mirror.matrices[7][13] == 5, mirror.matrices
    # a new origin: the state forgets its translations, and the next frame brings them
    mirror.apply(dict(frame, full=False, tick=12, grid={"step": 0.5, "origin": [1, 1, 1]},
                      packed=base64.b64encode(_FRAME_C).decode()))
    assert mirror.matrices[5][12:15] == [1.5, -2, 3], mirror.matrices[5]
    # a full frame replaces the subscription's entities; a WebSocket message carries one
    message = struct.pack("<IQB", 4, 13, 1) + bytes.fromhex("01 06 05 020406 000208e0 00")
    sub, tick, full, payload = decode_ws_binary(message)
    assert (sub, tick, full) == (4, 13, True)
    mirror.set_packed(4, 0.5, (1, 1, 1))
    mirror.apply_packed(sub, tick, full, payload)
    assert sorted(mirror.matrices) == [6] and mirror.matrices[6][12:15] == [1.5, 2, 2.5]
    for message in (message[:12], struct.pack("<IQB", 4, 13, 2) + payload):
        try:
            decode_ws_binary(message)
            raise AssertionError(f"{message.hex()} was parsed")
        except ValueError:
            pass
    mirror.apply({"event": "unsubscribed", "sub": 4, "reason": "center_destroyed"})
    assert mirror.matrices == {}
    try:  # the subscription's grid went with it
        mirror.apply_packed(4, 14, True, payload)
        raise AssertionError("a frame without a grid was applied")
    except ValueError:
        pass


class _FakeDaemon:
    """Answers a Client over a socket from a script: each request gets the lines the script
    gives for it, frames included, so a Client's packed frames can be checked without a
    daemon that sends them."""

    def __init__(self, script):
        import threading
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.script = script
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self):
        conn, _ = self.listener.accept()
        with conn, conn.makefile("rb") as lines:
            script = iter(self.script)
            for line in lines:
                if json.loads(line).get("cmd") == "hello":  # a token from the environment
                    answer = [{"ok": True, "matrices": "json"}]
                else:
                    answer = next(script, [])
                conn.sendall(b"".join(json.dumps(a).encode() + b"\n" for a in answer))

    def close(self):
        self.thread.join(5)
        self.listener.close()


def _check_client():
    """A Client hands each packed frame to the mirror with its subscription's grid as it stands:
    a frame before update's answer on the old grid, the ones after on the new."""
    def frame(tick, full, payload):
        return {"event": "frame", "sub": 9, "world": "w", "tick": tick, "full": full,
                "packed": base64.b64encode(payload).decode()}
    daemon = _FakeDaemon([
        [{"ok": True, "sub": 9}, frame(1, True, _FRAME_A)],
        [frame(2, False, _FRAME_B), {"ok": True}, frame(3, False, _FRAME_C)],
    ])
    mirror = Mirror()
    try:
        with Client("127.0.0.1", daemon.port) as c:
            sub = c.subscribe("w", packed={"step": 0.5}, on_event=mirror.apply)
            assert sub == 9 and c.poll(0.2) == 1 and sorted(mirror.matrices) == [5, 7, 300, 301]
            c.update(sub, packed={"step": 0.5, "origin": [1, 1, 1]})
            assert mirror.tick == 2 and mirror.matrices[5][12] == 1.5, mirror.matrices[5]
            assert c.poll(0.2) == 1 and mirror.tick == 3, mirror.tick
            assert mirror.matrices[5][12:15] == [1.5, -2, 3], mirror.matrices[5]
    finally:
        daemon.close()


def selftest_packed(args):
    """The packed decoder, PackedState, the Mirror and decode_ws_binary against the contract
    and the C codec's fixtures; no daemon. SCN_SEED replays the random cases of a seed."""
    seed = int(os.environ.get("SCN_SEED") or "0x5eedc0de", 0)
    print(f"packed selftest: seed {seed} (SCN_SEED={seed} replays it)")
    rng = random.Random(seed)
    _check_fixtures()
    _check_refusals()
    samples = _check_round_trips(rng)
    _check_delta_chain(rng)
    _check_fuzz(rng, samples)
    _check_mirror()
    _check_client()
    print("packed selftest passed")


def main():
    p = argparse.ArgumentParser(description="scened client (standard library only)")
    p.add_argument("--host")
    p.add_argument("--port", type=int)
    p.add_argument("--token")
    p.add_argument("--tls", action="store_true", help="speak TLS (verified with the system's CAs)")
    p.add_argument("--tls-ca", help="the CA (PEM) that signed the daemon's certificate")
    p.add_argument("--tls-cert", help="this client's certificate (PEM), with --tls-key")
    p.add_argument("--tls-key", help="the key of --tls-cert")
    p.add_argument("--matrices", choices=["json", "b64"], default="json",
                   help="how the daemon sends matrices (b64: base64 of float32, exact)")
    p.add_argument("--selftest", action="store_true", help="check the client against a daemon")
    p.add_argument("--selftest-near", action="store_true",
                   help="check near subscriptions and their mirror against a daemon")
    p.add_argument("--selftest-packed", action="store_true",
                   help="check the packed frames' decoder and its mirror (no daemon needed)")
    p.add_argument("cmd", nargs="?", help="a command, e.g. world.list")
    p.add_argument("fields", nargs="*", help="key=value (values parsed as JSON when they can be)")
    args = p.parse_args()
    try:
        if args.selftest or args.selftest_near or args.selftest_packed:
            if args.selftest:
                selftest(args)
            if args.selftest_near:
                selftest_near(args)
            if args.selftest_packed:
                selftest_packed(args)
            return 0
    except ssl.SSLError as e:
        print(f"TLS: {e}", file=sys.stderr)
        return 2
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
    try:
        c = Client(args.host, args.port, args.token, matrices=args.matrices, tls=args.tls,
                   tls_ca=args.tls_ca, tls_cert=args.tls_cert, tls_key=args.tls_key)
    except ssl.SSLError as e:
        print(f"TLS: {e}", file=sys.stderr)
        return 2
    with c:
        try:
            print(json.dumps(c.call(args.cmd, **fields)))
        except ScenedError as e:
            print(f"{e.code}: {e.message}", file=sys.stderr)
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
