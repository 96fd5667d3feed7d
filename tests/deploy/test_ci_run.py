""".ci/run: the main suite, the gang tier, then the real-Pods tier where the machine can run
it (hack/kind-ready.sh): its missing builds first, within what is left of CI's limit, else
one line saying what it skipped and why. Run with `make` (and, where the tier is to look
ready, `docker` and `kind`) replaced by stubs on PATH that record their calls, so each path
of the decision is shown, the builds' and the tier's failures included."""

from __future__ import annotations

import os
import pathlib
import re
import signal
import subprocess
import time

import pytest

from tests.deploy.deploy_helpers import ROOT

CI = ROOT / ".ci" / "run"
READY = ROOT / "hack" / "kind-ready.sh"


def stub(folder: pathlib.Path, name: str, body: str) -> None:
    folder.mkdir(exist_ok=True)
    path = folder / name
    path.write_text(f"#!/usr/bin/env bash\n{body}\n")
    path.chmod(0o755)


def environment(tmp_path: pathlib.Path, **extra: str) -> dict[str, str]:
    """No docker answers, nothing in the build cache, the engine's folder empty."""
    # CI's own knobs (CI_LIMIT_S, CI_TIER_S...) and the tier's (E2E_SCENARIOS...) of the run
    # these tests are part of: not theirs.
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("KIND_NODE_IMAGE", "DDPJOB_ENGINE") and not k.startswith(("CI_", "E2E_"))
    }
    env.update(
        DOCKER_HOST=f"unix://{tmp_path}/nothing.sock",
        DDPJOB_UPSTREAM_CACHE=str(tmp_path / "cache"),
        DDPJOB_ENGINE_DIR=str(tmp_path / "engine"),
        PY=str(ROOT / ".venv" / "bin" / "python"),
    )
    env.update(extra)
    return env


def with_make(tmp_path: pathlib.Path, fail_on: str = "") -> tuple[pathlib.Path, pathlib.Path]:
    bin_dir, calls = tmp_path / "bin", tmp_path / "make-calls"
    # A call is recorded with the tier's one knob that .ci/run sets.
    record = '"$*${E2E_NODE_SCENARIOS:+ E2E_NODE_SCENARIOS=$E2E_NODE_SCENARIOS}"'
    stub(bin_dir, "make", f'echo {record} >>{calls}\n[[ "$*" != "{fail_on}" ]] || exit 7')
    return bin_dir, calls


def test_ready_says_in_one_line_what_is_missing_and_starts_nothing(tmp_path: pathlib.Path) -> None:
    """No docker answers and nothing is built: as root (the project's engine can be started)
    that is "not built yet" (exit 4), elsewhere "cannot" (exit 3); built or started, nothing."""
    done = subprocess.run([str(READY)], capture_output=True, text=True, timeout=120, env=environment(tmp_path))
    (line,) = done.stdout.splitlines()
    assert line.startswith("no docker answers")  # and then why no engine of ours can start
    if os.geteuid() == 0:
        assert done.returncode == 4, done.stdout + done.stderr
        assert "the project's engine is not fetched" in line and "make engine" in line
    else:
        assert done.returncode == 3, done.stdout + done.stderr
    assert not (tmp_path / "engine").exists() and not (tmp_path / "cache").exists()


def test_ci_skips_the_tier_in_one_line_where_it_cannot_run(tmp_path: pathlib.Path) -> None:
    """No engine can be had here (DDPJOB_ENGINE=user and none answers): nothing is built."""
    bin_dir, calls = with_make(tmp_path)
    env = environment(tmp_path, PATH=f"{bin_dir}:{os.environ['PATH']}", DDPJOB_ENGINE="user")
    done = subprocess.run([str(CI)], capture_output=True, text=True, timeout=120, env=env)
    assert done.returncode == 0, done.stdout + done.stderr
    assert calls.read_text().split("\n")[:-1] == ["test", "test-gangs"]
    (line,) = done.stdout.splitlines()
    assert line == "ci: the real-Pods tier (make e2e-kind) is skipped: no docker answers, and DDPJOB_ENGINE=user"


BUILDS = "engine kind-builds"


def unbuilt(tmp_path: pathlib.Path, build: str, **extra: str) -> tuple[dict[str, str], pathlib.Path]:
    """A docker that answers with every image, a released node image, and no kind: the tier
    is "not built" (kind is the engine target's). The stub's build step runs `build`."""
    bin_dir, calls = tmp_path / "bin", tmp_path / "make-calls"
    stub(bin_dir, "make", f'echo "$*" >>{calls}\nif [[ "$*" == "{BUILDS}" ]]; then {build}; fi')
    stub(bin_dir, "docker", "exit 0")
    env = environment(tmp_path, PATH=f"{bin_dir}:{os.environ['PATH']}", KIND_NODE_IMAGE="kindest/node:v1.37.0", **extra)
    return env, calls


