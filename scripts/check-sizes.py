#!/usr/bin/env python3
"""Small files with one job each: fails when a C file under the given directories is over
MAX_FILE lines, or a function in one is over MAX_FUNCTION lines (from the line that starts its
signature to its closing brace). Run by `make layering`; `--selftest` shows both are caught."""
import glob
import os
import re
import sys
import tempfile

MAX_FILE = 900
MAX_FUNCTION = 120


def blank_comments_and_strings(src):
    """The source with comments, strings and character constants blanked (lines kept)."""
    src = re.sub(r"/\*.*?\*/", lambda m: "\n" * m.group(0).count("\n"), src, flags=re.S)
    src = re.sub(r"//[^\n]*", "", src)
    src = re.sub(r'"(\\.|[^"\\\n])*"', '""', src)
    return re.sub(r"'(\\.|[^'\\\n])*'", "''", src)


def long_functions(path):
    """(line, length, signature) of each function over MAX_FUNCTION lines."""
    lines = blank_comments_and_strings(open(path, encoding="utf-8").read()).split("\n")
    found, depth, start, signature = [], 0, None, None
    for i, line in enumerate(lines):
        if depth == 0 and line and not line[0].isspace() and line[0] not in "#}":
            signature = (i, line)
        for ch in line:
            if ch == "{":
                if depth == 0:
                    start = signature or (i, line)
                depth += 1
            elif ch == "}":
                depth -= 1
                if depth == 0 and start:
                    length = i - start[0] + 1
                    if "(" in start[1] and length > MAX_FUNCTION:
                        found.append((start[0] + 1, length, start[1].strip()))
                    start = None
    return found


def check(dirs):
    problems = []
    for d in dirs:
        for path in sorted(glob.glob(os.path.join(d, "**", "*.[ch]"), recursive=True)):
            n = sum(1 for _ in open(path, encoding="utf-8"))
            if n > MAX_FILE:
                problems.append(f"{path}: {n} lines (at most {MAX_FILE})")
            for line, length, sig in long_functions(path):
                problems.append(f"{path}:{line}: a function of {length} lines "
                                f"(at most {MAX_FUNCTION}): {sig[:60]}")
    return problems


def selftest():
    with tempfile.TemporaryDirectory() as d:
        body = "".join(f"  x += {i};\n" for i in range(MAX_FUNCTION))
        open(os.path.join(d, "long.c"), "w").write(
            "static int f(int x,\n             int y) {\n" + body + "  return x + y;\n}\n")
        open(os.path.join(d, "big.h"), "w").write("/* a */\n" * (MAX_FILE + 1))
        open(os.path.join(d, "fine.c"), "w").write(
            'int g(void) {\n  const char *s = "}{";\n  return s[0];\n}\n')
        problems = check([d])
        assert any("long.c:1: a function of" in p for p in problems), problems
        assert any("big.h" in p for p in problems), problems
        assert not any("fine.c" in p for p in problems), problems


if __name__ == "__main__":
    if sys.argv[1:] == ["--selftest"]:
        selftest()
        sys.exit(0)
    problems = check(sys.argv[1:] or ["server"])
    for p in problems:
        print("check-sizes:", p, file=sys.stderr)
    sys.exit(1 if problems else 0)
