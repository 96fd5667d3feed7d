"""`ddpjob logs`: the trainer container's log of a DDPJob's Pods, each line prefixed
`[pod]` like `ddpjob run`. Rank 0's Pod by default; `--rank K` is the Pod of node
K // nprocPerNode; `-f` follows (one thread per Pod with `--all`)."""

from __future__ import annotations

import argparse
import sys
import threading
from collections.abc import Iterator
from typing import Any

from ddpjob import metrics_log, sparkline
from ddpjob.api import names, spec
from ddpjob.cli.kubeclient import ClusterError, Connection, lines_of

_print_lock = threading.Lock()
LOSS_TAIL_LINES = 20_000  # describe's loss curve: Pod 0's last lines (ddpjob-train logs every --log-every steps)
BAD_LINES_SHOWN = 5  # of those, the progress lines whose numbers are not numbers, each said in one line


def pick(job: dict[str, Any], pods: list[dict[str, Any]], args: argparse.Namespace) -> list[dict[str, Any]]:
    if args.all:
        return pods
    node = args.node or 0
    if args.rank is not None:
        try:
            nproc = spec.parse_job(job).nproc_per_node
        except spec.InvalidSpec as exc:
            raise ClusterError(f"cannot map --rank to a Pod: the job's spec is invalid: {exc}") from None
        world = nproc * int((job.get("spec") or {}).get("nodes", 1))
        if not 0 <= args.rank < world:
            raise ClusterError(f"--rank: must be in 0..{world - 1} for this job (got {args.rank})")
        node = args.rank // nproc
    chosen = [p for p in pods if ((p["metadata"].get("labels") or {}).get(names.LABEL_NODE_RANK)) == str(node)]
    if not chosen:
        raise ClusterError(
            f"not found: no Pod of node {node} for ddpjob {job['metadata']['name']} "
            f"(phase {(job.get('status') or {}).get('phase') or 'Pending'})"
        )
    return chosen


def _emit(prefix: str, line: str) -> None:
    with _print_lock:
        print(f"[{prefix}] {line}", flush=True)


def pod_lines(conn: Connection, pod: str, follow: bool, tail: int | None) -> Iterator[str]:
    """The trainer container's log lines of one Pod, as they arrive (`ddpjob logs` and the
    Python client's get_job_logs)."""
    response = conn.core.read_namespaced_pod_log(
        pod,
        conn.namespace,
        container=names.TRAINER_CONTAINER,
        follow=follow,
        tail_lines=tail,
        _preload_content=False,
    )
    yield from lines_of(response)


def loss_curve(conn: Connection, pods: list[dict[str, Any]]) -> str | None:
    """`ddpjob describe`'s loss curve: the losses ddpjob-train logged in Pod 0's log (this
    attempt's; the job's metrics.jsonl is on its checkpoint volume, out of the CLI's reach)
    as a sparkline. None when there are none or the log cannot be read."""
    zero = [p for p in pods if (p["metadata"].get("labels") or {}).get(names.LABEL_NODE_RANK) == "0"]
    if not zero:
        return None
    try:
        log = "\n".join(pod_lines(conn, zero[-1]["metadata"]["name"], False, LOSS_TAIL_LINES))
    except Exception:  # noqa: BLE001 - a Pod not started or gone, a kubelet that does not answer: no curve
        return None
    points, bad = metrics_log.read_log(log)
    for said in bad[:BAD_LINES_SHOWN]:  # one line each, never the command's failure
        print(f"ddpjob: {zero[-1]['metadata']['name']}'s log, {said}: left out of the loss curve", file=sys.stderr)
    if len(bad) > BAD_LINES_SHOWN:
        print(f"ddpjob: ... and {len(bad) - BAD_LINES_SHOWN} more such lines", file=sys.stderr)
    return sparkline.line("loss", [v for _, v in points])


def _one(conn: Connection, pod: dict[str, Any], follow: bool, tail: int | None, errors: list[str]) -> None:
    name = pod["metadata"]["name"]
    try:
        for line in pod_lines(conn, name, follow, tail):
            _emit(name, line)
    except Exception as exc:  # one Pod's failure is reported, the others go on
        from ddpjob.cli.kubeclient import explain

        errors.append(f"{name}: {explain(exc, conn, f'pod {name}')}")


def show_logs(conn: Connection, job: dict[str, Any], pods: list[dict[str, Any]], args: argparse.Namespace) -> int:
    chosen = pick(job, pods, args)
    errors: list[str] = []
    threads = [
        threading.Thread(target=_one, args=(conn, p, args.follow, args.tail, errors), daemon=True) for p in chosen
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for error in errors:
        print(f"error: {error}", file=sys.stderr)
    return 1 if errors else 0