def test_ci_builds_what_the_tier_lacks_and_then_runs_it(tmp_path: pathlib.Path) -> None:
    bin_dir = tmp_path / "bin"
    env, calls = unbuilt(tmp_path, f'printf "#!/bin/sh\\nexit 0\\n" >{bin_dir}/kind; chmod +x {bin_dir}/kind')
    ready = subprocess.run([str(READY)], capture_output=True, text=True, timeout=120, env=env)
    assert ready.returncode == 4 and ready.stdout == "kind is neither on PATH nor built (make engine)\n", ready.stdout
    done = subprocess.run([str(CI)], capture_output=True, text=True, timeout=120, env=env)
    assert done.returncode == 0, done.stdout + done.stderr
    assert calls.read_text().split("\n")[:-1] == ["test", "test-gangs", BUILDS, "e2e-kind"]
    assert done.stdout.startswith(
        "ci: the real-Pods tier is not built (kind is neither on PATH nor built (make engine)); "
        "building it for at most "
    )


def test_builds_cut_short_by_the_budget_stop_whole_and_skip_the_tier_in_one_line(tmp_path: pathlib.Path) -> None:
    """CI's limit comes first: the build's whole process tree is stopped at the budget, the
    run passes, and one line says what is still missing and that the next run goes on."""
    marker = f"{tmp_path}/build-child"
    env, calls = unbuilt(
        tmp_path,
        f'bash -c "echo \\$\\$ >{marker}; exec sleep 60 >/dev/null 2>&1"',
        CI_LIMIT_S="3",
        CI_MARGIN_S="0",
        CI_MIN_BUILD_S="1",
    )
    done = subprocess.run([str(CI)], capture_output=True, text=True, timeout=120, env=env)
    assert done.returncode == 0, done.stdout + done.stderr
    assert calls.read_text().split("\n")[:-1] == ["test", "test-gangs", BUILDS]
    *_, line = done.stdout.splitlines()
    assert line.startswith("ci: the real-Pods tier (make e2e-kind) is skipped: kind is neither on PATH nor built")
    assert "its builds stopped at this run's budget" in line
    child = int(pathlib.Path(marker).read_text())
    # The build's own child (its output elsewhere, so CI's end does not wait on it) was
    # stopped too, not only make.
    stopped = stopped_within(child, seconds=10)
    if not stopped:
        os.kill(child, signal.SIGKILL)
    assert stopped


