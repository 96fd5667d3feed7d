"""Two 4-node jobs on six 1-GPU nodes of the development cluster, with `gang: none` and
with `gang: kubernetes` (the native PodGroup): GPU-seconds held idle, and whether both
jobs finish (the scenario: ddpjob_devcluster/gang_scenario.py).

Idle GPU-seconds: for each bound Pod, the time from its binding to its gang being
complete (all 4 bound), or to the end of the observation when the gang never is. Without
gang scheduling the observation ends after a bounded wait (DEADLOCK_WAIT seconds after
both jobs report `Scheduled 3/4`): in a real cluster the deadlock, and the idle GPUs,
last until someone deletes a job, so that number grows with the wait.
"""

from __future__ import annotations

import tempfile

from ddpjob_devcluster import gang_scenario

DEADLOCK_WAIT = 30.0


def main() -> None:
    rows = []
    for gang in ("none", "kubernetes"):
        with tempfile.TemporaryDirectory(prefix=f"ddpjob-gang-{gang}-") as tmp:
            r = gang_scenario.run(tmp, gang, deadlock_wait=DEADLOCK_WAIT)
        rows.append(r)
        print(f"gang={gang:<10} deadlocked={r.deadlocked!s:<5} phases={r.finished} scheduled={r.scheduled} "
              f"completion order={r.order} idle GPU-seconds={r.idle_gpu_seconds:.1f} "
              f"wall={r.wall_seconds:.1f} s")
        for job, message in r.messages.items():
            print(f"    {job}: {message}")
    none, gang = rows
    idle_rate = none.idle_gpu_seconds / max(none.wall_seconds, 1e-9)
    print(f"without gang scheduling 6 GPUs wait on missing peers: {none.idle_gpu_seconds:.1f} GPU-s idle "
          f"in {none.wall_seconds:.1f} s (about {idle_rate:.1f} GPU-s per second, for as long as nobody steps in)")
    print(f"with gang scheduling: {gang.idle_gpu_seconds:.3f} GPU-s idle; both jobs finished in "
          f"{gang.wall_seconds:.1f} s, {' then '.join(gang.order)}")


if __name__ == "__main__":
    main()
