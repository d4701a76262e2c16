"""scened: a client of the scened scene daemon (newline-delimited JSON over TCP or TLS).

    import scened
    with scened.Client("127.0.0.1", 7878) as c:          # blocking
        c.call("world.create", world="main")

    async with scened.AsyncClient("127.0.0.1", 7878) as c:   # asyncio, pipelined
        sub = await c.subscribe("main")
        async for frame in sub.frames():
            print(sub.mirror.matrices)
"""

from .aio import AsyncClient
from .b64 import decode_matrices, float32, matrix, matrix_b64
from .client import Client
from .mirror import Mirror
from .packed import (ENTITY_MAX, PACKED_DELTA, PACKED_R, PACKED_RAW, PACKED_S, PACKED_S_UNI,
                     PACKED_T, PackedState, decode_ws_binary, quat_from_smallest_three)
from .protocol import ScenedError, tls_context
from .subscription import Subscription

__version__ = "0.1.0"

__all__ = [
    "AsyncClient", "Client", "ENTITY_MAX", "Mirror", "PACKED_DELTA", "PACKED_R", "PACKED_RAW",
    "PACKED_S", "PACKED_S_UNI", "PACKED_T", "PackedState", "ScenedError", "Subscription",
    "decode_matrices", "decode_ws_binary", "float32", "matrix", "matrix_b64",
    "quat_from_smallest_three", "tls_context",
]
