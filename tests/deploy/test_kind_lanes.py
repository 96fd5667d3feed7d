"""The kind tier's scenarios side by side (hack/kind/lanes.sh), with scenarios of the test's
own: at most LANES at once, each one's output together, the first failure's step and reason
the run's, and the scenarios beside it stopped."""

from __future__ import annotations

import pathlib
import re
import subprocess

from tests.deploy.deploy_helpers import ROOT, run_bash

REPORT = ROOT / "hack" / "kind" / "report.sh"
LANES = ROOT / "hack" / "kind" / "lanes.sh"
E2E_KIND = ROOT / "hack" / "e2e-kind.sh"


def run(tmp_path: pathlib.Path, body: str) -> subprocess.CompletedProcess[str]:
    """`body` after the report and the lanes are sourced, as hack/e2e-kind.sh runs them; each
    scenario below notes its start and end in `trace`, with the number of scenarios running."""
    script = f"""set -euo pipefail
source {REPORT}
WORK={tmp_path}
TRACE={tmp_path}/trace
source {LANES}
on_exit() {{
    local rc=$?
    stop_children $$
    if ((rc != 0)); then report_failure "$rc"; fi
    exit "$rc"
}}
trap on_exit EXIT
running() {{ ls {tmp_path}/running 2>/dev/null | wc -l; }}
busy() {{  # NAME SECONDS
    mkdir -p {tmp_path}/running; touch {tmp_path}/running/$1
    echo "start $1 $(running)" >>"$TRACE"
    echo "$1 says one"; sleep "$2"; echo "$1 says two"
    rm {tmp_path}/running/$1
    echo "end $1" >>"$TRACE"
}}
{body}
"""
    return run_bash(script)


def untimed(text: str) -> list[str]:
    return [re.sub(r"^=== e2e-kind \d\d:\d\d:\d\d", "=== e2e-kind", line) for line in text.splitlines() if line]


def test_at_most_lanes_at_once_each_ones_output_together(tmp_path: pathlib.Path) -> None:
    done = run(
        tmp_path,
        """scenario_elastic() { busy elastic 3; }  # long enough for the others on a loaded machine
scenario_restart() { sleep 301 & echo $! >"$WORK/left"; busy restart 0.3; }
scenario_graceful() { busy graceful 0.3; }
scenario_oom() { busy oom 0.2; }
run_lanes 2 oom graceful restart elastic
""",
    )
    assert done.returncode == 0, done.stderr
    trace = (tmp_path / "trace").read_text().split("\n")
    starts = [line.split() for line in trace if line.startswith("start")]
    lines = untimed(done.stderr)
    # Started in LANE_SCENARIOS' order (longest first), whatever order they were given in.
    started = [m.group(1) for line in lines if (m := re.fullmatch(r"=== e2e-kind: scenario: (\w+) starts .*", line))]
    assert started == ["elastic", "restart", "graceful", "oom"]
    assert max(int(s[2]) for s in starts) == 2  # two at once, never three
    left = int((tmp_path / "left").read_text())  # what a scenario left running ends with it
    assert not pathlib.Path(f"/proc/{left}").exists() or " Z " in pathlib.Path(f"/proc/{left}/stat").read_text()
    when = {" ".join(line.split()[:2]): n for n, line in enumerate(trace) if line}
    assert when["end restart"] < when["start graceful"] < when["end elastic"]  # a lane freed takes the next
    for name in ("elastic", "restart", "graceful", "oom"):
        at = lines.index(f"=== e2e-kind: scenario: {name}, its output")
        assert lines[at + 1 : at + 3] == [f"{name} says one", f"{name} says two"]
        assert re.fullmatch(rf"=== e2e-kind: scenario-{name} took \d+s, beside others", lines[at + 3])


def test_the_first_failure_is_the_runs_and_stops_the_others(tmp_path: pathlib.Path) -> None:
    done = run(
        tmp_path,
        """scenario_elastic() { busy elastic 300; }
scenario_restart() { sleep 30; die "mnist-restart never started training"; }
scenario_graceful() { busy graceful 0.1; sh -c 'exit 3'; }
run_lanes 3 restart elastic graceful
""",
    )
    assert done.returncode == 1
    lines = untimed(done.stderr)
    # graceful's command failed first; its reason is the ERR trap's, with its file and line.
    assert lines[-1].startswith("=== e2e-kind: FAILED (exit 1) in step 'scenario: graceful': `sh -c 'exit 3'` exited 3")
    assert "graceful says two" in lines
    assert "end elastic" not in (tmp_path / "trace").read_text()  # stopped, not waited out
    assert not any("elastic says two" in line for line in lines)


