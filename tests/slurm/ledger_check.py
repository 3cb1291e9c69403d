"""Checks a ledger of leased jobs: on no device, at no moment, do the shares of the jobs running
there add up to more than the device (the rule the Snakemake executor's test applies to whole
devices, here with fractions), and the ledger shows sharing actually happened.

    ledger_check.py LEDGER [--devices N] [--packed SHARE]

Each line of LEDGER is one job, as record_job.sh writes it: NAME SHARE DEVICES START END (DEVICES:
GPUFLOW_DEVICES, ordinals separated by commas; START and END: seconds, one clock). Checks that every
one of N devices was used, that some two jobs ran at the same time (else the ledger shows nothing),
and with --packed that two jobs of that share ran on one device at once. Exits 1 naming the jobs
at fault."""
import argparse
import itertools
import sys

EPSILON = 1e-9


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("ledger")
    parser.add_argument("--devices", type=int, default=2)
    parser.add_argument("--packed", type=float)
    args = parser.parse_args()
    jobs = []
    with open(args.ledger, encoding="utf-8") as ledger:
        for line in ledger:
            name, share, devices, start, end = line.split()
            jobs.append((name, float(share), {int(d) for d in devices.split(",")},
                         float(start), float(end)))
    if not jobs:
        sys.exit("FAIL: the ledger is empty")
    faults = []
    for name, _, devices, start, _ in jobs:
        # Every job starting is a moment at which the load can be highest.
        for device in devices:
            running = [(n, s) for n, s, d, b, e in jobs if device in d and b <= start < e]
            if sum(s for _, s in running) > 1 + EPSILON:
                faults.append(f"gpu:{device} when {name} started: {running}")
    if faults:
        sys.exit("FAIL: more than a device's worth at once:\n  " + "\n  ".join(faults))
    concurrent = [(a, b) for a, b in itertools.combinations(jobs, 2) if a[3] < b[4] and b[3] < a[4]]
    if not concurrent:
        sys.exit("FAIL: no two jobs ran at the same time: the ledger shows nothing")
    used = set().union(*(d for _, _, d, _, _ in jobs))
    if used != set(range(args.devices)):
        sys.exit(f"FAIL: devices used {sorted(used)}, not all {args.devices}")
    if args.packed is not None:
        packed = [(a[0], b[0]) for a, b in concurrent
                  if a[1] == b[1] == args.packed and a[2] & b[2]]
        if not packed:
            sys.exit(f"FAIL: no two {args.packed} shares ran on one device at once")
    print(f"ledger: {len(jobs)} jobs, {len(concurrent)} pairs ran at once, no device over 1")


if __name__ == "__main__":
    main()