def stopped_within(pid: int, seconds: float) -> bool:
    """Whether the process is gone or dead (a zombie that its new parent has yet to reap)."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            state = pathlib.Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except FileNotFoundError:
            return True
        if state in ("Z", "X"):
            return True
        time.sleep(0.1)
    return False


@pytest.mark.parametrize(
    ("build", "code", "said"),
    [
        ("exit 7", 7, "building the real-Pods tier failed (exit 7"),
        # A build that says it succeeded while the check still finds the part missing is a
        # disagreement between the two (a tag, a cache key), not something to skip over.
        ("true", 1, "still says: kind is neither on PATH nor built"),
    ],
)
def test_a_build_that_fails_or_leaves_the_tier_unready_fails_ci(
    tmp_path: pathlib.Path, build: str, code: int, said: str
) -> None:
    env, calls = unbuilt(tmp_path, build)
    done = subprocess.run([str(CI)], capture_output=True, text=True, timeout=120, env=env)
    assert done.returncode == code, done.stdout + done.stderr
    assert said in done.stderr
    assert "e2e-kind" not in calls.read_text()


def test_no_builds_start_without_time_for_them_nor_the_tier_without_its_own(tmp_path: pathlib.Path) -> None:
    bin_dir = tmp_path / "bin"
    env, calls = unbuilt(
        tmp_path, f'printf "#!/bin/sh\\nexit 0\\n" >{bin_dir}/kind; chmod +x {bin_dir}/kind', CI_LIMIT_S="0"
    )
    done = subprocess.run([str(CI)], capture_output=True, text=True, timeout=120, env=env)
    assert done.returncode == 0, done.stdout + done.stderr
    assert calls.read_text().split("\n")[:-1] == ["test", "test-gangs"]
    assert done.stdout.endswith(
        "is skipped: kind is neither on PATH nor built (make engine); no time is left to build it\n"
    )
    # Time to build, not to run the tier after: built, then skipped, saying so.
    calls.unlink()
    done = subprocess.run(
        [str(CI)], capture_output=True, text=True, timeout=120, env={**env, "CI_LIMIT_S": "5400", "CI_TIER_S": "100000"}
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert calls.read_text().split("\n")[:-1] == ["test", "test-gangs", BUILDS]
    *_, line = done.stdout.splitlines()
    assert (
        line.startswith("ci: the real-Pods tier (make e2e-kind) is skipped: built in ")
        and "the next run runs it" in line
    )


def test_ci_runs_the_tier_where_it_can_and_fails_with_it(tmp_path: pathlib.Path) -> None:
    """A docker that answers, kind on PATH, a released node image and both images there:
    the tier runs, and its failure is CI's."""
    bin_dir, calls = with_make(tmp_path, fail_on="e2e-kind")
    stub(bin_dir, "docker", "exit 0")  # `docker info` answers; every image is there
    stub(bin_dir, "kind", "exit 0")
    env = environment(tmp_path, PATH=f"{bin_dir}:{os.environ['PATH']}", KIND_NODE_IMAGE="kindest/node:v1.37.0")
    ready = subprocess.run([str(READY)], capture_output=True, text=True, timeout=120, env=env)
    assert ready.returncode == 0 and ready.stdout == "", ready.stdout + ready.stderr
    done = subprocess.run([str(CI)], capture_output=True, text=True, timeout=120, env=env)
    assert done.returncode == 7, done.stdout + done.stderr
    assert calls.read_text().split("\n")[:-1] == ["test", "test-gangs", "e2e-kind"]
    # Built, but less of CI's limit left than the tier is given: skipped, saying so, never
    # started to be cut by the limit.
    calls.unlink()
    short = subprocess.run([str(CI)], capture_output=True, text=True, timeout=120, env={**env, "CI_TIER_S": "100000"})
    assert short.returncode == 0, short.stdout + short.stderr
    assert calls.read_text().split("\n")[:-1] == ["test", "test-gangs"]
    assert short.stdout.splitlines()[-1].startswith("ci: the real-Pods tier (make e2e-kind) is skipped: ")
    assert "under the 100000 s it is given (CI_TIER_S)" in short.stdout
    # Time for the tier but not for its node scenarios: the tier without them, saying so.
    calls.unlink()
    nodes = subprocess.run(
        [str(CI)], capture_output=True, text=True, timeout=120, env={**env, "CI_TIER_S": "1000", "CI_NODE_S": "100000"}
    )
    assert nodes.returncode == 7, nodes.stdout + nodes.stderr
    assert calls.read_text().split("\n")[:-1] == ["test", "test-gangs", "e2e-kind E2E_NODE_SCENARIOS=0"]
    said = [line for line in nodes.stdout.splitlines() if line.startswith("ci: the node scenarios")]
    assert len(said) == 1 and "under the tier's 1000 s and any of their shares of 100000 s" in said[0], said
    # Scenarios named by hand are run as named.
    calls.unlink()
    named = {**env, "CI_NODE_S": "100000", "E2E_SCENARIOS": "example"}
    assert subprocess.run([str(CI)], capture_output=True, text=True, timeout=120, env=named).returncode == 7
    assert calls.read_text().split("\n")[:-1] == ["test", "test-gangs", "e2e-kind"]
    # The same machine without its trainer image: the tier is skipped, saying so.
    stub(bin_dir, "docker", '[[ "$*" != *trainer* ]]')
    missing = subprocess.run([str(READY)], capture_output=True, text=True, timeout=120, env=env)
    assert missing.returncode == 4 and "ddpjob/trainer:" in missing.stdout and "make images" in missing.stdout


