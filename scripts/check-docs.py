#!/usr/bin/env python3
"""Checks the documents against the daemon and against each other (make test runs it).

1. Flags: every flag `scened --help` prints is in the flags table of docs/operations.md (the
   first table under its "## Flags" heading), and every flag there is in --help, each with the
   same default and environment variable. A default cell is compared by its first `code` span,
   or as "none" when it starts with "none" or is empty; --help's "(none)" and a flag without a
   default are "none".
2. Links: every relative link in README.md, docs/*.md and proto/PROTOCOL.md names a file that
   exists, and its #anchor a heading of that file (GitHub's rule: lower case, punctuation but
   '-' and '_' dropped, spaces made '-', a repeated heading suffixed -1, -2, ...).

Usage: scripts/check-docs.py [SCENED]   (default build/scened). Prints what differs; exit 1 then.
"""

import os
import re
import subprocess
import sys

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
OPERATIONS = "docs/operations.md"
FLAGS_HEADING = "## Flags"


def help_flags(scened):
    """{flag: (default, env)} from scened --help."""
    try:
        out = subprocess.run([scened, "--help"], check=True, capture_output=True,
                             text=True).stdout
    except (OSError, subprocess.CalledProcessError) as e:
        sys.exit(f"check-docs: cannot run {scened} --help: {e}")
    flags, last = {}, None
    for line in out.splitlines():
        m = re.match(r"^  --([a-z][a-z0-9-]*)", line)
        if m:
            last = m.group(1)
            flags[last] = ["none", ""]
            continue
        if last and line.startswith("    "):
            d = re.search(r"\bdefault (\S+?);", line)
            if d:
                flags[last][0] = "none" if d.group(1) == "(none)" else d.group(1)
            e = re.search(r"\benv (SCENED_[A-Z_]+)", line)
            if e:
                flags[last][1] = e.group(1)
    return {k: tuple(v) for k, v in flags.items()}


def cells(row):
    row = row.strip()[1:]
    if row.endswith("|") and not row.endswith("\\|"):
        row = row[:-1]
    return [c.strip() for c in re.split(r"(?<!\\)\|", row)]


def doc_default(cell):
    if not cell or cell.lower().startswith("none"):
        return "none"
    code = re.search(r"`([^`]*)`", cell)
    return code.group(1) if code else cell.split()[0]


def doc_flags(path):
    """{flag: (default, env)} from the flags table of docs/operations.md, and any problems."""
    with open(path, encoding="utf-8") as f:
        lines = f.read().splitlines()
    try:
        start = lines.index(FLAGS_HEADING)
    except ValueError:
        return {}, [f"{OPERATIONS}: no \"{FLAGS_HEADING}\" heading"]
    i = start + 1
    while i < len(lines) and not lines[i].startswith("|"):
        if lines[i].startswith("## "):
            return {}, [f"{OPERATIONS}: no table under \"{FLAGS_HEADING}\""]
        i += 1
    header = [h.lower() for h in cells(lines[i])]
    if not {"flag", "default", "env"} <= set(header):
        return {}, [f"{OPERATIONS}:{i + 1}: the flags table needs columns flag, env and default"]
    col = {name: header.index(name) for name in ("flag", "default", "env")}
    flags, problems = {}, []
    for n in range(i + 2, len(lines)):
        if not lines[n].startswith("|"):
            break
        row = cells(lines[n])
        names = re.findall(r"`-?-([a-z][a-z0-9-]*)", row[col["flag"]])
        if not names:
            problems.append(f"{OPERATIONS}:{n + 1}: no `--flag` in the flag column")
            continue
        name = "help" if "help" in names else names[0]
        if name in flags:
            problems.append(f"{OPERATIONS}:{n + 1}: --{name} is in the table twice")
        env = re.search(r"SCENED_[A-Z_]+", row[col["env"]])
        flags[name] = (doc_default(row[col["default"]]), env.group(0) if env else "")
    return flags, problems


