"""What both clients share about the wire: request lines, responses and their errors, events,
MOVED, TLS contexts and the connection defaults (PROTOCOL.md 1 and 12)."""

from __future__ import annotations

import json
import os
import ssl
from typing import Any, Dict, Mapping, Optional, Tuple

MOVED_HOPS = 3  # a request follows MOVED at most this many times


class ScenedError(Exception):
    """An error reply: .code is the protocol's error code, .message its text."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message


def defaults(host: Optional[str], port: Optional[int],
             token: Optional[str]) -> Tuple[str, int, Optional[str]]:
    """host, port and token, each from SCENED_HOST, SCENED_PORT and SCENED_AUTH_TOKEN when not
    given (else 127.0.0.1 and 7878, no token)."""
    host = host or os.environ.get("SCENED_HOST", "127.0.0.1")
    port = int(port or os.environ.get("SCENED_PORT", 7878))
    return host, port, token or os.environ.get("SCENED_AUTH_TOKEN") or None


def tls_context(tls_ca: Optional[str] = None, tls_cert: Optional[str] = None,
                tls_key: Optional[str] = None) -> ssl.SSLContext:
    """A client context: TLS 1.2 or later, the daemon's certificate verified against tls_ca (a
    PEM file; None: the system's CAs) and the host name, and this client's certificate when
    the daemon asks for one (--tls-ca)."""
    ctx = ssl.create_default_context(cafile=tls_ca)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    if tls_cert:
        ctx.load_cert_chain(tls_cert, tls_key)
    return ctx


def tls_of(tls: bool, tls_ca: Optional[str], tls_cert: Optional[str],
           tls_key: Optional[str]) -> Optional[ssl.SSLContext]:
    """The context a client speaks TLS with, None for plain TCP: any TLS option asks for it."""
    return tls_context(tls_ca, tls_cert, tls_key) if tls or tls_ca or tls_cert else None


def request_line(cmd: str, fields: Mapping[str, Any]) -> bytes:
    """One request as its line: cmd and the fields given, nothing else (the daemon refuses a
    member its command does not take)."""
    return (json.dumps(dict(cmd=cmd, **fields)) + "\n").encode()


def hello_fields(matrices: str, token: Optional[str],
                 follower_reads: bool = False) -> Dict[str, Any]:
    fields: Dict[str, Any] = {"matrices": matrices}
    if token:
        fields["token"] = token
    if follower_reads:
        fields["follower_reads"] = True
    return fields


def needs_hello(matrices: str, token: Optional[str], follower_reads: bool = False) -> bool:
    """A new connection says hello only for a token, a matrix form other than json, or
    follower reads."""
    return bool(token) or matrices != "json" or follower_reads


def is_event(msg: Mapping[str, Any]) -> bool:
    """Events have "event" and never "ok"; responses never have "event" (PROTOCOL.md 1.3)."""
    return "event" in msg and "ok" not in msg


def result(resp: Mapping[str, Any]) -> Dict[str, Any]:
    """A response's result fields (without ok and id), or ScenedError for an error."""
    if not resp.get("ok"):
        err = resp.get("error") or {}
        raise ScenedError(err.get("code", "ERROR"), err.get("message", ""))
    return {k: v for k, v in resp.items() if k not in ("ok", "id")}


def moved_to(resp: Mapping[str, Any], world: Any) -> Optional[str]:
    """The owner's "HOST:PORT" when resp is MOVED for a request naming world, else None."""
    if resp.get("ok") or not isinstance(world, str):
        return None
    err = resp.get("error") or {}
    addr = err.get("addr")
    return addr if err.get("code") == "MOVED" and isinstance(addr, str) else None


def split_addr(addr: str) -> Tuple[str, int]:
    """("HOST", PORT) of "HOST:PORT" (an IPv6 host in brackets)."""
    host, _, port = addr.rpartition(":")
    return host.strip("[]"), int(port)


def ends_subscription(kind: Optional[str]) -> bool:
    """Whether an event of this kind ends its subscription."""
    return kind in ("world_destroyed", "unsubscribed", "moved")
