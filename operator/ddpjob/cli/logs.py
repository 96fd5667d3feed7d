"""`ddpjob logs`: the trainer container's log of a DDPJob's Pods, each line prefixed
`[pod]` like `ddpjob run`. Rank 0's Pod by default; `--rank K` is the Pod of node
K // nprocPerNode; `-f` follows (every Pod's lines as they come with `--all`). The Pods
are picked and their logs merged in the cluster layer (cluster/pods.py, cluster/logs.py)."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from ddpjob.api import names
from ddpjob.cluster import pods as cluster_pods
from ddpjob.cluster.connection import ClusterError, Connection
from ddpjob.cluster.logs import PodLogsFailed, merged, pod_lines
from ddpjob.curves import reader, sparkline

LOSS_TAIL_LINES = 20_000  # describe's loss curve: Pod 0's last lines (ddpjob-train logs every --log-every steps)
BAD_LINES_SHOWN = 5  # of those, the progress lines whose numbers are not numbers, each said in one line


def loss_curve(conn: Connection, pods: list[dict[str, Any]]) -> str | None:
    """`ddpjob describe`'s loss curve: the losses ddpjob-train logged in Pod 0's log (this
    attempt's; the job's metrics.jsonl is on its checkpoint volume, out of the CLI's reach)
    as a sparkline. None when there are none or the log cannot be read."""
    zero = [p for p in pods if (p["metadata"].get("labels") or {}).get(names.LABEL_NODE_RANK) == "0"]
    if not zero:
        return None
    try:
        log = "\n".join(pod_lines(conn, zero[-1]["metadata"]["name"], False, LOSS_TAIL_LINES))
    except ClusterError:  # a Pod not started or gone, a kubelet that does not answer: no curve
        return None
    points, bad = reader.read_log(log)
    for said in bad[:BAD_LINES_SHOWN]:  # one line each, never the command's failure
        print(f"ddpjob: {zero[-1]['metadata']['name']}'s log, {said}: left out of the loss curve", file=sys.stderr)
    if len(bad) > BAD_LINES_SHOWN:
        print(f"ddpjob: ... and {len(bad) - BAD_LINES_SHOWN} more such lines", file=sys.stderr)
    return sparkline.line("loss", [v for _, v in points])


def show_logs(conn: Connection, job: dict[str, Any], pods: list[dict[str, Any]], args: argparse.Namespace) -> int:
    """Print the chosen Pods' lines as they arrive; a Pod whose log cannot be read is one
    line on stderr once the others ended (exit 1)."""
    chosen = cluster_pods.select(job, pods, node=args.node, rank=args.rank, every=args.all)
    try:
        for pod, line in merged(conn, [p["metadata"]["name"] for p in chosen], args.follow, args.tail):
            print(f"[{pod}] {line}", flush=True)
    except PodLogsFailed as failed:
        for pod, error in failed.failures:
            print(f"error: {pod}: {error}", file=sys.stderr)
        return 1
    return 0