def check_flags(scened):
    problems = []
    have = help_flags(scened)
    documented, problems = doc_flags(os.path.join(ROOT, OPERATIONS))
    for name, (default, env) in have.items():
        if name not in documented:
            problems.append(f"--{name} (default {default}) is in scened --help but not in the "
                            f"flags table of {OPERATIONS}")
            continue
        d_default, d_env = documented[name]
        if d_default != default:
            problems.append(f"--{name}: scened --help says default {default}, {OPERATIONS} "
                            f"says {d_default}")
        if d_env != env:
            problems.append(f"--{name}: scened --help says env {env or '(none)'}, "
                            f"{OPERATIONS} says {d_env or '(none)'}")
    for name in documented:
        if name not in have:
            problems.append(f"--{name} is in the flags table of {OPERATIONS} but not in "
                            "scened --help")
    return problems, len(have)


# ---- links ----------------------------------------------------------------------------------

def prose(text):
    """The text without fenced code blocks and code spans (links there are not links)."""
    text = re.sub(r"^(```|~~~).*?^\1[^\n]*$", "", text, flags=re.M | re.S)
    return re.sub(r"`[^`\n]*`", "", text)


def slug(heading):
    heading = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading)
    s = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return s.replace(" ", "-")


def anchors(path, cache={}):
    if path not in cache:
        with open(path, encoding="utf-8") as f:
            text = f.read()
        text = re.sub(r"^(```|~~~).*?^\1[^\n]*$", "", text, flags=re.M | re.S)
        seen, found = {}, set()
        for m in re.finditer(r"^#{1,6}[ \t]+(.+?)[ \t#]*$", text, flags=re.M):
            s = slug(m.group(1))
            n = seen.get(s, 0)
            seen[s] = n + 1
            found.add(s if n == 0 else f"{s}-{n}")
        found |= set(re.findall(r"<a (?:name|id)=\"([^\"]+)\"", text))
        cache[path] = found
    return cache[path]


def documents():
    docs = ["README.md", "proto/PROTOCOL.md"]
    docs += sorted(os.path.join("docs", f) for f in os.listdir(os.path.join(ROOT, "docs"))
                   if f.endswith(".md"))
    return docs


def check_links():
    problems, count = [], 0
    for doc in documents():
        path = os.path.join(ROOT, doc)
        with open(path, encoding="utf-8") as f:
            text = prose(f.read())
        for m in re.finditer(r"\]\(([^)\s]+)\)", text):
            target = m.group(1)
            if re.match(r"^[a-z]+:", target):
                continue
            count += 1
            file_part, _, anchor = target.partition("#")
            dest = os.path.normpath(os.path.join(os.path.dirname(path), file_part)) \
                if file_part else path
            if not dest.startswith(ROOT + os.sep) and dest != ROOT:
                problems.append(f"{doc}: link {target} leaves the repository")
                continue
            if not os.path.exists(dest):
                problems.append(f"{doc}: link {target}: {os.path.relpath(dest, ROOT)} "
                                "does not exist")
                continue
            if anchor and (not dest.endswith(".md") or anchor not in anchors(dest)):
                problems.append(f"{doc}: link {target}: no heading #{anchor} in "
                                f"{os.path.relpath(dest, ROOT)}")
    return problems, count


def main():
    scened = sys.argv[1] if len(sys.argv) > 1 else os.path.join(ROOT, "build", "scened")
    flag_problems, nflags = check_flags(scened)
    link_problems, nlinks = check_links()
    for p in flag_problems + link_problems:
        print(f"check-docs: {p}")
    if flag_problems or link_problems:
        return 1
    print(f"check-docs: {nflags} flags agree between scened --help and {OPERATIONS}; "
          f"{nlinks} links between the documents resolve")
    return 0


if __name__ == "__main__":
    sys.exit(main())
