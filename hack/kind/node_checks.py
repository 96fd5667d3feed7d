"""The kind tier's node scenarios judge a job by the trainer's own records on the shared
volume (hack/kind/node_scenarios.sh): its sample log (`ddpjob-train --sample-log`: which
samples went into which step, the group's world size and the time of each step:
ddpjob_devcluster.scenarios.sample_audit), its metrics.jsonl (resume and preempted
records, each stamped with its writer's attempt and term) and its checkpoint files.

    node_checks.py resized DIR --after T --world W       the first group of world size W begun after T
                  [--then W2]                            ... and a group of size W2 after it
                  [--steps N]                            ... that took N steps or more
    node_checks.py resumed DIR --after T --saved S       the first resume after T, at S or later
    node_checks.py newest-checkpoint DIR                 the newest checkpoint's step
    node_checks.py exactly-once DIR --size N --epochs E  every sample once per epoch
    node_checks.py fenced DIR --after T                  nothing older than the newest term since T

Each prints one line of figures, or says why it fails (exit 1); times are seconds since the
epoch, the hosts' and the Pods' clock (kind's nodes share the host's kernel clock).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys

from ddpjob_devcluster.scenarios import sample_audit

# ckpt-e<epoch>-s<step>[-t<term>]-<digest>.pt (ddpjob_trainer/checkpoint.py)
CHECKPOINT = re.compile(r"^ckpt-e(\d+)-s(\d+)(?:-t(\d+))?-[0-9a-f]{16}\.pt$")


def records(directory: str) -> list[dict]:
    path = os.path.join(directory, "metrics.jsonl")
    out = []
    if os.path.exists(path):
        with open(path, encoding="utf-8") as f:
            for line in f:
                try:
                    record = json.loads(line)
                except ValueError:
                    continue  # a line cut by a writer killed mid-write
                if isinstance(record, dict):
                    out.append(record)
    return out


def resized(args: argparse.Namespace) -> str:
    """The first group of world size `world` that began stepping after `after` (each
    re-formed group writes a sample log of its own): the survivors going on, or the job
    grown back."""
    groups = sample_audit.step_times(args.dir)
    for i, (world, times) in enumerate(groups):
        if world == args.world and times[0] > args.after and len(times) >= args.steps:
            said = f"step at world size {world} {times[0] - args.after:.2f} s after"
            if not args.then:
                return said
            later = [t for w, ts in groups[i + 1 :] if w == args.then for t in ts]
            if later:
                grown = later[0] - args.after
                return f"{said}, {len(times)} step(s) at it, then world size {args.then} {grown:.2f} s after"
            raise SystemExit(f"{said}, but no group of world size {args.then} after it: groups {_groups(args.dir)}")
    took = f" and took {args.steps} steps" if args.steps > 1 else ""
    raise SystemExit(
        f"no group of world size {args.world} began after {args.after:.3f}{took}: groups {_groups(args.dir)}"
    )


def resumed(args: argparse.Namespace) -> str:
    """The first resume record after `after`: at the newest checkpoint committed before the
    loss (`saved`, its step: no step before it lost), and when the next step was made."""
    found = [r for r in records(args.dir) if r.get("event") == "resume" and float(r.get("time", 0)) > args.after]
    if not found:
        raise SystemExit(f"no resume record after {args.after:.3f} in {args.dir}/metrics.jsonl")
    resume = found[0]
    if int(resume["step"]) < args.saved:
        raise SystemExit(f"resumed at step {resume['step']}, but a checkpoint at step {args.saved} was committed")
    first = [t for _, times in sample_audit.step_times(args.dir) for t in times if t > float(resume["time"])]
    took = f"; next step {min(first) - args.after:.1f} s after" if first else ""
    return (
        f"resumed at step {resume['step']} (attempt {resume.get('restart')}) "
        f"{float(resume['time']) - args.after:.1f} s after{took}"
    )


def newest_checkpoint(args: argparse.Namespace) -> str:
    """The step of the newest checkpoint in DIR (0: none)."""
    steps = [int(m.group(2)) for m in map(CHECKPOINT.match, os.listdir(args.dir)) if m]
    return str(max(steps, default=0))


def exactly_once(args: argparse.Namespace) -> str:
    lost, repeated = sample_audit.lost_and_repeated(args.dir, args.size, args.epochs)
    if lost or repeated:
        raise SystemExit(f"{lost} sample(s) never trained on and {repeated} extra time(s) in {args.epochs} epoch(s)")
    return f"every one of {args.size} samples once in each of {args.epochs} epochs"


def fenced(args: argparse.Namespace) -> str:
    """Since `after`, no record and no checkpoint of a term older than the newest one written
    before it: what a stale Pod did after the job moved on never reached the job's files."""
    later = [r for r in records(args.dir) if float(r.get("time", 0)) > args.after and "term" in r]
    newest = max((int(r["term"]) for r in later), default=None)
    stale = [r for r in later if newest is not None and int(r["term"]) < newest]
    terms = []
    for name in os.listdir(args.dir):
        m = CHECKPOINT.match(name)
        if m:
            terms.append((int(m.group(3) or 0), int(m.group(2)), name))
    if stale:
        raise SystemExit(f"{len(stale)} record(s) of an older term written after the job moved on: {stale[:3]}")
    if terms and newest is not None and max(terms)[0] < newest:
        raise SystemExit(f"the newest checkpoint {max(terms)[2]} is older than term {newest}")
    return f"newest term {newest}; checkpoints {sorted(n for *_, n in terms)}"


def _groups(directory: str) -> list[tuple[int, float, float]]:
    return [(w, round(a, 2), round(b, 2)) for w, a, b in sample_audit.spans(directory)]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="node_checks.py")
    sub = p.add_subparsers(dest="check", required=True)
    for name in ("resized", "resumed", "exactly-once", "fenced", "newest-checkpoint"):
        s = sub.add_parser(name)
        s.add_argument("dir")
        s.add_argument("--after", type=float, default=0.0)
        s.add_argument("--world", type=int, default=1)
        s.add_argument("--size", type=int, default=0)
        s.add_argument("--epochs", type=int, default=1)
        s.add_argument("--saved", type=int, default=0)
        s.add_argument("--then", type=int, default=0, help="resized: a group of this size must follow")
        s.add_argument("--steps", type=int, default=1, help="resized: the least steps the group took")
    args = p.parse_args(argv)
    check = {
        "resized": resized,
        "resumed": resumed,
        "exactly-once": exactly_once,
        "fenced": fenced,
        "newest-checkpoint": newest_checkpoint,
    }[args.check]
    print(check(args))
    return 0


if __name__ == "__main__":
    sys.exit(main())
