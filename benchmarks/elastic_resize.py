"""An elastic job against a rigid one when a Pod is deleted mid-run, on the real control
plane (upstream kube-apiserver, scheduler, etcd; process kubelets; the chart-installed
operator): `ddpjob_devcluster.scenarios.elastic` for each case, one after the other.

4 nodes x 1 process, CPU/gloo, the built-in trainer on 8,000 synthetic samples x 3 epochs
(global batch 128), a checkpoint every 10 steps; Pod 2 deleted after about 60 steps.

- elastic (minNodes 2), restartBackoffSeconds 10 and 30: the lost index comes back after
  the backoff, so the second shows the job training at 3 nodes first;
- rigid: the gang restart (restartBackoffSeconds 10), the reference.

    .venv/bin/python benchmarks/elastic_resize.py [--json OUT]
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import pathlib
import sys
import tempfile

from ddpjob_devcluster.scenarios import elastic as elastic_scenario
from ddpjob_devcluster.clusters.real import RealCluster

CASES = (("elastic, backoff 10 s", "elastic-a", True, 10), ("elastic, backoff 30 s", "elastic-b", True, 30),
         ("rigid gang restart, backoff 10 s", "rigid", False, 10))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", help="also write the results here")
    args = parser.parse_args()
    results = {}
    with tempfile.TemporaryDirectory(prefix="elastic-bench-") as tmp:
        work = pathlib.Path(tmp)
        with RealCluster(work / "cluster") as cluster:
            for label, name, elastic, backoff in CASES:
                out = elastic_scenario.run(cluster, name, work, elastic=elastic, backoff=backoff)
                print(elastic_scenario.report(label, out), flush=True)
                results[label] = {k: v for k, v in dataclasses.asdict(out).items() if k != "events"}
    if args.json:
        pathlib.Path(args.json).write_text(json.dumps(results, indent=2, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
