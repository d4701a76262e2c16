#!/usr/bin/env python3
"""Runs the shell examples of README.md and docs/*.md against a fresh daemon (make test runs it).

Every fenced code block names its language (```sh, ```text, ```console, ```c, ...). A ```sh,
```bash or ```shell block is an example, and it runs: with bash -euo pipefail, from a directory
whose build/ holds the programs under test, with scened, scenectl and scene-bench on PATH and
SCENED_HOST and SCENED_PORT naming a daemon started for that file alone (on ports of its own). A
file's examples run in order against its daemon, as a reader would type them one after the
other. An example fails when a command exits non-zero or prints an error answer ("ok":false).

An example that must not run (it needs a cluster or other machines, runs until stopped, writes
outside its directory, loads the machine for long) is preceded by the line

    <!-- not run: REASON -->

and an indented code block (the older way to write one) is refused: fence it, so that it either
runs or says why not.

Usage: scripts/check-examples.py [--bin DIR] [FILE...]   (DIR holds scened, scenectl and
       scene-bench; default build/; FILEs default to README.md and docs/*.md)
       scripts/check-examples.py --selftest [--bin DIR]   (shows that each kind of fault fails)
Prints each example's outcome and what failed; exit 1 when any did.
"""

import glob
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
RUN_LANGS = {"sh", "bash", "shell"}
NOT_RUN = re.compile(r"^<!-- not run: (\S.*?) -->$")
FENCE = re.compile(r"^(\s*)(`{3,}|~{3,})\s*(.*)$")
PROGRAMS = ("scened", "scenectl", "scene-bench")
START_S = 15
EXAMPLE_S = 120


class Block:
    def __init__(self, path, line, lang, body, not_run):
        self.path, self.line, self.lang, self.body, self.not_run = path, line, lang, body, not_run


def parse(path, text):
    """The code blocks of a Markdown text, and the problems with how they are written."""
    lines = text.split("\n")
    blocks, problems = [], []
    i = 0
    while i < len(lines):
        line = lines[i]
        m = FENCE.match(line)
        if m and m.group(2)[0] == "`" and "`" in m.group(3):
            m = None  # inline code at the start of a line (CommonMark: not a fence)
        marker = NOT_RUN.match(lines[i - 1]) if i > 0 else None
        if m:
            indent, fence, info = m.groups()
            lang = info.split()[0].lower() if info.split() else ""
            end = i + 1
            while end < len(lines):
                close = FENCE.match(lines[end])
                if close and close.group(2).startswith(fence) and not close.group(3):
                    break
                end += 1
            if end == len(lines):
                problems.append(f"{path}:{i + 1}: a code block that is never closed")
            if not lang:
                problems.append(f"{path}:{i + 1}: a code block without a language (```sh runs; "
                                "```text, ```console and the others do not)")
            if marker and lang not in RUN_LANGS:
                problems.append(f"{path}:{i}: \"not run\" before a block that would not run")
            body = [l[len(indent):] if l.startswith(indent) else l.lstrip()
                    for l in lines[i + 1:end]]
            blocks.append(Block(path, i + 1, lang, body, marker.group(1) if marker else None))
            i = end + 1
            continue
        if marker:
            problems.append(f"{path}:{i}: \"not run\" that no code block follows")
        # Four spaces after a blank line, outside a list: an indented code block.
        if (re.match(r"^ {4,}\S", line) and i > 0 and not lines[i - 1].strip()
                and not re.match(r"^\s*([-*+]|\d+[.)])\s", line)):
            prev = next((l for l in reversed(lines[:i]) if l.strip()), "")
            if not prev.startswith((" ", "\t")) and not re.match(r"^([-*+]|\d+[.)])\s", prev):
                problems.append(f"{path}:{i + 1}: an indented code block: fence it (```sh to run "
                                "it, or with <!-- not run: REASON --> before it)")
        i += 1
    return blocks, problems


def clean_env():
    """This environment without the daemon's and scenectl's settings."""
    return {k: v for k, v in os.environ.items() if not k.startswith("SCENED_")}


class Daemon:
    """A daemon on ports of its own (any free ones), with its log in a file."""

    def __init__(self, bindir, workdir):
        self.log_path = os.path.join(workdir, "scened.log")
        self.log = open(self.log_path, "w")
        self.proc = subprocess.Popen(
            [os.path.join(bindir, "scened"), "--listen", "127.0.0.1:0", "--http", "127.0.0.1:0"],
            stdin=subprocess.DEVNULL, stdout=self.log, stderr=self.log, env=clean_env())
        self.port = None
        deadline = time.monotonic() + START_S
        while time.monotonic() < deadline and self.proc.poll() is None:
            m = re.search(r'msg="listening on 127\.0\.0\.1:(\d+)"', self.text())
            if m:
                self.port = int(m.group(1))
                return
            time.sleep(0.02)

    def text(self):
        with open(self.log_path, encoding="utf-8", errors="replace") as f:
            return f.read()

    def stop(self):
        """Stops it; its exit status (None when it had to be killed)."""
        if self.proc.poll() is None:
            self.proc.terminate()
        try:
            code = self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            code = None
        self.log.close()
        return code


