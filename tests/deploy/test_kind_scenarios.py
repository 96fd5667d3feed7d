"""The kind tier's checks, run without an engine: each helper of hack/kind/jobs.sh and
the scenario files is sourced into bash with `k` (kubectl) answering canned output,
so each can be shown to fail on what it must not take for the behaviour it names:

- the nodes are counted once every Pod is bound (an unbound Pod's empty nodeName is no
  node), and the example's job spreads its Pods as a user would (hack/kind/spread.json,
  through ddpjob's own validation and rendering);
- the progress counts only while the job runs and Pod 0's trainer runs (before any
  termination message exists);
- the graceful delete's exit code is the one the container's status reported, for that
  Pod's uid.
The scenarios themselves run in tests/deploy/test_e2e_kind.py."""

from __future__ import annotations

import json
import pathlib
import re
import subprocess
import sys

import yaml

from ddpjob.api import spec as job_spec, template_policy
from ddpjob.render import objects as render_objects
from tests.deploy.deploy_helpers import ROOT, run_bash

JOBS = ROOT / "hack" / "kind" / "jobs.sh"
SCENARIOS = ROOT / "hack" / "kind" / "scenarios.sh"
REPORT = ROOT / "hack" / "kind" / "report.sh"
EXAMPLE = ROOT / "manifests" / "examples" / "mnist-cpu.yaml"

# `k` answers from files in $CANNED: `pods` for a list of Pods, `pod.N` for the Nth read of
# one Pod (the last one again after that), `ddpjob` for a DDPJob.
STUB = r"""
k() {
    case "$*" in
        *"get pods"*) cat "$CANNED/pods" ;;
        *"get pod "*) local n; n=$(( $(cat "$CANNED/reads" 2>/dev/null || echo 0) + 1 )); echo "$n" >"$CANNED/reads"
                      if [[ -f "$CANNED/pod.$n" ]]; then cat "$CANNED/pod.$n"; else cat "$(ls "$CANNED"/pod.* | sort | tail -1)"; fi ;;
        *"get ddpjob"*) cat "$CANNED/ddpjob" ;;
        *"logs -f"*) cat "$CANNED/logs" ;;
        *) echo "unexpected: k $*" >&2; return 2 ;;
    esac
}
"""


def call(tmp_path: pathlib.Path, command: str, **canned: str) -> subprocess.CompletedProcess[str]:
    """`command` in bash with jobs.sh and scenarios.sh sourced as hack/e2e-kind.sh sources
    them (errexit, pipefail), and `k` answering from `canned` (file name -> text)."""
    folder = tmp_path / "canned"
    folder.mkdir(parents=True, exist_ok=True)
    for name, text in canned.items():
        (folder / name.replace("_", ".")).write_text(text)
    script = (
        f"set -euo pipefail\nJOB_NS=e2e\nPY={sys.executable}\nEXAMPLE={EXAMPLE}\n{STUB}\n"
        f"source {REPORT}\nsource {JOBS}\nsource {SCENARIOS}\n{command}\n"
    )
    return run_bash(script, CANNED=str(folder))


def test_nodes_count_once_every_pod_is_bound(tmp_path: pathlib.Path) -> None:
    both = call(tmp_path, "bound_nodes mnist-cpu 2", pods="mnist-cpu-0=worker\nmnist-cpu-1=worker2\n")
    assert both.returncode == 0 and both.stdout.split() == ["worker", "worker2"], both.stderr
    one_unbound = call(tmp_path, "bound_nodes mnist-cpu 2", pods="mnist-cpu-0=worker\nmnist-cpu-1=\n")
    assert one_unbound.returncode != 0  # the old count took this for two nodes
    one_pod = call(tmp_path, "bound_nodes mnist-cpu 2", pods="mnist-cpu-0=worker\n")
    assert one_pod.returncode != 0
    together = call(tmp_path, "bound_nodes mnist-cpu 2", pods="mnist-cpu-0=worker\nmnist-cpu-1=worker\n")
    assert together.returncode == 0 and together.stdout.split() == ["worker"]  # one node: the scenario's count fails


