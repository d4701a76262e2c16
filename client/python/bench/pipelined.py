#!/usr/bin/env python3
"""Calls per second of the Python package against a running daemon: AsyncClient calls awaited
together (pipelined on one connection, DEPTH in flight), beside the blocking Client's
pipeline() and its one-at-a-time call() for scale. Each call is a partial
transform.set_local of one transform.

    python3 client/python/bench/pipelined.py --port 7878 [--calls 50000] [--depth 256]

Runs from a checkout without installing (the package is found in ../src) or with it installed.
"""

import argparse
import asyncio
import os
import sys
import time

_SRC = os.path.join(os.path.dirname(os.path.realpath(__file__)), os.pardir, "src")
if os.path.isdir(os.path.join(_SRC, "scened")):
    sys.path.insert(0, os.path.normpath(_SRC))

import scened  # noqa: E402


async def async_rate(args, world, entity):
    async with scened.AsyncClient(args.host, args.port) as c:
        done, t0 = 0, time.perf_counter()
        while done < args.calls:
            n = min(args.depth, args.calls - done)
            await asyncio.gather(*(c.call("transform.set_local", world=world, entity=entity,
                                          partial=True, t=[done + i, 0, 0]) for i in range(n)))
            done += n
        return args.calls / (time.perf_counter() - t0)


def blocking_rates(args, world, entity):
    with scened.Client(args.host, args.port) as c:
        n = args.calls
        t0 = time.perf_counter()
        for start in range(0, n, args.depth):
            c.pipeline([{"cmd": "transform.set_local", "world": world, "entity": entity,
                         "partial": True, "t": [i, 0, 0]}
                        for i in range(start, min(n, start + args.depth))])
        pipelined = n / (time.perf_counter() - t0)
        single = max(1, n // 10)
        t0 = time.perf_counter()
        for i in range(single):
            c.call("transform.set_local", world=world, entity=entity, partial=True, t=[i, 0, 0])
        return pipelined, single / (time.perf_counter() - t0)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=7878)
    p.add_argument("--calls", type=int, default=50000)
    p.add_argument("--depth", type=int, default=256, help="calls in flight")
    p.add_argument("--runs", type=int, default=3, help="the median of this many runs")
    args = p.parse_args()
    world = f"py-bench-{os.getpid()}"
    with scened.Client(args.host, args.port) as c:
        c.call("world.create", world=world)
        entity = c.call("transform.create", world=world)["entity"]
    try:
        rates = sorted(asyncio.run(async_rate(args, world, entity)) for _ in range(args.runs))
        pipelined, single = blocking_rates(args, world, entity)
    finally:
        with scened.Client(args.host, args.port) as c:
            c.call("world.destroy", world=world)
    print(f"python {sys.version.split()[0]}, {args.calls} calls, {args.depth} in flight, "
          f"one connection (median of {args.runs} runs)")
    print(f"AsyncClient.call, awaited together  {rates[len(rates) // 2]:10.0f} calls/s")
    print(f"Client.pipeline                     {pipelined:10.0f} calls/s")
    print(f"Client.call, one at a time          {single:10.0f} calls/s")


if __name__ == "__main__":
    main()