def test_a_disk_too_small_for_the_images_skips_the_tier_in_one_line(tmp_path: pathlib.Path) -> None:
    """Everything built, but the engine's disk cannot hold the trainer image on three workers
    (hack/kind/room.sh): that is this machine's, as a missing engine is; ready says so (exit
    3), CI skips the tier saying why and passes. With the room, ready again."""
    bin_dir, calls = with_make(tmp_path)
    root = tmp_path / "engine-root"
    root.mkdir()
    stub(
        bin_dir,
        "docker",
        f"""case "$*" in
    "info -f {{{{.DockerRootDir}}}}") echo {root} ;;
    "image inspect -f {{{{.Size}}}} "*trainer*) echo 3000000000 ;;
    "image inspect -f {{{{.Size}}}} "*operator*) echo 250000000 ;;
    "image ls --format {{{{.Size}}}} "*trainer*) echo 9GB ;;
    "image ls --format {{{{.Size}}}} "*operator*) echo 750MB ;;
esac""",
    )
    stub(bin_dir, "kind", "exit 0")
    stub(bin_dir, "df", 'printf "Avail\\n%s\\n" "$((${FREE_GB} * 1024 ** 3))"')
    env = environment(tmp_path, PATH=f"{bin_dir}:{os.environ['PATH']}", KIND_NODE_IMAGE="kindest/node:v1.37.0")
    short = {**env, "FREE_GB": "20", "DDPJOB_IMAGE_ARCHIVES": str(tmp_path / "archives")}
    ready = subprocess.run([str(READY)], capture_output=True, text=True, timeout=120, env=short)
    assert ready.returncode == 3, ready.stdout + ready.stderr
    assert ready.stdout.startswith("loading the images needs about 3") and "20 GB are free" in ready.stdout
    assert not (tmp_path / "archives").exists()  # asking makes nothing
    done = subprocess.run([str(CI)], capture_output=True, text=True, timeout=120, env=short)
    assert done.returncode == 0, done.stdout + done.stderr
    assert calls.read_text().split("\n")[:-1] == ["test", "test-gangs"]
    assert done.stdout.splitlines()[-1] == f"ci: the real-Pods tier (make e2e-kind) is skipped: {ready.stdout.strip()}"
    roomy = subprocess.run([str(READY)], capture_output=True, text=True, timeout=120, env={**short, "FREE_GB": "60"})
    assert roomy.returncode == 0 and roomy.stdout == "", roomy.stdout + roomy.stderr


def ready_tier(tmp_path: pathlib.Path, **extra: str) -> tuple[dict[str, str], pathlib.Path]:
    """A machine whose tier is ready (as above), the tier itself a stub that passes."""
    bin_dir, calls = with_make(tmp_path)
    stub(bin_dir, "docker", "exit 0")
    stub(bin_dir, "kind", "exit 0")
    env = environment(tmp_path, PATH=f"{bin_dir}:{os.environ['PATH']}", KIND_NODE_IMAGE="kindest/node:v1.37.0")
    return {**env, **extra}, calls


def spare(seconds: int) -> dict[str, str]:
    """CI's limit set so that about SECONDS are left beyond the tier's 1300 (the run's own
    first seconds, a few, come off it)."""
    return {"CI_LIMIT_S": str(600 + 1300 + seconds), "CI_MARGIN_S": "600", "CI_TIER_S": "1300", "CI_NODE_S": "1600"}


def commits(tmp_path: pathlib.Path, count: int) -> dict[str, str]:
    """A repository of COUNT commits for .ci/run's `git rev-list --count HEAD`."""
    repo = tmp_path / f"repo-{count}"
    git = ["git", "-c", "user.name=ci", "-c", "user.email=ci@example.invalid", "-C", str(repo)]
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    for i in range(count):
        subprocess.run([*git, "commit", "-q", "--allow-empty", "-m", str(i)], check=True)
    return {"GIT_DIR": str(repo / ".git")}


def test_short_of_time_for_every_node_scenario_ci_runs_those_that_fit_in_turn(tmp_path: pathlib.Path) -> None:
    """The node scenarios' shares (node_unhealthy 121 of 1600, the others 235-393): with
    about 210 s to spare only node_unhealthy fits, whatever the turn; with about 300, one
    of the others that fits alone (all but node_elastic and node_drain), the turn's first
    that does, which moves with the commit count."""
    env, calls = ready_tier(tmp_path)
    done = subprocess.run([str(CI)], capture_output=True, text=True, timeout=120, env={**env, **spare(210)})
    assert done.returncode == 0, done.stdout + done.stderr
    assert calls.read_text().split("\n")[:-1] == ["test", "test-gangs", "e2e-kind E2E_NODE_SCENARIOS=node_unhealthy"]
    said = [line for line in done.stdout.splitlines() if line.startswith("ci: 1 of the 6 node scenarios run")]
    assert len(said) == 1 and "(node_unhealthy)" in said[0] and "another run takes them in turn" in said[0], done.stdout
    for count, expected in ((2, "partition"), (5, "operator_loss"), (6, "node_rigid")):
        calls.unlink()
        turned = {**env, **spare(300), **commits(tmp_path, count)}
        run = subprocess.run([str(CI)], capture_output=True, text=True, timeout=120, env=turned)
        assert run.returncode == 0, run.stdout + run.stderr
        assert calls.read_text().split("\n")[:-1][-1] == f"e2e-kind E2E_NODE_SCENARIOS={expected}", (count, run.stdout)


