"""Fixtures: a daemon for the module, a TLS daemon with its certificates, and a fake daemon
that answers from a script (for what a real one cannot be made to do: answer late)."""

from __future__ import annotations

import asyncio
import json
import os
import socket
import sys
import threading

import pytest

sys.path.insert(0, os.path.dirname(__file__))

from daemons import Daemon, tls_certs  # noqa: E402


def pytest_report_header(config):
    import scened
    return f"scened package: {os.path.dirname(scened.__file__)}"


@pytest.fixture(scope="module")
def daemon():
    d = Daemon("--tick-hz", "50")
    yield d
    assert d.stop() == 0, d.text()


@pytest.fixture(scope="module")
def certs(tmp_path_factory):
    return tls_certs(str(tmp_path_factory.mktemp("tls")))


@pytest.fixture(scope="module")
def tls_daemon(certs):
    d = Daemon("--tick-hz", "50", "--tls-cert", certs["server.pem"], "--tls-key",
               certs["server.key"], "--tls-ca", certs["ca.pem"], name="scened (TLS)")
    yield d
    assert d.stop() == 0, d.text()


def run(coro, seconds=60):
    """Runs a coroutine on a new event loop, bounded."""
    return asyncio.run(asyncio.wait_for(coro, seconds))


class FakeDaemon:
    """Accepts one connection and, for each request line, waits for answer(request) to say
    what to send: a list of (delay seconds, message) or None for nothing. Keeps the requests
    it read, as parsed JSON."""

    def __init__(self, answer):
        self.answer = answer
        self.requests = []
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.conn = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self):
        self.listener.settimeout(30)
        try:
            conn, _ = self.listener.accept()
        except OSError:
            return
        self.conn = conn
        with conn, conn.makefile("rb") as lines:
            for line in lines:
                req = json.loads(line)
                self.requests.append(req)
                for delay, msg in self.answer(req) or ():
                    if self._stop.wait(delay):
                        return
                    conn.sendall(json.dumps(msg).encode() + b"\n")

    def close(self):
        self._stop.set()
        self.listener.close()
        if self.conn is not None:
            try:
                self.conn.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        self._thread.join(10)
