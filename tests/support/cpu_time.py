"""Where the suite's CPU goes: `pytest --cpu-top N` lists the N tests that cost the most
CPU seconds, with the suite's total, after the run (`make test` asks for it).

On two cores the suite is bound by CPU, not by waiting, so wall-clock durations (what
`--durations` lists) say little about what to make cheaper: a test that sleeps looks as slow
as one that trains. A test's CPU is its worker process's own (user and system) plus that of
every child process reaped while it ran (torchrun and its workers, the process kubelets and
the operator of a per-test cluster); a long-lived process (the worker's shared control
plane) is reaped only at the session's end and counted in no test, and a child a test left
to be reaped later (Python's subprocess reaps them when it next starts one) is counted in
the test that reaped it. Fixtures shared by many tests are counted in the first that starts
them and the one whose teardown ends them, which may be a test of another module that ran
next in the same worker: each line says how much of its figure was its setup and teardown
(`fixtures`), so such a share is told from the test's own. The list points where to look;
it is not an exact bill.

Under pytest-xdist each worker measures its own tests and sends the figure with the test's
teardown report (`user_properties`), so the controller's summary holds every test."""

from __future__ import annotations

import resource
from collections.abc import Generator
from dataclasses import dataclass, field
from typing import Any

import pytest

PROPERTY = "cpu_seconds"


def cpu_seconds() -> float:
    """User and system seconds of this process and of its reaped children, so far."""
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


@dataclass
class Tally:
    """The CPU seconds of each finished test, by node id, and the part of them its setup
    and teardown took."""

    seconds: dict[str, float] = field(default_factory=dict)
    fixtures: dict[str, float] = field(default_factory=dict)

    def add(self, nodeid: str, spent: float, fixtures: float = 0.0) -> None:
        self.seconds[nodeid] = self.seconds.get(nodeid, 0.0) + spent
        self.fixtures[nodeid] = self.fixtures.get(nodeid, 0.0) + fixtures

    def lines(self, top: int) -> list[str]:
        total = sum(self.seconds.values())
        ranked = sorted(self.seconds.items(), key=lambda item: item[1], reverse=True)[:top]
        out = [f"{len(self.seconds)} tests, {total:.0f} CPU seconds; the {len(ranked)} that cost the most:"]
        for nodeid, spent in ranked:
            share = 100 * spent / total if total else 0.0
            fixtures = self.fixtures.get(nodeid, 0.0)
            out.append(f"{spent:8.1f} s {share:5.1f}%  fixtures {fixtures:6.1f} s  {nodeid}")
        return out


class CpuTime:
    """Measures in every process that runs tests; tallies and reports where reports arrive
    (the only process without xdist, the controller with it)."""

    def __init__(self, top: int) -> None:
        self.top, self.tally = top, Tally()
        self.started = self.phase_started = self.in_call = 0.0

    def pytest_runtest_logstart(self) -> None:
        # One test at a time runs in a process.
        self.started = self.phase_started = cpu_seconds()
        self.in_call = 0.0

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_makereport(self, call: pytest.CallInfo[None]) -> Generator[None, Any, None]:
        outcome = yield
        now = cpu_seconds()
        if call.when == "call":
            self.in_call = now - self.phase_started
        self.phase_started = now
        if call.when == "teardown":
            spent = now - self.started
            outcome.get_result().user_properties.append((PROPERTY, (spent, spent - self.in_call)))

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        figure = dict(report.user_properties).get(PROPERTY) if report.when == "teardown" else None
        if isinstance(figure, list | tuple) and len(figure) == 2:  # xdist sends a tuple as a list
            spent, fixtures = figure
            if isinstance(spent, int | float) and isinstance(fixtures, int | float):
                self.tally.add(report.nodeid, float(spent), float(fixtures))

    def pytest_terminal_summary(self, terminalreporter: pytest.TerminalReporter) -> None:
        if self.tally.seconds:
            terminalreporter.section("CPU per test")
            for line in self.tally.lines(self.top):
                terminalreporter.write_line(line)


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--cpu-top",
        type=int,
        default=0,
        metavar="N",
        help="after the run, list the N tests that cost the most CPU (their process and reaped children)",
    )


def pytest_configure(config: pytest.Config) -> None:
    top = config.getoption("--cpu-top")
    if top > 0:
        config.pluginmanager.register(CpuTime(top), "ddpjob-cpu-time")
