"""The outer bounds of the tests' waits.

Every wait in the suite ends when what it waits for happens: it polls for an event, a
record or a condition (`wait_for`, `wait_until`, `wait_phase`), and a passing test never
waits one of these bounds out. They only end a wait that would otherwise hang, so they are
set for a busy 2-core machine (a CI runner, or the suite beside other work, where a step
that takes a second alone takes ten), not for a quiet one. A bound shorter than these is
a wall-clock claim about the machine, which a test must not make; speed goals belong in
benchmarks/.

Users: tests/system, tests/operator (through its conftest's helpers), tests/cli, tests/devcluster,
tests/gangs, tests/local, tests/trainer.
"""

from __future__ import annotations

# The operator, a kubelet or an API server reacting to one change (a status write, an
# Event, a Pod created or deleted): milliseconds on a quiet machine.
REACTION = 60.0
# A job on the real control plane reaching a phase: Pods scheduled, processes started
# (python and torch imported), a rendezvous made; seconds on a quiet machine.
PHASE = 180.0
# A tiny training run, or a gang restart and its resume, to the job's end; tens of
# seconds on a quiet machine.
RUN = 600.0

# pytest-timeout's bounds for one whole test (pytest.mark.timeout): the backstop for a
# wait that has no bound of its own, covering a test's waits one after the other. TEST
# for a test of reactions (an API server, the operator in a thread); CLUSTER_TEST for one
# that runs jobs on a cluster, trains, or starts the demo.
TEST = 300
CLUSTER_TEST = 900
