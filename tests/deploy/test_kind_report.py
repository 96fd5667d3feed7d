"""How the kind tier says why it failed (hack/kind/report.sh): the step and the reason are the
run's last lines, after the long diagnostics, because CI shows a failed run by its tail.
Each case runs bash as hack/e2e-kind.sh does (errexit, pipefail, the report sourced, an EXIT
trap that prints a screenful of diagnostics and then the report)."""

from __future__ import annotations

import pathlib
import re
import subprocess

from tests.deploy.deploy_helpers import BARE_PATH, ROOT, run_bash

REPORT = ROOT / "hack" / "kind" / "report.sh"
E2E_KIND = ROOT / "hack" / "e2e-kind.sh"


def run(tmp_path: pathlib.Path, body: str) -> subprocess.CompletedProcess[str]:
    """`body` in bash after the report is sourced; on exit 200 lines of diagnostics, then the
    report with 'mnist-cpu  Failed' as what was seen of the jobs."""
    scenario = tmp_path / "scenario.sh"
    scenario.write_text(body)
    script = f"""set -euo pipefail
source {REPORT}
on_exit() {{
    local rc=$?
    if ((rc != 0)); then
        for i in $(seq 200); do echo "diagnostics line $i" >&2; done
        report_failure "$rc" "mnist-cpu  Failed"
    fi
    exit "$rc"
}}
trap on_exit EXIT
source {scenario}
"""
    return run_bash(script)


def untimed(line: str) -> str:
    """A log line with its time of day (checked to be there) taken out; other lines as they are."""
    if not line.startswith("=== e2e-kind"):
        return line
    timed = re.fullmatch(r"=== e2e-kind \d\d:\d\d:\d\d(: .*)", line)
    assert timed, f"a log line without its time of day: {line!r}"
    return f"=== e2e-kind{timed.group(1)}"


def last_lines(done: subprocess.CompletedProcess[str]) -> list[str]:
    return [untimed(line) for line in done.stderr.splitlines() if line][-2:]


def test_a_checks_own_words_end_the_run(tmp_path: pathlib.Path) -> None:
    done = run(
        tmp_path, 'step "scenario: example"\ndie "mnist-cpu ended (Succeeded) before the operator showed progress"\n'
    )
    assert done.returncode == 1
    assert last_lines(done) == [
        "=== e2e-kind: FAILED (exit 1) in step 'scenario: example': "
        "mnist-cpu ended (Succeeded) before the operator showed progress",
        "mnist-cpu  Failed",
    ]


def test_a_command_failing_in_a_scenarios_function_is_named_with_its_file_and_line(tmp_path: pathlib.Path) -> None:
    """errexit ends the run on a failing command with no word of why; the ERR trap, carried
    into functions (errtrace), names the command, its status and where it is."""
    done = run(
        tmp_path,
        "scenario_restart() {\n    local job=mnist-restart\n"
        '    grep -q "epoch 1/" /dev/null\n    echo "not reached"\n}\n'
        'step "scenario: restart"\nscenario_restart\n',
    )
    assert done.returncode == 1 and "not reached" not in done.stdout
    assert last_lines(done)[0] == (
        "=== e2e-kind: FAILED (exit 1) in step 'scenario: restart': "
        '`grep -q "epoch 1/" /dev/null` exited 1 (scenario.sh, line 3)'
    )


def test_the_first_reason_is_kept(tmp_path: pathlib.Path) -> None:
    """A failure that is handled (|| true, a condition) is no reason: the die after it is. A
    command failing at a function's end fails the function's call too: the command, the
    first of the two, is the reason."""
    done = run(
        tmp_path,
        "false || true\nif ! grep -q x /dev/null; then :; fi\n"
        'step helm\ndie "the chart\'s NetworkPolicy was not installed"\n',
    )
    assert done.returncode == 1
    assert last_lines(done)[0].endswith("in step 'helm': the chart's NetworkPolicy was not installed")
    nested = run(tmp_path, "step load\nkind_load() {\n    sh -c 'exit 3'\n}\nkind_load\n")
    assert nested.returncode == 3
    assert last_lines(nested)[0] == (
        "=== e2e-kind: FAILED (exit 3) in step 'load': `sh -c 'exit 3'` exited 3 (scenario.sh, line 3)"
    )


