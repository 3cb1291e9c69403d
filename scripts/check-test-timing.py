#!/usr/bin/env python3
"""Flags tests that use the clock as a judge: a sleep followed by an assertion (a sleep used as
synchronisation), and an assertion that compares an elapsed time (a latency threshold).

Timing targets belong in bench/; a test waits for a condition, polling with a deadline that only
guards a hang (docs/testing.md). A sleep inside a polling loop is fine and is not flagged. The
few lines that must stay are listed in scripts/test-timing-allow.txt as `PATH: TEXT  # REASON`,
TEXT being a fragment of the flagged line (so the entry survives edits elsewhere in the file).

  scripts/check-test-timing.py             # checks every tracked test file
  scripts/check-test-timing.py --self-test # shows that it catches what it should
"""
import pathlib
import re
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
ALLOW = ROOT / "scripts" / "test-timing-allow.txt"
TEST_GLOBS = ["tests/*", "bindings/*/tests/*", "plugins/*/tests/*", "bindings/rust/*/tests/*"]
SUFFIXES = {".c", ".cpp", ".hpp", ".h", ".py", ".sh", ".rs"}

SLEEP = re.compile(r"\bsleep_for\s*\(|\busleep\s*\(|\bnanosleep\s*\(|\btime\.sleep\s*\(|"
                   r"(^|[;&|]\s*|^\s*)sleep\s+[0-9.]+\b|\bthread::sleep\s*\(|asyncio\.sleep\s*\(")
ASSERTION = re.compile(r"\b(EXPECT|ASSERT)_[A-Z_]+\s*\(|^\s*assert\b|\bself\.assert\w*\s*\(|"
                       r"\bassert(_eq|_ne)?!\s*\(|\bpytest\.fail\b|\bfail\b\s+\"|\[\s*.*\]\s*\|\|\s*fail")
LOOP = re.compile(r"\b(while|for|loop|until)\b|\bdo\s*\{|wait_until|poll_until|deadline")
CLOCK = re.compile(r"ms_since\s*\(|\belapsed\w*|\bnow_ns\s*\(|steady_clock|monotonic\s*\(|"
                   r"perf_counter\s*\(|\blatency\w*|\btook\b|Instant::now|\.elapsed\(\)|"
                   r"\bduration_cast\b|\$SECONDS|date \+%s")
COMPARE = re.compile(r"\b(EXPECT|ASSERT)_(LT|LE|GT|GE)\s*\(|^\s*assert\b.*[<>]|"
                     r"self\.assert(Less|Greater)\w*\s*\(|assert!\s*\(.*[<>]|-(lt|le|gt|ge)\b")
ZERO = re.compile(r",\s*0(\.0)?\s*\)|[<>]=?\s*0(\.0)?\s*($|[,)#])")


def allow_list():
    entries = []
    for raw in ALLOW.read_text().splitlines() if ALLOW.exists() else []:
        line = raw.split("  #", 1)[0].strip()
        if not line or line.startswith("#"):
            continue
        path, _, text = line.partition(": ")
        entries.append((path.strip(), text.strip()))
    return entries


def findings(path, lines):
    """(line number, kind, text) for each suspicious line of one file."""
    out = []
    for i, line in enumerate(lines):
        code = line.split("//", 1)[0] if path.suffix in {".c", ".cpp", ".hpp", ".h", ".rs"} else line
        if path.suffix in {".py", ".sh"}:
            code = code.split(" #", 1)[0] if not code.lstrip().startswith("#") else ""
        if SLEEP.search(code):
            before = "\n".join(lines[max(0, i - 6):i + 1])
            after = [text for text in lines[i + 1:i + 6] if text.strip()][:3]
            if not LOOP.search(before) and any(ASSERTION.search(text) for text in after):
                out.append((i + 1, "sleep then assert", line.strip()))
        # A deadline is a hang guard, and "took some time" (against zero) is no threshold.
        if COMPARE.search(code) and CLOCK.search(code) and "deadline" not in code and \
                not ZERO.search(code):
            out.append((i + 1, "elapsed-time comparison", line.strip()))
    return out


def tracked_tests():
    files = subprocess.run(["git", "ls-files", *TEST_GLOBS], cwd=ROOT, capture_output=True,
                           text=True, check=True).stdout.split()
    return [ROOT / f for f in files if pathlib.Path(f).suffix in SUFFIXES]


def check(files):
    allowed = allow_list()
    used = set()
    bad = []
    for f in files:
        rel = f.relative_to(ROOT).as_posix()
        for number, kind, text in findings(f, f.read_text(errors="replace").splitlines()):
            hit = next((e for e in allowed if e[0] == rel and e[1] in text), None)
            if hit:
                used.add(hit)
            else:
                bad.append(f"{rel}:{number}: {kind}: {text}")
    stale = [f"{p}: {t}" for p, t in allowed if (p, t) not in used]
    return bad, stale


def self_test():
    cases = {
        "std::this_thread::sleep_for(100ms);\nEXPECT_EQ(count, 2);": 1,
        "time.sleep(0.3)\nassert not leases": 1,
        "EXPECT_LT(ms_since(start), 2000);": 1,
        "assert elapsed < 1.0": 1,
        "while (!done()) {\n  ::usleep(1000);\n}\nEXPECT_TRUE(done());": 0,
        "deadline = time.monotonic() + 60\nwhile not ready():\n    time.sleep(0.05)\nassert ready()": 0,
        "EXPECT_EQ(count, 2);  // took no sleep": 0,
        "EXPECT_GT(st.elapsed_s, 0.0);": 0,
        "assert time.monotonic() < deadline, 'never started'": 0,
        "std::this_thread::sleep_for(100ms);  // lets the body start\nstop();": 0,
    }
    failed = 0
    for text, want in cases.items():
        got = len(findings(pathlib.Path("x.cpp" if "EXPECT" in text or "::" in text else "x.py"),
                           text.splitlines()))
        if got != want:
            failed += 1
            print(f"check-test-timing self-test: {got} findings, expected {want}, in:\n{text}")
    print("check-test-timing self-test:", "FAILED" if failed else "passed")
    return 1 if failed else 0


def main():
    if sys.argv[1:] == ["--self-test"]:
        return self_test()
    bad, stale = check(tracked_tests())
    for b in bad:
        print(b)
    for s in stale:
        print(f"{ALLOW.relative_to(ROOT)}: stale entry (nothing flagged matches it): {s}")
    if bad or stale:
        print("check-test-timing: a test judges by the clock (above). Wait for a condition with a "
              "deadline that only guards a hang, move a latency target to bench/, or, for a line "
              f"that must stay, add it to {ALLOW.relative_to(ROOT)} with the reason.")
        return 1
    print("check-test-timing: no sleep-then-assert or latency comparison in the tests")
    return 0


if __name__ == "__main__":
    sys.exit(main())
