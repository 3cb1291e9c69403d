#!/usr/bin/env python3
"""What scripts/test.sh ran, step by step: tests run, passed, skipped (each skip with its reason)
and failed, the time each step took, and the slowest tests.

  test-report.py add DIR STEP SECONDS OUTCOME [--junit FILE]... [--cargo LOG] [--reason TEXT]
      records one step (OUTCOME: passed, failed or skipped) in DIR/steps.jsonl; JUnit files
      (ctest --output-junit, pytest --junitxml) and cargo's output give its tests one by one.
  test-report.py print DIR [--strict FILE]
      prints the table; with --strict, a skip matching no pattern of FILE (one regular
      expression per line, searched in "TEST: REASON": what cannot run on this machine kind)
      fails the run.
"""
import argparse
import json
import pathlib
import re
import sys
import xml.etree.ElementTree as ElementTree


def skip_reason(output, message):
    """The reason a skipped test gave: GoogleTest's line after 'Skipped', a script's last words."""
    lines = [line.strip() for line in (output or "").splitlines()]
    for i, line in enumerate(lines):
        if line.endswith("Skipped") and i + 1 < len(lines) and lines[i + 1]:
            return lines[i + 1]
    for line in lines:
        if re.match(r"(?i)^(skip|skipped|skipping)\b", line):
            return line
    said = [line for line in lines if line and not line.startswith("[")]
    if said:
        return said[-1]
    return message or "(no reason given)"


def tests_from_junit(path):
    tests = []
    root = ElementTree.parse(path).getroot()
    for case in root.iter("testcase"):
        name = case.get("name", "?")
        if case.get("classname") and case.get("classname") not in name:
            name = f"{case.get('classname')}::{name}"
        output = "".join((case.findtext(tag) or "") for tag in ("system-out", "system-err"))
        skipped = case.find("skipped")
        if case.find("failure") is not None or case.find("error") is not None or \
                case.get("status") == "fail":
            outcome, reason = "failed", ""
        elif skipped is not None or case.get("status") in ("notrun", "disabled"):
            message = skipped.get("message", "") if skipped is not None else ""
            # pytest puts the reason in the message ("file:line: reason"); ctest in the output.
            generic = message in ("", "Skipped") or message.startswith("SKIP_")
            reason = skip_reason(output, message) if generic else message
            outcome = "skipped"
        else:
            outcome, reason = "passed", ""
        tests.append({"name": name, "outcome": outcome, "reason": reason,
                      "seconds": float(case.get("time") or 0)})
    return tests


def tests_from_cargo(path):
    """cargo test's own summary lines: 'test result: ok. 12 passed; 0 failed; 1 ignored; ...'."""
    tests = []
    text = pathlib.Path(path).read_text(errors="replace")
    for m in re.finditer(r"^test (\S+) \.\.\. (ok|FAILED|ignored)(?:, (.*))?$", text, re.M):
        outcome = {"ok": "passed", "FAILED": "failed", "ignored": "skipped"}[m.group(2)]
        tests.append({"name": m.group(1), "outcome": outcome,
                      "reason": m.group(3) or ("#[ignore]" if outcome == "skipped" else ""),
                      "seconds": 0.0})
    return tests


def add(args):
    tests = []
    for junit in args.junit:
        if pathlib.Path(junit).exists():
            tests += tests_from_junit(junit)
    if args.cargo and pathlib.Path(args.cargo).exists():
        tests += tests_from_cargo(args.cargo)
    step = {"step": args.step, "seconds": args.seconds, "outcome": args.outcome,
            "reason": args.reason or "", "tests": tests}
    directory = pathlib.Path(args.dir)
    directory.mkdir(parents=True, exist_ok=True)
    with open(directory / "steps.jsonl", "a") as out:
        out.write(json.dumps(step) + "\n")


def report(args):
    path = pathlib.Path(args.dir) / "steps.jsonl"
    steps = [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []
    expected = []
    if args.strict:
        expected = [re.compile(line) for line in pathlib.Path(args.strict).read_text().splitlines()
                    if line.strip() and not line.startswith("#")]
    rows, skips, all_tests = [], [], []
    for s in steps:
        tests = s["tests"] or [{"name": s["step"], "outcome": s["outcome"], "reason": s["reason"],
                                "seconds": s["seconds"]}]
        count = {k: sum(t["outcome"] == k for t in tests) for k in ("passed", "skipped", "failed")}
        rows.append((s["step"], s["outcome"], len(tests), count, s["seconds"]))
        skips += [(s["step"], t) for t in tests if t["outcome"] == "skipped"]
        all_tests += [(s["step"], t) for t in s["tests"]]
    width = max([len(r[0]) for r in rows] + [4])
    print("\n=== test.sh: what ran ===")
    print(f"{'step':<{width}}  {'outcome':<7}  {'run':>5}  {'passed':>6}  {'skipped':>7}  "
          f"{'failed':>6}  {'time':>8}")
    for name, outcome, run, count, seconds in rows:
        print(f"{name:<{width}}  {outcome:<7}  {run:>5}  {count['passed']:>6}  "
              f"{count['skipped']:>7}  {count['failed']:>6}  {seconds / 60:>6.1f} m")
    total = sum(r[4] for r in rows)
    print(f"{'total':<{width}}  {'':<7}  {sum(r[2] for r in rows):>5}  "
          f"{sum(r[3]['passed'] for r in rows):>6}  {sum(r[3]['skipped'] for r in rows):>7}  "
          f"{sum(r[3]['failed'] for r in rows):>6}  {total / 60:>6.1f} m")
    unexplained = []
    if skips:
        print("\nskipped, and why:")
        for step, t in skips:
            known = not args.strict or any(e.search(f"{t['name']}: {t['reason']}")
                                           for e in expected)
            mark = "" if known else "  <- cannot skip on this machine kind"
            if not known:
                unexplained.append((step, t))
            print(f"  {step}: {t['name']}: {t['reason']}{mark}")
    slowest = sorted((st for st in all_tests if st[1]["seconds"] > 0),
                     key=lambda st: -st[1]["seconds"])[:10]
    if slowest:
        print("\nslowest tests:")
        for step, t in slowest:
            print(f"  {t['seconds']:7.1f} s  {step}: {t['name']}")
    if unexplained:
        print(f"\ntest-report: {len(unexplained)} skip(s) that this machine kind must run "
              f"(reasons allowed to skip: {args.strict})")
        return 1
    return 0


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    a = sub.add_parser("add")
    a.add_argument("dir")
    a.add_argument("step")
    a.add_argument("seconds", type=float)
    a.add_argument("outcome", choices=["passed", "failed", "skipped"])
    a.add_argument("--junit", action="append", default=[])
    a.add_argument("--cargo")
    a.add_argument("--reason")
    p = sub.add_parser("print")
    p.add_argument("dir")
    p.add_argument("--strict")
    args = parser.parse_args()
    if args.command == "add":
        add(args)
        return 0
    return report(args)


if __name__ == "__main__":
    sys.exit(main())
