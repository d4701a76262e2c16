"""A local copy of the world matrices a subscription's frames carry, in any of their forms."""

from __future__ import annotations

import base64
from typing import Any, Dict, Iterable, Mapping, Optional, Sequence, Set

from .b64 import decode_matrices
from .packed import Grid, PackedState, checked_grid

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
    full frame (subscribe again to get one).

    A packed subscription's grid (its step and origin) is known to the mirror from set_packed
    or from its frames: grid(sub), and step and origin for the one set or applied last."""

    DROPPING_ENDS = ("center_destroyed", "root_destroyed")

    def __init__(self) -> None:
        self.matrices: Dict[int, Sequence[float]] = {}
        self.tick = 0
        self.ended: Optional[str] = None   # the event that ended a subscription: "moved", ...
        self.reason: Optional[str] = None  # and the reason an "unsubscribed" gave
        self._held: Dict[int, Set[int]] = {}  # subscription -> the entities its frames brought
        self._packed: Dict[int, PackedState] = {}  # packed subscription -> its PackedState
        self._grids: Dict[int, Grid] = {}  # packed subscription -> its (step, origin)
        self._last_grid: Optional[int] = None  # the packed subscription set or applied last

    def set_packed(self, sub: int, step: float, origin: Iterable[float] = (0, 0, 0)) -> None:
        """The grid of a packed subscription (its "packed" field), for frames without one."""
        self._grids[sub] = checked_grid(step, origin)
        self._last_grid = sub

    def grid(self, sub: Optional[int] = None) -> Optional[Grid]:
        """(step, origin) of packed subscription sub (by default the one set or applied last),
        None when the mirror knows no grid for it."""
        return self._grids.get(self._last_grid if sub is None else sub)

    @property
    def step(self) -> Optional[float]:
        """The step of the packed subscription set or applied last; None when there is none."""
        g = self.grid()
        return g[0] if g else None

    @property
    def origin(self) -> Optional[tuple]:
        """The origin (x, y, z) of the packed subscription set or applied last, or None."""
        g = self.grid()
        return g[1] if g else None

    def apply_packed(self, sub: int, tick: int, full: bool, payload: bytes,
                     grid: Optional[Mapping[str, Any]] = None) -> None:
        """A packed frame's payload (bytes), as decode_ws_binary returns it with its header;
        grid is the subscription's "packed" field ({"step", "origin"}), by default the one
        given to set_packed. A full frame starts the subscription's state afresh."""
        if grid is not None:
            step, origin = checked_grid(grid.get("step"), grid.get("origin", (0, 0, 0)))
        elif sub in self._grids:
            step, origin = self._grids[sub]
        else:
            raise ValueError(f"a packed frame of subscription {sub}, whose grid is unknown")
        self._grids[sub] = (step, origin)
        self._last_grid = sub
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

    def apply(self, event: Mapping[str, Any]) -> None:
        """Applies one event of a subscription (a frame in any form, or the end of one)."""
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