def test_a_scenarios_own_words_are_the_reason(tmp_path: pathlib.Path) -> None:
    done = run(
        tmp_path,
        """scenario_restart() { die "mnist-restart never started training"; }
scenario_oom() { busy oom 5; }
run_lanes 2 restart oom
""",
    )
    assert done.returncode == 1
    assert untimed(done.stderr)[-1] == (
        "=== e2e-kind: FAILED (exit 1) in step 'scenario: restart': mnist-restart never started training"
    )


def test_the_tier_runs_the_default_scenarios_in_lanes_and_the_node_ones_alone() -> None:
    text = E2E_KIND.read_text()
    assert "source hack/kind/lanes.sh" in text and 'run_lanes "$LANES"' in text
    lane_names = re.search(r'^LANE_SCENARIOS="([^"]+)"', LANES.read_text(), re.M)
    defaults = re.search(r'^DEFAULT_SCENARIOS="([^"]+)"', (ROOT / "hack/kind/scenario_list.sh").read_text(), re.M)
    nodes = re.search(r'^NODE_SCENARIOS="([^"]+)"', (ROOT / "hack/kind/scenario_list.sh").read_text(), re.M)
    assert lane_names and defaults and nodes
    assert sorted(lane_names.group(1).split()) == sorted(defaults.group(1).split())
    assert not set(lane_names.group(1).split()) & set(nodes.group(1).split())


def test_a_scenarios_end_goes_on_beside_the_next_ones_start_and_is_settled_before_its_fault(
    tmp_path: pathlib.Path,
) -> None:
    """One node scenario's end (its jobs run out) goes on while the next one starts its jobs;
    the next one's fault waits for it, and its output comes whole when it is settled."""
    done = run(
        tmp_path,
        """first_end() { busy first-end 3; }
scenario_first() { busy first 0.1; finish_later first first_end; }
scenario_second() {
    # The end runs in the background, so it may not have begun yet on a loaded machine: wait
    # (10 s at most) for it to be running. Were it run in the foreground it would be over by
    # now, and this wait would fail the test.
    for _ in $(seq 200); do [[ -e "$WORK/running/first-end" ]] && break; sleep 0.05; done
    busy second-start 0.2  # its jobs made while the first one's end still runs
    settle
    echo "fault second" >>"$TRACE"
    finish_later second busy second-end 0.1
}
scenario_first
scenario_second
settle
""",
    )
    assert done.returncode == 0, done.stderr
    trace = [line for line in (tmp_path / "trace").read_text().split("\n") if line]
    when = {" ".join(line.split()[:2]): n for n, line in enumerate(trace)}
    assert when["start second-start"] < when["end first-end"] < when["fault second"]
    assert trace[when["start second-start"]].split()[2] == "2"  # the two at once
    assert when["fault second"] < when["start second-end"]
    lines = untimed(done.stderr)
    at = lines.index(next(line for line in lines if line.startswith("=== e2e-kind: scenario: first, its end")))
    assert lines[at + 1 : at + 3] == ["first-end says one", "first-end says two"]
    assert any(line.startswith("=== e2e-kind: scenario: second, its end") for line in lines)


def test_a_failed_end_fails_the_run_when_settled_with_its_reason(tmp_path: pathlib.Path) -> None:
    done = run(
        tmp_path,
        """scenario_first() { finish_later first eval 'sleep 0.3; die "node-rigid did not succeed"'; }
scenario_first
busy second 0.1
settle
echo "not reached" >>"$TRACE"
""",
    )
    assert done.returncode == 1
    assert "not reached" not in (tmp_path / "trace").read_text()
    assert untimed(done.stderr)[-1] == (
        "=== e2e-kind: FAILED (exit 1) in step 'scenario: first': node-rigid did not succeed"
    )
