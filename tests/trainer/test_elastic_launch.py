"""ddpjob-launch for an elastic job: NNODES=MIN:MAX runs torchrun's c10d rendezvous with the
contract's PET_RDZV_* values, and a survivor rejoins a lost rendezvous (Pod 0 gone) with
backoff, for a bounded time, instead of failing its Pod."""

import pytest

from ddpjob_trainer import EXIT_RENDEZVOUS_TIMEOUT, RendezvousTimeout, UsageError
from ddpjob_trainer.elastic_launch import run_rejoining
from ddpjob_trainer.env import read_launch_env
from ddpjob_trainer.launch import build_command

CONTRACT = {
    "MASTER_ADDR": "j-0.j.ns.svc",
    "MASTER_PORT": "29500",
    "NNODES": "2:4",
    "NODE_RANK": "1",
    "NPROC_PER_NODE": "1",
    "PET_RDZV_ENDPOINT": "j-0.j.ns.svc:29500",
    "PET_RDZV_ID": "j",
    "PET_RDZV_CONF": "is_host=0",
    "PET_MAX_RESTARTS": "16",
}


def flags(argv):
    return {argv[i]: argv[i + 1] for i in range(len(argv) - 1) if argv[i].startswith("--")}


def test_min_max_nnodes_runs_torchrun_elastic(monkeypatch):
    for k, v in CONTRACT.items():
        monkeypatch.setenv(k, v)
    launch = read_launch_env(CONTRACT)
    assert launch.elastic and (launch.min_nodes, launch.nnodes) == (2, 4)
    argv, torchrun = build_command(launch, ["true"])  # one process, any program: still torchrun
    assert torchrun and argv[-2:] == ["--no-python", "true"]
    got = flags(argv)
    assert got["--nnodes"] == "2:4" and got["--rdzv-backend"] == "c10d"
    assert got["--rdzv-endpoint"] == "j-0.j.ns.svc:29500" and got["--rdzv-id"] == "j"
    assert got["--rdzv-conf"] == "is_host=0" and got["--max-restarts"] == "16"
    assert "--node-rank" not in got  # the rendezvous assigns node ranks


def test_by_hand_node_zero_hosts_the_store():
    env = {"MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "1234", "NNODES": "1:3", "NODE_RANK": "0", "NPROC_PER_NODE": "2"}
    launch = read_launch_env(env)
    from ddpjob_trainer import elastic_launch

    got = flags(elastic_launch.torchrun_args(launch, env))
    assert got["--rdzv-conf"].startswith("is_host=1,") and got["--rdzv-endpoint"] == "127.0.0.1:1234"


@pytest.mark.parametrize("value", ["3:2", "0:2", "a:b", "2:", ":"])
def test_a_bad_range_names_the_variable(value):
    with pytest.raises(UsageError, match="NNODES"):
        read_launch_env({**CONTRACT, "NNODES": value})


class Clock:
    def __init__(self):
        self.now = 0.0

    def sleep(self, s):
        self.now += s


def test_a_lost_rendezvous_is_rejoined_with_backoff():
    codes, clock, waits, logs = [EXIT_RENDEZVOUS_TIMEOUT, EXIT_RENDEZVOUS_TIMEOUT, 0], Clock(), [], []
    code = run_rejoining(
        lambda: codes.pop(0), waits.append, lambda: False, logs.append, sleep=clock.sleep, clock=lambda: clock.now
    )
    assert code == 0 and codes == [] and len(waits) == 2
    assert clock.now == 3.0  # 1 s, then 2 s
    assert all("rejoining" in line for line in logs)


def test_rejoining_gives_up_after_its_budget():
    clock = Clock()
    runs = []
    code = run_rejoining(
        lambda: runs.append(1) or EXIT_RENDEZVOUS_TIMEOUT,
        lambda left: None,
        lambda: False,
        lambda line: None,
        budget=60,
        sleep=clock.sleep,
        clock=lambda: clock.now,
    )
    assert code == EXIT_RENDEZVOUS_TIMEOUT and 3 <= len(runs) <= 8 and clock.now <= 60


def test_other_ends_and_a_stop_are_not_retried():
    assert run_rejoining(lambda: 1, lambda left: None, lambda: False, lambda line: None) == 1
    assert (
        run_rejoining(lambda: EXIT_RENDEZVOUS_TIMEOUT, lambda left: None, lambda: True, lambda line: None)
        == EXIT_RENDEZVOUS_TIMEOUT
    )


def test_a_master_that_never_resolves_ends_the_rejoining():
    clock = Clock()

    def unresolved(left):
        raise RendezvousTimeout("MASTER_ADDR did not resolve")

    code = run_rejoining(
        lambda: EXIT_RENDEZVOUS_TIMEOUT,
        unresolved,
        lambda: False,
        lambda line: None,
        sleep=clock.sleep,
        clock=lambda: clock.now,
    )
    assert code == EXIT_RENDEZVOUS_TIMEOUT and clock.now == 1.0
