"""A subscription of the asyncio client: its mirror, kept current as frames are read, and the
frames themselves for whoever iterates frames()."""

from __future__ import annotations

import asyncio
import collections
from typing import TYPE_CHECKING, Any, AsyncIterator, Deque, Dict, Mapping, Optional

from .mirror import Mirror
from .protocol import ends_subscription, request_line, result

if TYPE_CHECKING:
    from .connection import Connection

_END = object()  # queued when the subscription ends: frames() stops there


class Subscription:
    """What subscribe returns. mirror holds the scope's world matrices, whether or not frames()
    is iterated; frames() yields each frame (a dict, as the daemon sent it) after the mirror
    has taken it. A reader more than backlog frames behind loses the oldest (the mirror
    never does; dropped counts them). When the subscription ends, ended says how: the event
    that ended it ("world_destroyed", "unsubscribed" with reason, "moved"), "unsubscribe"
    after unsubscribe(), or "closed" with the connection (error is then the ConnectionError
    when the connection was lost rather than closed)."""

    def __init__(self, conn: "Connection", sub: int, world: str,
                 packed: Optional[Mapping[str, Any]], backlog: int) -> None:
        self.id = sub
        self.world = world
        self.mirror = Mirror()
        self.ended: Optional[str] = None
        self.reason: Optional[str] = None
        self.end_event: Optional[Dict[str, Any]] = None
        self.error: Optional[BaseException] = None  # the last a frame or the connection raised
        self.dropped = 0
        self._conn = conn
        self._queue: Deque[Any] = collections.deque(maxlen=max(1, backlog))
        self._waiter: Optional[asyncio.Future] = None
        if isinstance(packed, Mapping):
            self.mirror.set_packed(sub, packed["step"], packed.get("origin", (0, 0, 0)))

    def __repr__(self) -> str:
        return f"<Subscription {self.id} of {self.world!r} on {self._conn.addr}>"

    # ---- what the connection tells it ----------------------------------------------------

    def _push(self, item: Any) -> None:
        if len(self._queue) == self._queue.maxlen:
            self.dropped += 1
        self._queue.append(item)
        if self._waiter is not None and not self._waiter.done():
            self._waiter.set_result(None)

    def _event(self, event: Dict[str, Any]) -> None:
        kind = event.get("event")
        try:
            self.mirror.apply(event)
        except (ValueError, KeyError, TypeError) as e:  # a frame refused: PackedState says why
            self.error = e
            self._push(e)
            if kind == "frame":
                return
        if kind == "frame":
            self._push(event)
        elif ends_subscription(kind):
            self._conn.subs.pop(self.id, None)
            self._end(kind, event.get("reason"), event)

    def _end(self, how: str, reason: Optional[str] = None,
             event: Optional[Dict[str, Any]] = None) -> None:
        if self.ended is None:
            self.ended, self.reason, self.end_event = how, reason, event
            self._push(_END)

    def _lost(self, error: Optional[BaseException]) -> None:
        if error is not None and self.ended is None:
            self.error = error
            self._push(error)
        self._end("closed")

    # ---- for the program -----------------------------------------------------------------

    async def frames(self) -> AsyncIterator[Dict[str, Any]]:
        """The frames in order, until the subscription ends. A packed frame the mirror refused
        raises its ValueError, and a lost connection ConnectionError, where they came; a new
        frames() goes on after them."""
        while True:
            while not self._queue:
                if self._waiter is None or self._waiter.done():
                    self._waiter = asyncio.get_running_loop().create_future()
                await self._waiter
            item = self._queue.popleft()
            if item is _END:
                self._queue.append(_END)  # every later frames() ends at once too
                return
            if isinstance(item, BaseException):
                raise item
            yield item

    async def update(self, **fields: Any) -> Dict[str, Any]:
        """subscribe.update with the fields given (near=None sends null: no region); a new
        packed grid applies from the first frame after the answer."""
        packed = fields.get("packed")

        def answered(conn: "Connection", resp: Dict[str, Any], abandoned: bool) -> None:
            if isinstance(packed, Mapping):
                self.mirror.set_packed(self.id, packed["step"], packed.get("origin", (0, 0, 0)))

        return result(await self._request("subscribe.update", dict(fields, sub=self.id), answered))

    async def unsubscribe(self) -> Dict[str, Any]:
        """Ends the subscription; no frame of it follows, and frames() ends."""
        def answered(conn: "Connection", resp: Dict[str, Any], abandoned: bool) -> None:
            conn.subs.pop(self.id, None)
            self._end("unsubscribe")

        return result(await self._request("unsubscribe", {"sub": self.id}, answered))

    async def _request(self, cmd: str, fields: Dict[str, Any], on_answer: Any) -> Dict[str, Any]:
        # a subscription lives on the connection it was made on: no routing, no MOVED
        return await self._conn.send(request_line(cmd, fields), on_answer)  # type: ignore[misc]