def test_e2e_kind_reports_last_and_marks_its_steps() -> None:
    """The tier sources the report, ends its cleanup with it (after the diagnostics and the
    cluster's deletion), and names each step it can fail in."""
    text = E2E_KIND.read_text()
    assert "source hack/kind/report.sh" in text
    cleanup = text[text.index("cleanup() {") : text.index("\n}\n", text.index("cleanup() {"))]
    lines = [line.strip() for line in cleanup.splitlines()]
    (report,) = [n for n, line in enumerate(lines) if "report_failure" in line]
    assert report > max(n for n, line in enumerate(lines) if line.startswith(("dump", "kind delete")))
    assert [line for line in lines[report + 1 :] if line] == ['exit "$rc"']
    for name in (
        "images",
        '"the operator\'s image into every node"',
        '"helm install $RELEASE"',
        '"the trainer\'s image into every worker"',
        '"scenario: $scenario"',
    ):
        assert f"step {name}" in text, name


def test_a_signal_is_a_failure_and_takes_the_runs_children(tmp_path: pathlib.Path) -> None:
    """A TERM to the script alone: bash runs the EXIT trap with the last command's status (0
    here, so the tier once said PASSED when stopped), and the commands it started, in the
    foreground and the background, would outlive it."""
    pids = tmp_path / "pids"
    script = f"""set -euo pipefail
source {REPORT}
on_exit() {{
    local rc=$?
    stop_children $$
    run_status "$rc"; rc=$RUN_STATUS
    if ((rc == 0)); then log PASSED; else report_failure "$rc"; fi
    exit "$rc"
}}
trap on_exit EXIT
step "scenario: graceful"
true
sleep 300 & echo $! >{pids}
bash -c 'echo $$ >>{pids}; exec sleep 301'
run_done
"""
    proc = subprocess.Popen(
        ["bash", "-c", script], stderr=subprocess.PIPE, text=True, cwd=ROOT, env={"PATH": BARE_PATH}
    )
    try:
        for _ in range(500):
            if pids.exists() and len(pids.read_text().split()) == 2:
                break
            subprocess.run(["sleep", "0.02"], check=True)
        children = [int(p) for p in pids.read_text().split()]
        # The TERM is sent once the script waits on its foreground command: bash looks at a
        # signal that came before its waitpid only when the command ends (here, in 301 s), a
        # race a busy machine lost (CI: the script still there 30 s after the TERM).
        wchan = pathlib.Path(f"/proc/{proc.pid}/wchan")
        for _ in range(500):
            if wchan.read_text().strip() == "do_wait":
                break
            subprocess.run(["sleep", "0.02"], check=True)
        proc.terminate()
        _, err = proc.communicate(timeout=30)
    finally:
        proc.kill()
    assert untimed([line for line in err.splitlines() if line][-1]) == (
        "=== e2e-kind: FAILED (exit 1) in step 'scenario: graceful': "
        "stopped before its end (a signal, or an exit that no check made)"
    )
    for pid in children:
        assert (
            not pathlib.Path(f"/proc/{pid}").exists() or "Z" in pathlib.Path(f"/proc/{pid}/stat").read_text().split()[2]
        ), pid


def test_e2e_kind_ends_its_children_and_passes_only_at_its_end() -> None:
    text = E2E_KIND.read_text()
    cleanup = text[text.index("cleanup() {") : text.index("\n}\n", text.index("cleanup() {"))]
    assert cleanup.index("stop_children $$") < cleanup.index('run_status "$rc"') < cleanup.index("dump")
    code = [line for line in text.splitlines() if line.strip() and not line.lstrip().startswith("#")]
    assert code[-1] == "run_done"