def test_the_example_job_spreads_its_pods_and_the_template_policy_allows_it(tmp_path: pathlib.Path) -> None:
    made = call(tmp_path, 'job_from_example mnist-cpu "$(<hack/kind/spread.json)"')
    assert made.returncode == 0, made.stderr
    body = yaml.safe_load(made.stdout)
    job = job_spec.parse_job(body)
    assert template_policy.check_job(job, frozenset()) == []
    pods = [render_objects.render_pod(job, rank, 0) for rank in range(job.nodes)]
    for pod in pods:
        (term,) = pod["spec"]["affinity"]["podAntiAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
        assert term["topologyKey"] == "kubernetes.io/hostname"
        # The selector picks the job's own Pods: no two of them on one node.
        assert all(
            all(other["metadata"]["labels"].get(k) == v for k, v in term["labelSelector"]["matchLabels"].items())
            for other in pods
        )
    # The rest is the example's: only the template was added.
    example = yaml.safe_load(EXAMPLE.read_text())
    assert {k: v for k, v in body["spec"].items() if k != "template"} == example["spec"]


def test_progress_counts_only_while_the_job_and_pod_0_run(tmp_path: pathlib.Path) -> None:
    running = "uid-a 2026-11-28T06:00:00Z\n"
    seen = call(tmp_path / "a", "progress_while_running mnist-cpu", pod_1=running, ddpjob="Running 7\n")
    assert seen.returncode == 0 and seen.stdout.strip() == "7", seen.stderr
    # After the end the operator shows the termination message's step: not counted.
    for name, pod, job in [
        ("ended", "uid-a \n", "Succeeded 40\n"),
        ("terminated", "uid-a \n", "Running 7\n"),
        ("no-step", running, "Running \n"),
        ("step-0", running, "Running 0\n"),
    ]:
        assert call(tmp_path / name, "progress_while_running mnist-cpu", pod_1=pod, ddpjob=job).returncode != 0, name
    # Pod 0 replaced (or ended) between the two looks: the read may be a termination message's.
    replaced = call(
        tmp_path / "replaced",
        "progress_while_running mnist-cpu",
        pod_1=running,
        pod_2="uid-b 2026-11-28T06:00:09Z\n",
        ddpjob="Running 7\n",
    )
    assert replaced.returncode != 0
    stopped = call(
        tmp_path / "stopped", "progress_while_running mnist-cpu", pod_1=running, pod_2="uid-a \n", ddpjob="Running 7\n"
    )
    assert stopped.returncode != 0


def test_the_wait_for_progress_ends_with_the_job(tmp_path: pathlib.Path) -> None:
    """progress_from_pod0 takes the first step read while the job ran, and fails as soon as
    the job has ended without one (the example's job, about 3 s of training, often did: it
    no longer waits for one), rather than waiting out its deadline."""
    seen = call(
        tmp_path / "seen",
        'progress_from_pod0 mnist-restart 60; echo "step $PROGRESS_STEP"',
        pod_1="uid-a 2026-11-28T06:00:00Z\n",
        ddpjob="Running 7\n",
    )
    assert seen.returncode == 0 and seen.stdout.strip() == "step 7", seen.stderr
    ended = call(tmp_path / "ended", "progress_from_pod0 mnist-restart 60", pod_1="uid-a \n", ddpjob="Succeeded\n")
    assert ended.returncode == 1
    assert "FAILED: mnist-restart ended (Succeeded) before the operator showed progress" in ended.stderr
    text = SCENARIOS.read_text()
    restart = text[text.index("scenario_restart()") : text.index("scenario_elastic()")]
    assert restart.index('progress_from_pod0 "$job"') < restart.index('delete pod "$job-1"')
    start = text.index("scenario_example()")
    assert "progress" not in text[start : text.index("\n}\n", start)]


def test_the_lost_pods_replacement_is_followed_not_the_lost_pod(tmp_path: pathlib.Path) -> None:
    """The elastic scenario keeps the log of the Pod that replaces the lost one: read only once
    a Pod of another uid holds the name (the lost Pod's own log is not its replacement's)."""
    done = call(
        tmp_path,
        "follow_replacement elastic-2 uid-old",
        pod_1="uid-old",
        pod_2="uid-old",
        pod_3="uid-new",
        logs="worker 2 rejoined\n",
    )
    assert done.returncode == 0 and done.stdout == "worker 2 rejoined\n", done.stderr
    assert (tmp_path / "canned" / "reads").read_text().strip() == "3"
    text = SCENARIOS.read_text()
    elastic = text[text.index("scenario_elastic()") : text.index("scenario_oom()")]
    assert 'follow_replacement "$job-2" "${lost_uid%% *}"' in elastic


def test_the_graceful_exit_code_is_the_deleted_pods_containers(tmp_path: pathlib.Path) -> None:
    (tmp_path / "codes").write_text("uid-a \nuid-a \nuid-a 143\nuid-b \nuid-b 0\n")
    assert call(tmp_path, f"exit_code_of {tmp_path}/codes uid-a").stdout.strip() == "143"
    assert call(tmp_path, f"exit_code_of {tmp_path}/codes uid-b").stdout.strip() == "0"
    assert call(tmp_path, f"exit_code_of {tmp_path}/codes uid-c").stdout.strip() == ""
    # The scenario judges that code, from the watch of the Pod it deleted.
    text = SCENARIOS.read_text()
    graceful = text[text.index("scenario_graceful()") :]
    assert 'follow_exit_codes "$job-0"' in graceful and 'code=$(exit_code_of "$codes" "$uid")' in graceful
    assert '[[ "$code" == 143 ]]' in graceful


def test_spread_json_is_what_the_scenario_applies() -> None:
    spread = json.loads((ROOT / "hack" / "kind" / "spread.json").read_text())
    assert set(spread) == {"template"}
    assert 'job_from_example "$job" "$(<hack/kind/spread.json)"' in SCENARIOS.read_text()


def test_the_tier_never_writes_the_users_kubeconfig() -> None:
    """kind merges a new cluster's context into $KUBECONFIG (else ~/.kube/config) and makes it
    the current one, and kubectl caches under ~/.kube/cache: the script exports a kubeconfig
    and a cache folder of the run's own before any call to kind, kubectl or helm, once."""
    lines = (ROOT / "hack" / "e2e-kind.sh").read_text().splitlines()
    code = [(n, line) for n, line in enumerate(lines) if line.strip() and not line.lstrip().startswith("#")]
    (export,) = [n for n, line in code if re.match(r"\s*(export\s+)?KUBECONFIG=", line)]
    assert lines[export].strip() == "export KUBECONFIG=$WORK/kubeconfig KUBECACHEDIR=$WORK/kube-cache"
    assert export > next(n for n, line in code if line.startswith("WORK=$(mktemp"))
    calls = [
        n
        for n, line in code
        if re.search(r"(^|[\s;(|&])(kind (create|delete|load|get)|helm |k )", line)
        and not re.match(r"\s*(k|log|die)\(\)", line)
    ]
    top_level = [n for n in calls if not lines[n].startswith((" ", "\t"))]  # not inside a function
    assert top_level and min(top_level) > export, [lines[n] for n in top_level if n < export]


def test_no_check_ends_its_reader_early_under_pipefail() -> None:
    """The tier runs under `set -o pipefail`: `kubectl ... | grep -q X` fails when grep
    finds X and exits before kubectl has written the rest (kubectl then dies of SIGPIPE,
    and the pipeline with it), so a check passes or fails by a race. Seen on the elastic
    scenario: "no NodeLost event" with the Event there. A pipe into grep reads it all."""
    early = [
        f"{path.relative_to(ROOT)}:{n}"
        for path in [*sorted((ROOT / "hack" / "kind").glob("*.sh")), ROOT / "hack" / "e2e-kind.sh"]
        for n, line in enumerate(path.read_text().splitlines(), 1)
        # (a `bash -c "until ... | grep -q"` loop is its own shell, without pipefail)
        if re.search(r"\|\s*grep\b[^|]*\s(-q|--quiet)\b", line) and "bash -c" not in line
    ]
    assert not early, f"a pipe's reader may end before its writer (pipefail): {early}"


def test_a_wait_that_runs_out_says_what_its_explanation_prints(tmp_path: pathlib.Path) -> None:
    # A scenario's wait on the trainer's records fails with what the check found (the
    # groups it saw), not only with the wait's name: the CI log is all there is afterwards.
    late = call(tmp_path / "late", 'wait_for "a group of 3" 0 false "echo \'groups [(2, 1.0, 9.0)]\'"')
    assert late.returncode == 1
    assert "FAILED: a group of 3: not within 0s: groups [(2, 1.0, 9.0)]" in late.stderr, late.stderr
    plain = call(tmp_path / "plain", 'wait_for "a group of 3" 0 false')
    assert plain.returncode == 1 and "FAILED: a group of 3: not within 0s\n" in plain.stderr, plain.stderr
    held = call(tmp_path / "held", 'wait_for "a group of 3" 0 true "echo never"; echo went on')
    assert held.returncode == 0 and held.stdout.strip() == "went on" and "never" not in held.stderr


def test_a_node_scenarios_wait_ends_when_its_job_fails_first(tmp_path: pathlib.Path) -> None:
    # CI once waited out 300 s for a job that had failed a minute after the loss, and said
    # only "not within 300s": a job named to the wait ends it at once, with its message.
    node = ROOT / "hack" / "kind" / "node_scenarios.sh"
    job = 'status() { case $2 in .phase) echo "$PHASE" ;; .message) echo "Pod j-1 failed (exit code 2)" ;; esac; }'
    failed = call(tmp_path / "f", f'source {node}\n{job}\nPHASE=Failed took_until "j: grown back" "$(now)" 300 false j')
    assert failed.returncode == 1
    assert "FAILED: j: grown back: the job failed first: Pod j-1 failed (exit code 2)" in failed.stderr, failed.stderr
    late = call(tmp_path / "l", f'source {node}\n{job}\nPHASE=Running took_until "j: grown back" "$(now)" 0 false j')
    assert late.returncode == 1
    assert "j: grown back: not within 0s of the loss (Running: Pod j-1 failed" in late.stderr, late.stderr
    unnamed = call(tmp_path / "u", f'source {node}\n{job}\nPHASE=Failed took_until "j: grown back" "$(now)" 0 false')
    assert unnamed.returncode == 1 and "j: grown back: not within 0s of the loss\n" in unnamed.stderr
    held = call(
        tmp_path / "h", f'source {node}\n{job}\nPHASE=Failed took_until "j: up" "$(now)" 5 true j; echo "$TOOK"'
    )
    assert held.returncode == 0 and float(held.stdout.strip()) >= 0  # TOOK is set: the condition held


def test_a_node_scenarios_wait_that_runs_out_says_what_its_explanation_prints(tmp_path: pathlib.Path) -> None:
    # CI's log keeps only its tail: "the survivor's step at world size 1: not within 10s"
    # said neither which loss nor which groups the trainer had formed.
    node = ROOT / "hack" / "kind" / "node_scenarios.sh"
    explained = call(
        tmp_path / "e",
        f'source {node}\ntook_until "j: a step" "$(now)" 0 false \'\' "echo first; echo \'groups [(2, 1.0, 9.0)]\'"',
    )
    assert explained.returncode == 1
    assert "FAILED: j: a step: not within 0s of the loss: groups [(2, 1.0, 9.0)]\n" in explained.stderr
    assert "first" not in explained.stderr, explained.stderr
