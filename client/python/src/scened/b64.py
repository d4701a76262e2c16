"""Matrices as the daemon sends them: arrays of 16 numbers (json) or the base64 of their 16
little-endian float32 (b64), exact to the bit (PROTOCOL.md 3.11)."""

from __future__ import annotations

import array
import base64
import struct
import sys
from typing import Iterable, List, Sequence, Union

MATRIX = struct.Struct("<16f")


def matrix_b64(m: Sequence[float]) -> str:
    """16 numbers (column-major) as base64 of their float32 bytes, for "matrix_b64"."""
    return base64.b64encode(MATRIX.pack(*m)).decode("ascii")


def matrix(value: Union[str, Iterable[float]]) -> List[float]:
    """A matrix as the daemon sends it, either form, as 16 floats (b64: the exact float32
    values; json: the numbers as written, which round to the same float32 values)."""
    if isinstance(value, str):
        return list(MATRIX.unpack(base64.b64decode(value, validate=True)))
    return list(value)


def float32(values: Sequence[float]) -> List[float]:
    """The float32 values of numbers, as floats (what the daemon holds for them)."""
    return list(struct.unpack(f"<{len(values)}f", struct.pack(f"<{len(values)}f", *values)))


def decode_matrices(ms: str, count: int) -> "array.array[float]":
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
