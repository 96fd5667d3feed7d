"""The demo cluster's command line (`python -m ddpjob_devcluster.demo --help`), each
number checked with a message naming its flag."""

from __future__ import annotations

import argparse
import os
import tempfile

from ddpjob_devcluster.clusters.client import EXAMPLE

ONCE_ENV = "DDPJOB_DEMO_ONCE"
DESCRIPTION = '`make demo-cluster`: a whole ddpjob "cluster" on this machine, no docker, no kind.'


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m ddpjob_devcluster.demo", description=DESCRIPTION)
    p.add_argument(
        "--workdir",
        default=os.path.join(tempfile.gettempdir(), "ddpjob-demo-cluster"),
        help="kubeconfig, operator log, Pod output and volumes (default: %(default)s)",
    )
    p.add_argument("--keep-workdir", action="store_true", help="keep the work directory at the end (else removed)")
    p.add_argument(
        "--host-network",
        action="store_true",
        help="run on the host's network (Pods get loopback addresses, which "
        "EndpointSlices refuse) instead of a network namespace of the cluster's own",
    )
    p.add_argument(
        "--once",
        "--smoke",
        action="store_true",
        default=os.environ.get(ONCE_ENV) == "1",
        help=f"apply --example with kubectl, wait for Succeeded, exit (or set {ONCE_ENV}=1)",
    )
    p.add_argument("--example", default=str(EXAMPLE), help="the DDPJob --once applies (default: %(default)s)")
    p.add_argument("--timeout", type=float, default=600, help="--once: seconds to wait for the job")
    p.add_argument("--nodes", type=int, default=1, help="CPU nodes (default: %(default)s)")
    p.add_argument(
        "--gpu-nodes",
        type=int,
        default=0,
        help="nodes that advertise nvidia.com/gpu (their Pods still run on this CPU)",
    )
    p.add_argument("--gpus-per-node", type=int, default=8, help="nvidia.com/gpu of each --gpu-nodes node")
    args = p.parse_args(argv)
    for flag in ("nodes", "gpu_nodes", "gpus_per_node"):
        if not 0 <= getattr(args, flag) <= 64:
            p.error(f"--{flag.replace('_', '-')} must be from 0 to 64 (got {getattr(args, flag)})")
    if args.nodes + args.gpu_nodes == 0:
        p.error("--nodes and --gpu-nodes are both 0: the cluster would have no node to run a Pod")
    return args
