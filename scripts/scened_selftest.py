#!/usr/bin/env python3
"""The self-tests of the scened package, run through scripts/scened_client.py (which puts the
package on the path): --selftest, --selftest-near and --selftest-packed-daemon against a
daemon, --selftest-packed without one."""

import array
import base64
import json
import math
import os
import random
import socket
import struct
import threading
import time

from scened import (ENTITY_MAX, PACKED_DELTA, PACKED_R, PACKED_RAW, PACKED_S, PACKED_S_UNI,
                    PACKED_T, Client, Mirror, PackedState, ScenedError, decode_ws_binary, float32,
                    matrix, matrix_b64)
from scened.b64 import MATRIX as _MATRIX
from scened.packed import _F32, _INT64_MAX, _SCALE3, _U32


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
    frame changes no matrix and empties the state, so that a delta after it is refused rather
    than decoded against stale values, until a full frame; binary WebSocket messages parse to
    what apply_packed takes."""
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
        try:
            mirror.apply(dict(frame, full=False, tick=11,
                              packed=base64.b64encode(_FRAME_B).decode()))
            raise AssertionError("a delta after a refused frame was applied")
        except ValueError as e:
            assert "a part left out or a delta" in str(e), e
        assert mirror.matrices == before and mirror.tick == 10
        mirror.apply(frame)  # a full frame: decoded again
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
    a frame before update's answer on the old grid, the ones after on the new. A frame the
    mirror refuses while a call waits is raised by the next poll, the call getting its own
    answer."""
    def frame(tick, full, payload):
        return {"event": "frame", "sub": 9, "world": "w", "tick": tick, "full": full,
                "packed": base64.b64encode(payload).decode()}
    daemon = _FakeDaemon([
        [{"ok": True, "sub": 9}, frame(1, True, _FRAME_A)],
        [frame(2, False, _FRAME_B), {"ok": True}, frame(3, False, _FRAME_C)],
        [frame(4, False, b"\x01\x63\x00\x00"), {"ok": True, "pong": 1}],
        [{"ok": True, "pong": 2}],
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
            assert c.call("ping") == {"pong": 1}  # the refused frame came first
            try:
                c.poll(0)
                raise AssertionError("the refused frame was not raised by poll")
            except ValueError as e:
                assert "refused at byte" in str(e), e
            assert c.call("ping") == {"pong": 2} and c.poll(0) == 0
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


def _record(mirror, ids, snaps, counts):
    """An on_event that applies each event to mirror and keeps, per tick, the matrices of ids
    once the mirror holds them all."""
    def on_event(event):
        mirror.apply(event)
        if event.get("event") == "frame":
            counts["frames"] += 1
            counts["packed"] += "packed" in event
            if all(e in mirror.matrices for e in ids):
                snaps[event["tick"]] = {e: list(mirror.matrices[e]) for e in ids}
    return on_event


def _compare_ticks(exact, packed, step, after=-1):
    """Every tick both saw (past after): each packed matrix within the tolerance of the exact
    one (a matrix that is not T x R x S: equal). The number of ticks compared."""
    compared, worst = 0, 0.0
    for tick in sorted(set(exact) & set(packed)):
        if tick <= after:
            continue
        for e, want in exact[tick].items():
            got = packed[tick][e]
            if _take_apart(want) is None:
                assert _bits(got) == _bits(want), (tick, e, want, got)
                continue
            deg = _within_tolerance(step, want, got)
            assert deg is not None, (tick, e, step, want, got)
            worst = max(worst, deg)
        compared += 1
    print(f"  {compared} ticks compared on step {step}: worst rotation error {worst:.3f} degrees")
    return compared


def selftest_packed_daemon(args):
    """Packed frames from a daemon: a packed subscription's Mirror, tick for tick, within the
    contract's tolerance of a b64 subscription's on another connection, through moves (parented
    entities among them, whose world matrices may be sheared and travel raw), a new grid
    (update) and the end of the world. SCN_SEED replays the moves of a seed."""
    seed = int(os.environ.get("SCN_SEED") or "0x5eedc0de", 0)
    print(f"packed daemon selftest: seed {seed} (SCN_SEED={seed} replays it)")
    rng = random.Random(seed)
    world = f"pyclient-packed-{os.getpid()}"
    tls = tls_args(args)
    with Client(args.host, args.port, args.token, **tls) as c, \
            Client(args.host, args.port, args.token, matrices="b64", **tls) as b, \
            Client(args.host, args.port, args.token, **tls) as p:
        c.call("world.create", world=world)

        def random_matrix():
            return matrix_b64(_random_trs(rng))

        ids = []
        for i in range(20):
            parent = {"parent": ids[i - 8]} if i >= 16 else {}
            ids.append(c.call("transform.create", world=world, matrix_b64=random_matrix(),
                              **parent)["entity"])
        exact, packed = {}, {}
        exact_counts, packed_counts = {"frames": 0, "packed": 0}, {"frames": 0, "packed": 0}
        exact_mirror, packed_mirror = Mirror(), Mirror()
        b.subscribe(world, on_event=_record(exact_mirror, ids, exact, exact_counts))
        sub = p.subscribe(world, packed={"step": 0.001, "origin": [3, -4, 5]},
                          on_event=_record(packed_mirror, ids, packed, packed_counts))

        def rounds(n):
            for _ in range(n):
                for _ in range(rng.randrange(1, 5)):
                    c.call("transform.set_local", world=world, entity=rng.choice(ids),
                           matrix_b64=random_matrix())
                tick = c.call("transform.get", world=world, entity=ids[0])["tick"]
                deadline = time.monotonic() + 5
                while time.monotonic() < deadline and \
                        not (max(exact, default=-1) > tick and max(packed, default=-1) > tick):
                    b.poll(0.005)
                    p.poll(0.005)

        rounds(40)
        assert packed_counts["packed"] == packed_counts["frames"] > 0, packed_counts
        assert exact_counts["packed"] == 0 and exact_counts["frames"] > 0, exact_counts
        assert _compare_ticks(exact, packed, 0.001) >= 20
        # a new grid, from the first frame after the answer
        p.update(sub, packed={"step": 0.25})
        before = max(packed)
        rounds(25)
        assert _compare_ticks(exact, packed, 0.25, before) >= 10
        last = packed[max(packed)]
        assert any(all(v / 0.25 == int(v / 0.25) for v in last[e][12:15]) for e in ids), last
        c.call("world.destroy", world=world)
        deadline = time.monotonic() + 5
        while packed_mirror.ended is None and time.monotonic() < deadline:
            p.poll(0.05)
        assert packed_mirror.ended == "world_destroyed" and sub not in p.grids
    print("packed daemon selftest passed")

