"""A lost or added node on the real control plane (upstream kube-apiserver, scheduler,
etcd; process kubelets; the chart-installed operator), three ways in one run: a rigid
job's gang restart, torchrun's elastic agent (`ddpjob-launch --resize restart`: every
worker restarted at each change) and the resize in place (the default for `ddpjob-train`
on gloo: the survivors keep their processes). `ddpjob_devcluster.scenarios.heal` drives
one job per way through, in turn:

- join: `spec.nodes` raised from 3 to 4 (elastic only; a rigid job has no join);
- delete: Pod 2 deleted through the API (graceful: SIGTERM, the operator's notice);
- SIGKILL: every process of Pod 1 killed, without warning;
- Pod 0 lost: every process of Pod 0 killed (it held torchrun's rendezvous store, and
  the in-place group's first round).

Each job: 4 nodes x 1 process, CPU and gloo, `ddpjob-train` on synthetic samples (global
batch 128, a checkpoint every 10 steps, at least 0.2 s a step, `--sample-log`),
`restartBackoffSeconds: 5` (when a lost index is created again, and when a rigid gang
restarts). After each disruption the job is whole again (a group of 4 stepped) and trains
a few steps before the next. Once done, the job is deleted and its finished epochs audited.
What is measured is described in heal.py: healed (to the end of the first step of the
next group), the join pause, the in-place split, and whether the survivors kept their
workers.

    .venv/bin/python benchmarks/elastic_resize.py [--json OUT]
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import pathlib
import sys
import tempfile
import time

from ddpjob_devcluster.clusters.real import RealCluster
from ddpjob_devcluster.scenarios import heal, sample_audit

SIZE, EPOCHS = 128 * 100, 30  # far more than the disruptions take: the job is stopped after them
WAYS = (  # (label, job name, elastic, ddpjob-launch's flags)
    ("rigid gang restart", "rigid", False, ()),
    ("torchrun elastic (--resize restart)", "restart", True, ("--resize", "restart")),
    ("in place", "in-place", True, ()),
)
LOSSES = ((heal.DELETE, 2), (heal.SIGKILL, 1), (heal.SIGKILL, 0))
EVENT_TIMEOUT = 400.0


def one_way(cluster: RealCluster, work: pathlib.Path, name: str, elastic: bool, launch: tuple[str, ...]) -> dict:
    samples = work / f"{name}-samples"
    body = heal.job(name, samples, elastic=elastic, step_seconds=0.2, size=SIZE, epochs=EPOCHS, launch=launch)
    body["spec"]["maxRestarts"] = 10  # the rigid job's SIGKILLs are counted failures
    run = heal.Run(cluster, body, samples)
    started = time.monotonic()
    run.start(10, 300)
    plan = ([(heal.RAISE, 4)] if elastic else []) + list(LOSSES)
    error = None
    try:
        for what, target in plan:
            print("  " + heal.describe(run.disrupt(what, target, EVENT_TIMEOUT)), flush=True)
            run.wait_steps(10, EVENT_TIMEOUT)
    except AssertionError as e:  # a disruption that never healed: said, and the next way runs
        error = str(e)[:2000]
        print(f"  failed: {error}", flush=True)
    status = cluster.status(name)
    run.stop(120)
    audited = sample_audit.last_epoch(str(samples)) - 1  # the epochs finished before the stop
    lost, repeated = run.audit(SIZE, audited)
    return {
        "error": error,
        "heals": [dataclasses.asdict(h) for h in run.heals],
        "restarts": status.get("restarts"),
        "resizes": status.get("resizes", 0),
        "samples_lost": lost,
        "samples_repeated": repeated,
        "epochs_audited": audited,
        "wall_s": round(time.monotonic() - started, 1),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", help="also write the results here")
    parser.add_argument("--only", choices=[name for _, name, _, _ in WAYS], action="append", help="run only these")
    args = parser.parse_args()
    results = {}
    with tempfile.TemporaryDirectory(prefix="elastic-bench-") as tmp:
        work = pathlib.Path(tmp)
        with RealCluster(work / "cluster") as cluster:
            for label, name, elastic, launch in WAYS:
                if args.only and name not in args.only:
                    continue
                print(f"{label}:", flush=True)
                results[label] = one_way(cluster, work, name, elastic, launch)
                if args.json:  # after each way: what was measured survives a later failure
                    pathlib.Path(args.json).write_text(json.dumps(results, indent=2, default=str))
                r = results[label]
                print(
                    f"  restarts {r['restarts']}, resizes {r['resizes']}, samples lost {r['samples_lost']}, "
                    f"repeated {r['samples_repeated']} (over {r['epochs_audited']} epochs), {r['wall_s']} s",
                    flush=True,
                )
    return 1 if any(r["error"] for r in results.values()) else 0


if __name__ == "__main__":
    sys.exit(main())
