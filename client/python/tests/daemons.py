"""The real daemon (and etcd) for the tests: loopback, ephemeral ports, each process stopped by
its own PID."""

from __future__ import annotations

import os
import random
import re
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import time
import urllib.request

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
SCENED = os.environ.get("SCENED_BIN") or os.path.join(REPO, "build", "scened")


def wait_until(what, check, seconds=15.0, every=0.02):
    """check() until it is truthy (returned), else AssertionError naming what."""
    deadline = time.monotonic() + seconds
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(every)


class Process:
    """A child whose output is collected by a thread (so that it never blocks on a full pipe)."""

    def __init__(self, argv, name):
        self.name = name
        self.log = ""
        self._lock = threading.Lock()
        self.proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                     stderr=subprocess.STDOUT, text=True, errors="replace")
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self):
        for line in self.proc.stdout:
            with self._lock:
                self.log += line

    def text(self):
        with self._lock:
            return self.log

    def stop(self, seconds=10.0):
        """SIGTERM to this PID, then SIGKILL if it has not exited in time; its exit code."""
        if self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(seconds)
            except subprocess.TimeoutExpired:
                os.kill(self.proc.pid, signal.SIGKILL)
                self.proc.wait(seconds)
        self._reader.join(seconds)
        return self.proc.returncode


class Daemon(Process):
    """build/scened on 127.0.0.1 port 0, HTTP off; port is the one it reports listening on."""

    def __init__(self, *args, name="scened"):
        if not os.access(SCENED, os.X_OK):
            raise AssertionError(f"{SCENED} is not built (make build/scened, or set SCENED_BIN)")
        super().__init__([SCENED, "--listen", "127.0.0.1:0", "--http", "off", *args], name)
        try:
            found = wait_until(f"{name} to listen", self._port)
        except AssertionError:
            self.stop()
            raise AssertionError(f"{name} did not start:\n{self.text()}") from None
        self.port = int(found)
        self.addr = f"127.0.0.1:{self.port}"

    def _port(self):
        if self.proc.poll() is not None:
            raise AssertionError(f"{self.name} exited ({self.proc.returncode}):\n{self.text()}")
        m = re.search(r"listening on 127\.0\.0\.1:(\d+)", self.text())
        return m and m.group(1)


def free_port():
    """A loopback port nothing listens on now, below the kernel's ephemeral range, so that a
    port 0 listener cannot be handed the same one before etcd binds it (as tests/fixtures/etcd.c
    picks them)."""
    low = 32768
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
            low = int(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        pass
    rng = random.Random()
    for _ in range(1000):
        port = rng.randrange(1024, max(low, 2048))
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
        return port
    raise AssertionError("no free loopback port")


class Etcd(Process):
    """A single-member etcd in a temporary directory, fast elections."""

    def __init__(self):
        if not shutil.which("etcd"):
            raise AssertionError("etcd is not installed (scripts/install-deps.sh installs it)")
        self.dir = tempfile.mkdtemp(prefix="scened-etcd-")
        port, peer = free_port(), free_port()
        self.url = f"http://127.0.0.1:{port}"
        peer_url = f"http://127.0.0.1:{peer}"
        super().__init__(["etcd", "--name", "t", "--data-dir", os.path.join(self.dir, "data"),
                          "--listen-client-urls", self.url, "--advertise-client-urls", self.url,
                          "--listen-peer-urls", peer_url, "--initial-advertise-peer-urls",
                          peer_url, "--initial-cluster", f"t={peer_url}",
                          "--heartbeat-interval", "10", "--election-timeout", "100"], "etcd")
        try:
            wait_until("etcd to answer", self._healthy)
        except AssertionError:
            self.stop()
            raise AssertionError(f"etcd did not start:\n{self.text()}") from None

    def _healthy(self):
        if self.proc.poll() is not None:
            raise AssertionError(f"etcd exited ({self.proc.returncode}):\n{self.text()}")
        try:
            with urllib.request.urlopen(self.url + "/health", timeout=1) as r:
                return b"true" in r.read()
        except OSError:
            return False

    def stop(self, seconds=10.0):
        code = super().stop(seconds)
        shutil.rmtree(self.dir, ignore_errors=True)
        return code


def tls_certs(directory):
    """ca.pem, server.pem/.key and client.pem/.key in directory (scripts/tls-certs.sh)."""
    subprocess.run([os.path.join(REPO, "scripts", "tls-certs.sh"), directory], check=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    return {name: os.path.join(directory, name)
            for name in ("ca.pem", "server.pem", "server.key", "client.pem", "client.key")}
