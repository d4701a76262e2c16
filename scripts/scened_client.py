#!/usr/bin/env python3
"""The command line of the scened Python package (client/python, `pip install ./client/python`),
which it finds beside it when run from the repository:

    python3 scripts/scened_client.py [--host H] [--port P] [--token T] [--tls-ca ca.pem]
        [--matrices b64] world.create world=main
    python3 scripts/scened_client.py --port 7878 --selftest [--selftest-near]
        [--selftest-packed-daemon] [--tls-ca ca.pem]
    python3 scripts/scened_client.py --selftest-packed       (the packed decoder, no daemon)

Programs that put scripts/ on their path may still `from scened_client import Client, Mirror`:
the package's names are here too. See client/python/README.md and docs/clients.md.
"""

import argparse
import json
import os
import ssl
import sys

# The package lives in client/python/src; run from the repository it needs no installing.
_HERE = os.path.dirname(os.path.realpath(__file__))
_SRC = os.path.join(_HERE, os.pardir, "client", "python", "src")
if os.path.isdir(os.path.join(_SRC, "scened")):
    sys.path.insert(0, os.path.normpath(_SRC))

import scened  # noqa: E402
from scened import *  # noqa: E402,F401,F403 (what `from scened_client import ...` has given)
from scened import Client, ScenedError  # noqa: E402

__all__ = scened.__all__


def main():
    p = argparse.ArgumentParser(description="scened client (standard library only)")
    p.add_argument("--host")
    p.add_argument("--port", type=int)
    p.add_argument("--token")
    p.add_argument("--tls", action="store_true", help="speak TLS (verified with the system's CAs)")
    p.add_argument("--tls-ca", help="the CA (PEM) that signed the daemon's certificate")
    p.add_argument("--tls-cert", help="this client's certificate (PEM), with --tls-key")
    p.add_argument("--tls-key", help="the key of --tls-cert")
    p.add_argument("--matrices", choices=["json", "b64"], default="json",
                   help="how the daemon sends matrices (b64: base64 of float32, exact)")
    p.add_argument("--selftest", action="store_true", help="check the client against a daemon")
    p.add_argument("--selftest-near", action="store_true",
                   help="check near subscriptions and their mirror against a daemon")
    p.add_argument("--selftest-packed", action="store_true",
                   help="check the packed frames' decoder and its mirror (no daemon needed)")
    p.add_argument("--selftest-packed-daemon", action="store_true",
                   help="check packed frames from a daemon against b64 ones")
    p.add_argument("cmd", nargs="?", help="a command, e.g. world.list")
    p.add_argument("fields", nargs="*", help="key=value (values parsed as JSON when they can be)")
    args = p.parse_args()
    try:
        if args.selftest or args.selftest_near or args.selftest_packed or \
                args.selftest_packed_daemon:
            from scened_selftest import (selftest, selftest_near, selftest_packed,
                                         selftest_packed_daemon)
            if args.selftest:
                selftest(args)
            if args.selftest_near:
                selftest_near(args)
            if args.selftest_packed:
                selftest_packed(args)
            if args.selftest_packed_daemon:
                selftest_packed_daemon(args)
            return 0
    except ssl.SSLError as e:
        print(f"TLS: {e}", file=sys.stderr)
        return 2
    if not args.cmd:
        p.print_usage()
        return 2
    fields = {}
    for kv in args.fields:
        key, _, value = kv.partition("=")
        try:
            fields[key] = json.loads(value)
        except ValueError:
            fields[key] = value
    try:
        c = Client(args.host, args.port, args.token, matrices=args.matrices, tls=args.tls,
                   tls_ca=args.tls_ca, tls_cert=args.tls_cert, tls_key=args.tls_key)
    except ssl.SSLError as e:
        print(f"TLS: {e}", file=sys.stderr)
        return 2
    with c:
        try:
            print(json.dumps(c.call(args.cmd, **fields)))
        except ScenedError as e:
            print(f"{e.code}: {e.message}", file=sys.stderr)
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