def run_example(block, workdir, env):
    """Runs one example; None when it passed, else what went wrong."""
    # Line 1 is ours; the example's line k is the script's line k + 1, the document's
    # block.line + k.
    script = ("set -eEuo pipefail; trap 'echo \"@@ line $LINENO\" >&2' ERR\n"
              + "\n".join(block.body) + "\n")
    try:
        r = subprocess.run(["bash", "-c", script], cwd=workdir, env=env, stdin=subprocess.DEVNULL,
                           capture_output=True, text=True, timeout=EXAMPLE_S)
    except subprocess.TimeoutExpired:
        return f"{block.path}:{block.line}: still running after {EXAMPLE_S} s"
    if r.returncode != 0:
        m = re.search(r"@@ line (\d+)", r.stderr)
        at = block.line + int(m.group(1)) - 1 if m else block.line
        said = [l for l in r.stderr.splitlines() if not l.startswith("@@ line ")][-8:]
        return f"{block.path}:{at}: exit {r.returncode}" + "".join("\n    " + l for l in said)
    if '"ok":false' in r.stdout:
        return f"{block.path}:{block.line}: an error answer:\n    {r.stdout.strip()}"
    return None


def shown(path):
    """A path as problems name it: from the repository's root when it is inside."""
    rel = os.path.relpath(os.path.abspath(path), ROOT)
    return path if rel.startswith("..") else rel


def check(paths, bindir):
    """Checks the documents; the problems found, and counts (run, not run)."""
    problems, ran, skipped = [], 0, 0
    for prog in PROGRAMS:
        if not os.access(os.path.join(bindir, prog), os.X_OK):
            return [f"check-examples: {os.path.join(bindir, prog)} is not built"], 0, 0
    for path in paths:
        with open(path, encoding="utf-8") as f:
            blocks, found = parse(shown(path), f.read())
        problems += found
        examples = [b for b in blocks if b.lang in RUN_LANGS and b.not_run is None]
        skipped += sum(1 for b in blocks if b.lang in RUN_LANGS and b.not_run is not None)
        if not examples:
            continue
        workdir = tempfile.mkdtemp(prefix="scened-examples-")
        try:
            os.symlink(bindir, os.path.join(workdir, "build"))
            os.symlink(os.path.join(ROOT, "scripts"), os.path.join(workdir, "scripts"))
            bin_path = os.path.join(workdir, "bin")
            os.mkdir(bin_path)
            for prog in PROGRAMS:
                os.symlink(os.path.join(bindir, prog), os.path.join(bin_path, prog))
            daemon = Daemon(bindir, workdir)
            if daemon.port is None:
                problems.append(f"{path}: the daemon did not start:\n{daemon.text()}")
                daemon.stop()
                continue
            env = clean_env()
            env.update(PATH=bin_path + os.pathsep + env.get("PATH", ""),
                       SCENED_HOST="127.0.0.1", SCENED_PORT=str(daemon.port))
            for b in examples:
                why = run_example(b, workdir, env)
                ran += 1
                print(f"  {b.path}:{b.line}: {'ok' if why is None else 'FAILED'}")
                if why:
                    problems.append(why)
            code = daemon.stop()
            if code != 0:
                problems.append(f"{path}: the daemon exited {code} after the examples:\n"
                                + daemon.text())
        finally:
            shutil.rmtree(workdir, ignore_errors=True)
    return problems, ran, skipped


SELFTEST = {
    # the README's old first example: an entity set before the quick start creates one
    "order.md": ("```sh\nscenectl world.create world=main\n"
                 "scenectl transform.set_local world=main entity=2 t=[1,0,0]\n"
                 "scenectl transform.create world=main name=car\n```\n",
                 ["order.md:3: exit 1", "NOT_FOUND"]),
    "answer.md": ("```sh\necho '{\"cmd\":\"world.destroy\",\"world\":\"none\"}' "
                  "| scenectl --pipe || true\n```\n", ["answer.md:1: an error answer"]),
    "bare.md": ("```\nbuild/scenectl ping\n```\n", ["bare.md:1: a code block without a language"]),
    "indented.md": ("Text.\n\n    build/scenectl ping\n", ["indented.md:3: an indented code block"]),
    "stray.md": ("<!-- not run: nothing -->\nText.\n", ["stray.md:1: \"not run\" that no code"]),
    "good.md": ("```sh\nbuild/scenectl world.create world=main\n"
                "build/scenectl transform.create world=main name=car   # {\"entity\":1}\n"
                "scenectl transform.get world=main entity=1 trs=true\n```\n\n"
                "- a list\n\n    continued in the list\n\n"
                "<!-- not run: a daemon that never returns -->\n```sh\nfalse\n```\n"
                "```text\nfalse\n```\n", []),
}


def selftest(bindir):
    """Each kind of fault is reported where it is, and a good document passes."""
    failures = []
    with tempfile.TemporaryDirectory(prefix="scened-examples-selftest-") as d:
        for name, (text, wants) in SELFTEST.items():
            path = os.path.join(d, name)
            with open(path, "w", encoding="utf-8") as f:
                f.write(text)
            problems, _, _ = check([path], bindir)
            got = "\n".join(problems).replace(d + "/", "")
            if not wants and problems:
                failures.append(f"{name}: wanted no problem, got:\n{got}")
            for want in wants:
                if want not in got:
                    failures.append(f"{name}: wanted \"{want}\", got:\n{got or '(nothing)'}")
    for f in failures:
        print("check-examples selftest:", f)
    if failures:
        return 1
    print(f"check-examples selftest: {len(SELFTEST)} documents judged as expected")
    return 0


def main(argv):
    bindir = os.path.join(ROOT, "build")
    args = argv[1:]
    if "--bin" in args:
        k = args.index("--bin")
        bindir = args[k + 1]
        del args[k:k + 2]
    bindir = os.path.abspath(bindir)
    if args[:1] == ["--selftest"]:
        return selftest(bindir)
    paths = args or [os.path.join(ROOT, "README.md")] + sorted(
        glob.glob(os.path.join(ROOT, "docs", "*.md")))
    problems, ran, skipped = check(paths, bindir)
    for p in problems:
        print(p)
    if problems:
        return 1
    print(f"check-examples: {ran} examples ran against a daemon, {skipped} marked not run")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
