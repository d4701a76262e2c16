"""Both clients over TLS (certificates of scripts/tls-certs.sh): a client certificate for a
daemon that requires one, and a daemon whose CA is not trusted refused."""

from __future__ import annotations

import os
import ssl

import pytest

import scened
from conftest import run
from daemons import tls_certs, wait_until


def test_blocking_client_over_tls(tls_daemon, certs):
    w = f"pytls-{os.getpid()}"
    with scened.Client("localhost", tls_daemon.port, tls_ca=certs["ca.pem"],
                       tls_cert=certs["client.pem"], tls_key=certs["client.key"],
                       matrices="b64") as c:
        assert c.matrices == "b64" and c.tls is not None
        c.call("world.create", world=w)
        e = c.call("transform.create", world=w, t=[1, 2, 3])["entity"]
        mirror = scened.Mirror()
        c.subscribe(w, on_event=mirror.apply)
        wait_until("the frame", lambda: c.poll(0.05) >= 0 and e in mirror.matrices)
        assert list(mirror.matrices[e])[12:15] == [1, 2, 3]
        c.call("world.destroy", world=w)


def test_async_client_over_tls(tls_daemon, certs):
    w = f"pyaiotls-{os.getpid()}"

    async def main():
        async with scened.AsyncClient("localhost", tls_daemon.port, tls_ca=certs["ca.pem"],
                                      tls_cert=certs["client.pem"],
                                      tls_key=certs["client.key"]) as c:
            await c.call("world.create", world=w)
            e = (await c.call("transform.create", world=w, t=[4, 5, 6]))["entity"]
            sub = await c.subscribe(w, packed={"step": 0.25})
            async for _ in sub.frames():
                if e in sub.mirror.matrices:
                    break
            assert list(sub.mirror.matrices[e])[12:15] == [4, 5, 6]
            await c.call("world.destroy", world=w)
    run(main())


def test_an_untrusted_daemon_is_refused(tls_daemon, certs, tmp_path):
    theirs = tls_certs(str(tmp_path))
    mine = dict(tls_cert=certs["client.pem"], tls_key=certs["client.key"])
    with pytest.raises(ssl.SSLCertVerificationError):
        scened.Client("localhost", tls_daemon.port, tls_ca=theirs["ca.pem"], **mine)

    async def main():
        with pytest.raises(ssl.SSLCertVerificationError):
            await scened.AsyncClient("localhost", tls_daemon.port, tls_ca=theirs["ca.pem"],
                                     **mine).connect()
    run(main())
