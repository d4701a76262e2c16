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
    python3 scripts/scened_client.py --port 7878 --selftest [--selftest-near]
        [--selftest-packed-daemon] [--tls-ca ca.pem]
and of the packed decoder alone (no daemon): python3 scripts/scened_client.py --selftest-packed

A packed frame the mirror refuses raises ValueError and empties that subscription's state: the
deltas after it are refused too (never decoded against stale values) until the subscription is
made again. Subscriptions made through pipeline() are not told their grid: give it with
Mirror.set_packed.
"""

import argparse
import array
import base64
import json
import math
import os
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
        self._held = None  # what on_event raised while a call waited, for the next poll
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
        """The next response; events on the way go to on_event. An exception on_event raises
        (a packed frame the mirror refuses) waits for the next poll, so that the call still
        gets its own response and the connection stays in step."""
        while True:
            msg = self._read_line()
            if "event" in msg and "ok" not in msg:
                try:
                    self._dispatch(msg)
                except Exception as e:  # noqa: BLE001 (raised again by poll)
                    if self._held is None:
                        self._held = e
                continue
            return msg

    def _dispatch(self, event):
        """Hands an event to on_event. A packed frame gets its subscription's grid as "grid"
        (the "packed" field given to subscribe or update, as it stands when the frame
        arrives: a new one applies from the first frame after the update's answer)."""
        sub = event.get("sub")
        if event.get("event") == "frame" and "packed" in event and sub in self.grids:
            event["grid"] = self.grids[sub]
        elif event.get("event") in ("world_destroyed", "unsubscribed", "moved"):
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
        """Hands stream events to on_event for the given time; returns how many arrived. What
        on_event raised while a call waited for its response is raised here first."""
        if self._held is not None:
            held, self._held = self._held, None
            raise held
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
    changes no matrix; the state is emptied, since the daemon's has moved past it, so the
    deltas that follow are refused too rather than decoded against stale values, until a
    full frame (subscribe again to get one)."""

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
        self._packed[sub] = state
        try:
            entries, removed = state.decode(payload)  # refused: no entity has changed
        except ValueError:
            state.clear()
            raise
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
            try:
                payload = base64.b64decode(event["packed"], validate=True)
            except ValueError as e:
                if sub in self._packed:
                    self._packed[sub].clear()
                raise ValueError(f"a packed frame of subscription {sub} whose \"packed\" is "
                                 f"not base64: {e}") from None
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
        elif kind in ("world_destroyed", "unsubscribed", "moved"):
            self.ended = kind
            self.reason = event.get("reason")
            if self.reason in self.DROPPING_ENDS:
                self._drop(sub, list(self._held.get(sub, ())))
            self._held.pop(sub, None)
            self._packed.pop(sub, None)
            self._grids.pop(sub, None)


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
    p.add_argument("--selftest-packed-daemon", action="store_true",
                   help="check packed frames from a daemon against b64 ones")
    p.add_argument("cmd", nargs="?", help="a command, e.g. world.list")
    p.add_argument("fields", nargs="*", help="key=value (values parsed as JSON when they can be)")
    args = p.parse_args()
    try:
        if args.selftest or args.selftest_near or args.selftest_packed or \
                args.selftest_packed_daemon:
            from scened_selftest import (selftest, selftest_near, selftest_packed,
                                         selftest_packed_daemon)
            if args.selftest:
                selftest(args)
            if args.selftest_near:
                selftest_near(args)
            if args.selftest_packed:
                selftest_packed(args)
            if args.selftest_packed_daemon:
                selftest_packed_daemon(args)
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
