"""One asyncio connection to one daemon: request lines written as they are made (the lines of
one pass of the event loop in one write), responses matched to them in order (PROTOCOL.md
1.3), events handed to their subscription as they are read, and each request's deadline."""

from __future__ import annotations

import asyncio
import collections
import json
from typing import Any, Callable, Deque, Dict, List, Optional, Tuple

from .protocol import is_event

# Told a request's ok response as it is read, before any later line (so that a subscription
# exists before its first frame): (connection, response, abandoned), abandoned when nobody
# waits for the response any more (its deadline passed or its caller was cancelled).
OnAnswer = Callable[["Connection", Dict[str, Any], bool], None]


class Connection(asyncio.Protocol):
    """The reading side runs inside the event loop's callbacks: nothing here awaits."""

    def __init__(self, addr: str, timeout: Optional[float]) -> None:
        self.addr = addr
        self.timeout = timeout
        self.subs: Dict[int, Any] = {}  # subscription id -> its Subscription
        self.lost: Optional[BaseException] = None  # set once the connection is gone
        self._loop = asyncio.get_running_loop()
        self._transport: Optional[asyncio.Transport] = None
        # (future or None, on_answer, deadline), in the order the requests were written
        self._pending: Deque[Tuple[Optional[asyncio.Future], Optional[OnAnswer],
                                   Optional[float]]] = collections.deque()
        self._parts: List[bytes] = []  # a line not ended yet
        self._out: List[bytes] = []  # request lines to write at the end of this loop pass
        self._timer: Optional[asyncio.TimerHandle] = None
        self._closing = False
        self._closed = self._loop.create_future()

    # ---- asyncio.Protocol ----------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._transport = transport  # type: ignore[assignment]

    def data_received(self, data: bytes) -> None:
        if b"\n" not in data:
            self._parts.append(data)
            return
        if self._parts:
            self._parts.append(data)
            data = b"".join(self._parts)
            self._parts = []
        end = data.rindex(b"\n") + 1
        if end < len(data):
            self._parts.append(data[end:])
        try:
            lines = data[:end].decode().split("\n")  # one decode for every line of the chunk
        except UnicodeDecodeError as e:
            self._fail(ConnectionError(f"{self.addr} sent a line that is not UTF-8: {e}"))
            return
        for line in lines:
            if line and self.lost is None:
                try:
                    msg = json.loads(line)
                except ValueError as e:
                    self._fail(ConnectionError(f"{self.addr} sent a line that is not JSON: {e}"))
                    return
                self._line(msg)

    def connection_lost(self, exc: Optional[Exception]) -> None:
        if self.lost is None:
            why = "closed" if self._closing else f"lost ({exc})" if exc else "closed by the daemon"
            self.lost = ConnectionError(f"the connection to {self.addr} was {why}")
        if self._timer:
            self._timer.cancel()
        while self._pending:
            fut = self._pending.popleft()[0]
            if fut is not None and not fut.done():
                fut.set_exception(self.lost)
        for sub in list(self.subs.values()):
            sub._lost(None if self._closing else self.lost)
        self.subs.clear()
        if not self._closed.done():
            self._closed.set_result(None)

    # ---- requests ------------------------------------------------------------------------

    def send(self, line: bytes, on_answer: Optional[OnAnswer] = None,
             wait: bool = True) -> Optional[asyncio.Future]:
        """Writes a request line now; returns the future of its response (None with
        wait=False: the response is read and dropped)."""
        if self.lost is not None:
            raise self.lost
        fut = self._loop.create_future() if wait else None
        deadline = None
        if wait and self.timeout is not None:
            deadline = self._loop.time() + self.timeout
            if self._timer is None:
                self._timer = self._loop.call_at(deadline, self._expire)
        self._pending.append((fut, on_answer, deadline))
        if not self._out:
            self._loop.call_soon(self._flush)
        self._out.append(line)
        return fut

    def _flush(self) -> None:
        """Writes the lines of this pass of the event loop: one write, not a system call each."""
        if self._out and self.lost is None:
            self._transport.write(b"".join(self._out))  # type: ignore[union-attr]
        self._out = []

    def _line(self, msg: Dict[str, Any]) -> None:
        if is_event(msg):
            sub = self.subs.get(msg.get("sub"))  # type: ignore[arg-type]
            if sub is not None:
                sub._event(msg)
            return
        if not self._pending:
            self._fail(ConnectionError(f"{self.addr} sent a response to no request"))
            return
        fut, on_answer, _ = self._pending.popleft()
        abandoned = fut is None or fut.done()
        if on_answer is not None and msg.get("ok"):
            on_answer(self, msg, abandoned)
        if not abandoned:
            fut.set_result(msg)  # type: ignore[union-attr]

    def _expire(self) -> None:
        """Fails the requests whose deadline has passed (their responses are dropped when they
        come); waits again for the first one still waiting."""
        self._timer = None
        now = self._loop.time()
        for fut, _, deadline in self._pending:
            if fut is None or fut.done() or deadline is None:
                continue
            if deadline > now:
                self._timer = self._loop.call_at(deadline, self._expire)
                return
            fut.set_exception(TimeoutError(f"no response from {self.addr} in {self.timeout} s"))

    # ---- closing -------------------------------------------------------------------------

    def _fail(self, exc: BaseException) -> None:
        self.lost = exc
        if self._transport is not None:
            self._transport.abort()

    async def close(self) -> None:
        """Closes the connection once what it has to write is written, and waits until it is
        closed (at most its timeout)."""
        self._closing = True
        self._flush()
        if self._transport is not None and self.lost is None:
            if self._transport.get_write_buffer_size() == 0:
                # nothing left to send; a TLS close would wait for the daemon's close_notify
                self._transport.abort()
            else:
                self._transport.close()
        try:
            await asyncio.wait_for(asyncio.shield(self._closed), self.timeout)
        except asyncio.TimeoutError:
            if self._transport is not None:
                self._transport.abort()
