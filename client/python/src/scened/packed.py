"""Packed frames: the payload's layout and the C codec (proto/packed.h, PROTOCOL.md 6.13). A
translation on a grid of the subscription's step, a rotation in four bytes ("smallest three"),
a scale when there is one, each as a delta against what the subscription last received."""

from __future__ import annotations

import array
import math
import struct
from typing import Dict, Iterable, List, Tuple

from .b64 import MATRIX

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


def quat_from_smallest_three(u: int) -> List[float]:
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


Grid = Tuple[float, Tuple[float, float, float]]


def checked_grid(step: float, origin: Iterable[float]) -> Grid:
    """(step, origin) as floats; ValueError unless step is positive and finite and origin is
    three finite numbers."""
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

    def __init__(self, step: float, origin: Iterable[float] = (0, 0, 0)) -> None:
        self.step, self.origin = checked_grid(step, origin)
        self.values: Dict[int, tuple] = {}  # entity -> (q or None, rotation, scale)

    def set_grid(self, step: float, origin: Iterable[float] = (0, 0, 0)) -> None:
        """A new step or origin forgets every translation (rotations and scales stay); the same
        one changes nothing. A bad one raises ValueError and changes nothing."""
        step, origin = checked_grid(step, origin)
        if (step, origin) != (self.step, self.origin):
            self.values = {e: (None, r, s) for e, (_, r, s) in self.values.items()}
        self.step, self.origin = step, origin

    def clear(self) -> None:
        """Forgets every entity (a full frame): everything comes absolute. Keeps the grid."""
        self.values = {}

    def decode(self, payload: bytes) -> Tuple[List[Tuple[int, List[float]]], List[int]]:
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
            return list(MATRIX.unpack(r.take(64))), None
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


def decode_ws_binary(message: bytes) -> Tuple[int, int, bool, bytes]:
    """A packed frame as a WebSocket binary message: (sub, tick, full, payload), from the
    little-endian header sub (u32), tick (u64), flags (u8, bit 0 full). A message shorter
    than the header, or with a flag bit other than bit 0, raises ValueError."""
    if len(message) < _WS_HEADER.size:
        raise ValueError(f"a packed binary message of {len(message)} bytes has no whole header")
    sub, tick, flags = _WS_HEADER.unpack_from(message)
    if flags & ~1:
        raise ValueError(f"a packed binary message with unknown flags {flags:#x}")
    return sub, tick, bool(flags & 1), bytes(message[_WS_HEADER.size :])

