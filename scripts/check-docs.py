#!/usr/bin/env python3
"""Fails when README.md or docs/*.md cite a file of the repository or a test that does not exist.

A citation is a `code span` that names a path under one of the repository's top folders
(`src/...`, `tests/...`, a glob such as `bench/narrow_*`, or `path:LINE`), or a test by its ctest
name (`cli.version`, `Suite.Test` of a GoogleTest suite, `Suite.*`). Run by scripts/test.sh.
"""
import pathlib
import re
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
TOP = ("src", "include", "tests", "scripts", "bench", "docs", "tools", "bindings", "plugins",
       "examples", "cmake", "packaging", "abi", ".ci")
SPAN = re.compile(r"`([^`\n]+)`")


def tracked():
    out = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True)
    return out.stdout.split()


def test_names(files):
    """ctest's names: add_test(NAME ...) and GoogleTest's Suite.Test."""
    names, suites = set(), set()
    for f in files:
        path = ROOT / f
        if f.endswith("CMakeLists.txt"):
            names.update(re.findall(r"add_test\(\s*NAME\s+([\w.\-]+)", path.read_text()))
        elif f.startswith("tests/") and f.endswith((".cpp", ".hpp")):
            for suite, test in re.findall(r"^\s*(?:TEST|TEST_F|TEST_P|TYPED_TEST)\(\s*(\w+)\s*,\s*(\w+)",
                                          path.read_text(errors="replace"), re.M):
                names.add(f"{suite}.{test}")
                suites.add(suite)
    return names, suites


def path_exists(token, files, folders):
    token = re.sub(r":[0-9]+(-[0-9]+)?$", "", token).rstrip("/")
    if "*" in token or "?" in token:
        pattern = re.compile("^" + re.escape(token).replace(r"\*", "[^/]*").replace(r"\?", ".") +
                             "(/.*)?$")
        return any(pattern.match(f) for f in files)
    if token in files or token in folders:
        return True
    # A program or library the build makes from a source of the same name (bench/graph_io_bench,
    # bench/liblock_profile.so).
    stem = re.sub(r"^lib(.*)\.so$", r"\1", pathlib.PurePosixPath(token).name)
    parent = str(pathlib.PurePosixPath(token).parent)
    return any(f"{parent}/{stem}{ext}" in files for ext in (".c", ".cpp", ".cu", ".rs", ".py"))


def main():
    files = tracked()
    folders = {str(pathlib.PurePosixPath(f).parents[i]) for f in files
               for i in range(len(pathlib.PurePosixPath(f).parents) - 1)}
    names, suites = test_names(files)
    prefixes = {n.split(".")[0] for n in names if "." in n and n.split(".")[0] not in suites}
    docs = ["README.md"] + sorted(f for f in files if f.startswith("docs/") and f.endswith(".md"))
    missing = []
    for doc in docs:
        in_history = False
        for number, line in enumerate((ROOT / doc).read_text().splitlines(), 1):
            # benchmarks.md's history records what was true then: its paths may have moved since.
            if doc == "docs/benchmarks.md" and line.startswith("## History"):
                in_history = True
            if in_history:
                continue
            for span in SPAN.findall(line):
                token = span.split()[0] if span.split() else ""
                if token.startswith(tuple(t + "/" for t in TOP)) and not token.startswith("build"):
                    if not path_exists(token, files, folders):
                        missing.append(f"{doc}:{number}: `{span}`: no such file in the repository")
                elif re.fullmatch(r"[A-Za-z_]\w*\.([A-Z]\w*|\*)", token) or \
                        re.fullmatch(r"[a-z_]\w*\.[\w*]+", token):
                    head, tail = token.split(".", 1)
                    if head in suites and tail != "*" and token not in names:
                        missing.append(f"{doc}:{number}: `{span}`: no such GoogleTest test")
                    elif head in suites and tail == "*":
                        pass
                    elif head in prefixes and token not in names and \
                            not any(n.startswith(token) for n in names):
                        missing.append(f"{doc}:{number}: `{span}`: no such ctest test")
    for m in missing:
        print(m)
    if missing:
        print(f"check-docs: {len(missing)} citation(s) of things that do not exist (above)")
        return 1
    print(f"check-docs: every path and test cited in {len(docs)} documents exists")
    return 0


if __name__ == "__main__":
    sys.exit(main())
