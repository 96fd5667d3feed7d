#!/usr/bin/env python3
"""A node lost under a training job: seconds from the loss to the next training step, per
case (a node killed, paused, cut off, drained; rigid and elastic jobs), with ddpjob and
for a plain Pod gang under Kubernetes' defaults (what a user gets without ddpjob), in one
run of the kind tier:

    E2E_FIGURES=figures.txt E2E_SCENARIOS="node_elastic node_rigid partition node_drain node_baseline" \\
        make e2e-kind
    python benchmarks/node_failures.py figures.txt

The figures are the node scenarios' own (hack/kind/node_scenarios.sh, bench_scenarios.sh:
`figure: ...` lines, each measured from the trainer's records on the shared volume and the
API server's view, with one clock). This script only gathers them into the table of
docs/benchmarks.md ("Node failures"). Without a figures file (as `make bench` runs it) it
says how to make one: the kind tier needs a container engine and about 20 minutes.
"""

from __future__ import annotations

import argparse
import pathlib
import re
import sys

# (case, the figure's words): a number of seconds as `s`, or a wait that saw no step as `none`.
SECONDS = r"(?P<s>[\d.]+) s"
ROWS = (
    ("elastic, node killed: next step at the smaller size", r"^elastic kill: next step at the smaller size " + SECONDS),
    (
        "elastic, node killed: `kubectl get ddpj` says 1/2, NodeLost",
        r"^elastic kill: kubectl get ddpj says .* " + SECONDS,
    ),
    (
        "elastic, node frozen a few seconds: next step at the smaller size",
        r"^elastic freeze: next step at the smaller size " + SECONDS,
    ),
    (
        "elastic, node frozen a few seconds: its own trainer back in the group",
        r"^elastic freeze: back at world size 2 " + SECONDS,
    ),
    (
        "elastic, node paused: next step at the smaller size",
        r"^elastic pause: next step at the smaller size " + SECONDS,
    ),
    (
        "elastic, node paused: `kubectl get ddpj` says 1/2, NodeLost",
        r"^elastic pause: kubectl get ddpj says .* " + SECONDS,
    ),
    (
        "elastic, drain: next step at the smaller size",
        r"^elastic drain, from the drain's start: step at world size 1 " + SECONDS,
    ),
    ("rigid, node killed: next step, resumed from the checkpoint", r"^rigid kill: .*next step " + SECONDS),
    ("rigid, partition: next step, resumed from the checkpoint", r"^rigid partition: .*next step " + SECONDS),
    ("rigid, drain: next step, resumed from the step it saved", r"^rigid drain: .*next step " + SECONDS),
    (
        "plain rigid gang, Kubernetes' defaults, node killed: next step",
        r"^plain rigid gang.*: (next step " + SECONDS + r"|no step within (?P<none>\d+) s)",
    ),
    (
        "plain elastic gang (torchrun's c10d), node killed: next step",
        r"^plain elastic gang.*: (next step " + SECONDS + r"|no step within (?P<none>\d+) s)",
    ),
)


def table(lines: list[str]) -> str:
    out = ["| case | seconds after the loss |", "|---|---|"]
    for case, pattern in ROWS:
        found = next((m for m in (re.search(pattern, line) for line in lines) if m), None)
        if found is None:
            value = "not measured"
        elif found.group("s") is not None:
            value = found.group("s")
        else:
            value = f"no step within {found.group('none')} s"
        out.append(f"| {case} | {value} |")
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("figures", nargs="?", help="the E2E_FIGURES file of a kind tier run")
    args = p.parse_args(argv)
    if not args.figures:
        print("node failures: not measured here (needs the kind tier: see this script's docstring)")
        return 0
    lines = [line.strip() for line in pathlib.Path(args.figures).read_text().splitlines() if line.strip()]
    print(table(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