def test_the_tier_knows_every_node_scenario_ci_shares_its_time_among(tmp_path: pathlib.Path) -> None:
    """.ci/run's shares name the tier's node scenarios, in its order; a name the tier does
    not know is refused before anything starts."""
    shares = re.search(r'NODE_SHARES="([^"]+)"', CI.read_text())
    listing = ROOT / "hack" / "kind" / "scenario_list.sh"
    tier = re.search(r'NODE_SCENARIOS="([^"]+)"', listing.read_text())
    assert shares and tier
    assert [entry.split(":")[0] for entry in shares.group(1).split()] == tier.group(1).split()
    assert sum(int(entry.split(":")[1]) for entry in shares.group(1).split()) == 1600
    # Some named: those, in the tier's order, after the default ones.
    some = subprocess.run(
        [str(listing)],
        capture_output=True,
        text=True,
        timeout=60,
        env=environment(tmp_path, E2E_NODE_SCENARIOS="operator_loss node_elastic"),
    )
    assert some.returncode == 0 and some.stdout.split()[-2:] == ["node_elastic", "operator_loss"], some.stderr
    assert "node_rigid" not in some.stdout.split() and some.stdout.split()[0] == "example"
    env = environment(tmp_path, E2E_NODE_SCENARIOS="node_elastic node_bogus")
    bad = subprocess.run([str(ROOT / "hack" / "e2e-kind.sh")], capture_output=True, text=True, timeout=60, env=env)
    assert bad.returncode == 2 and "E2E_NODE_SCENARIOS: 'node_bogus' is not a node scenario" in bad.stderr, bad.stderr


def test_a_check_that_fails_fails_ci(tmp_path: pathlib.Path) -> None:
    bin_dir, calls = with_make(tmp_path)
    env = environment(tmp_path, PATH=f"{bin_dir}:{os.environ['PATH']}", PY="/bin/false")
    done = subprocess.run([str(CI)], capture_output=True, text=True, timeout=120, env=env)
    assert done.returncode not in (0, 3), done.stdout + done.stderr
    assert "hack/kind-ready.sh failed" in done.stderr
    assert "e2e-kind" not in calls.read_text()


def test_a_check_only_build_builds_nothing(tmp_path: pathlib.Path) -> None:
    """BUILD_CHECK_ONLY=1 (how hack/kind-ready.sh asks for the node image's tag): the Debian
    base that is not there is reported with exit 3, and debootstrap never runs."""
    bin_dir = tmp_path / "bin"
    stub(bin_dir, "docker", "exit 1")  # no image is there
    stub(bin_dir, "debootstrap", f"touch {tmp_path}/debootstrap-ran")
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}", "BUILD_CHECK_ONLY": "1"}
    done = subprocess.run([str(ROOT / "hack" / "debian-base.sh")], capture_output=True, text=True, timeout=60, env=env)
    assert done.returncode == 3 and "is not built" in done.stderr and done.stdout == ""
    assert not (tmp_path / "debootstrap-ran").exists()


def test_ready_says_the_engine_needs_iptables_where_it_cannot_be_had(tmp_path: pathlib.Path) -> None:
    """dockerd's embedded DNS (how kind's workers find the control plane) needs the iptables
    command; hack/engine.sh installs it with apt-get. Where neither is on PATH, the tier is
    not ready, said as such, instead of an engine whose nodes cannot resolve each other."""
    if os.geteuid() != 0:
        pytest.skip("the check comes after the root check; this test runs as another user")
    bin_dir = tmp_path / "bin"
    stub(bin_dir, "docker", "exit 1")  # the CLI is here; no docker answers
    for tool in ("bash", "dirname", "timeout"):  # what the script runs, and nothing of apt or iptables
        found = next(p for p in ("/usr/bin", "/bin") if (pathlib.Path(p) / tool).exists())
        (bin_dir / tool).symlink_to(pathlib.Path(found) / tool)
    done = subprocess.run(
        [str(READY)], capture_output=True, text=True, timeout=120, env=environment(tmp_path, PATH=str(bin_dir))
    )
    assert done.returncode == 3, done.stdout + done.stderr
    assert done.stdout == (
        "no docker answers, and the project's engine needs the iptables command (its embedded DNS)\n"
    )
