"""The in-place launcher's wait for its own name (in_place_launch.await_own_name): a Pod
created again under the name of one on a lost node starts while DNS still gives its
predecessor's address or none, and the others would judge the newcomer lost."""

from __future__ import annotations

from types import SimpleNamespace

from ddpjob import contract
from ddpjob_trainer.in_place_launch import await_own_name

NAMED = {contract.NODE_ADDRESS: "job-{index}.job.ns.svc:29500"}


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds


def launch(node: int = 1) -> SimpleNamespace:
    return SimpleNamespace(node_rank=node, nnodes=3)


def test_the_workers_start_once_the_name_leads_to_this_nodes_store():
    answers = iter([None, "predecessor", None, "mine"])  # none, the old Pod's store, then ours
    clock, said = Clock(), []
    ok = await_own_name(
        SimpleNamespace(boot="mine"),
        launch(),
        said.append,
        env=NAMED,
        boot_at_name=lambda: next(answers),
        clock=clock,
        sleep=clock.sleep,
    )
    assert ok is True
    assert clock.now == 3.0  # asked four times, one second apart
    assert not [s for s in said if "warning" in s]


def test_a_name_that_never_leads_here_is_a_warning_not_a_failure():
    clock, said = Clock(), []
    ok = await_own_name(
        SimpleNamespace(boot="mine"),
        launch(2),
        said.append,
        env=NAMED,
        timeout=25.0,
        boot_at_name=lambda: "predecessor",
        clock=clock,
        sleep=clock.sleep,
    )
    assert ok is False
    assert clock.now == 25.0
    assert said[-1].startswith("warning: job-2.job.ns.svc did not lead to this node's store within 25s")
    assert [s for s in said if s.startswith("waiting for job-2.job.ns.svc")]  # progress said on the way


def test_one_machine_has_no_name_to_wait_for():
    def never() -> str:
        raise AssertionError("a loopback template was asked by name")

    env = {contract.NODE_ADDRESS: "127.0.0.5:29500"}
    assert await_own_name(SimpleNamespace(boot="mine"), launch(), print, env=env, boot_at_name=never) is True
