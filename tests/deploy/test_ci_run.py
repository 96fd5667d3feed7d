""".ci/run: the main suite, the gang tier, then the real-Pods tier where the machine can run
it now (hack/kind-ready.sh), else one line saying what it skipped and why. Run with `make`
(and, where the tier is to look ready, `docker` and `kind`) replaced by stubs on PATH that
record their calls, so each path of the decision is shown, the tier's failure included."""
from __future__ import annotations

import os
import pathlib
import subprocess

import pytest

from tests.deploy.deploy_helpers import ROOT

CI = ROOT / '.ci' / 'run'
READY = ROOT / 'hack' / 'kind-ready.sh'


def stub(folder: pathlib.Path, name: str, body: str) -> None:
    folder.mkdir(exist_ok=True)
    path = folder / name
    path.write_text(f'#!/usr/bin/env bash\n{body}\n')
    path.chmod(0o755)


def environment(tmp_path: pathlib.Path, **extra: str) -> dict[str, str]:
    """No docker answers, nothing in the build cache, the engine's folder empty."""
    env = {k: v for k, v in os.environ.items() if k not in ('KIND_NODE_IMAGE', 'DDPJOB_ENGINE')}
    env.update(DOCKER_HOST=f'unix://{tmp_path}/nothing.sock', DDPJOB_UPSTREAM_CACHE=str(tmp_path / 'cache'),
               DDPJOB_ENGINE_DIR=str(tmp_path / 'engine'), PY=str(ROOT / '.venv' / 'bin' / 'python'))
    env.update(extra)
    return env


def with_make(tmp_path: pathlib.Path, fail_on: str = '') -> tuple[pathlib.Path, pathlib.Path]:
    bin_dir, calls = tmp_path / 'bin', tmp_path / 'make-calls'
    stub(bin_dir, 'make', f'echo "$*" >>{calls}\n[[ "$*" != "{fail_on}" ]] || exit 7')
    return bin_dir, calls


def test_ready_says_in_one_line_what_is_missing_and_starts_nothing(tmp_path: pathlib.Path) -> None:
    done = subprocess.run([str(READY)], capture_output=True, text=True, timeout=120, env=environment(tmp_path))
    assert done.returncode == 3, done.stdout + done.stderr
    (line,) = done.stdout.splitlines()
    assert line.startswith('no docker answers')  # and then why no engine of ours can start
    assert not (tmp_path / 'engine').exists() and not (tmp_path / 'cache').exists()


def test_ci_skips_the_tier_in_one_line_where_it_cannot_run(tmp_path: pathlib.Path) -> None:
    bin_dir, calls = with_make(tmp_path)
    env = environment(tmp_path, PATH=f'{bin_dir}:{os.environ["PATH"]}')
    done = subprocess.run([str(CI)], capture_output=True, text=True, timeout=120, env=env)
    assert done.returncode == 0, done.stdout + done.stderr
    assert calls.read_text().split('\n')[:-1] == ['test', 'test-gangs']
    (line,) = done.stdout.splitlines()
    assert line.startswith('ci: the real-Pods tier (make e2e-kind) is skipped: no docker answers')


def test_ci_runs_the_tier_where_it_can_and_fails_with_it(tmp_path: pathlib.Path) -> None:
    """A docker that answers, kind on PATH, a released node image and both images there:
    the tier runs, and its failure is CI's."""
    bin_dir, calls = with_make(tmp_path, fail_on='e2e-kind')
    stub(bin_dir, 'docker', 'exit 0')  # `docker info` answers; every image is there
    stub(bin_dir, 'kind', 'exit 0')
    env = environment(tmp_path, PATH=f'{bin_dir}:{os.environ["PATH"]}', KIND_NODE_IMAGE='kindest/node:v1.37.0')
    ready = subprocess.run([str(READY)], capture_output=True, text=True, timeout=120, env=env)
    assert ready.returncode == 0 and ready.stdout == '', ready.stdout + ready.stderr
    done = subprocess.run([str(CI)], capture_output=True, text=True, timeout=120, env=env)
    assert done.returncode == 7, done.stdout + done.stderr
    assert calls.read_text().split('\n')[:-1] == ['test', 'test-gangs', 'e2e-kind']
    # The same machine without its trainer image: the tier is skipped, saying so.
    stub(bin_dir, 'docker', '[[ "$*" != *trainer* ]]')
    missing = subprocess.run([str(READY)], capture_output=True, text=True, timeout=120, env=env)
    assert missing.returncode == 3 and 'ddpjob/trainer:' in missing.stdout and 'make images' in missing.stdout


def test_a_check_that_fails_fails_ci(tmp_path: pathlib.Path) -> None:
    bin_dir, calls = with_make(tmp_path)
    env = environment(tmp_path, PATH=f'{bin_dir}:{os.environ["PATH"]}', PY='/bin/false')
    done = subprocess.run([str(CI)], capture_output=True, text=True, timeout=120, env=env)
    assert done.returncode not in (0, 3), done.stdout + done.stderr
    assert 'hack/kind-ready.sh failed' in done.stderr
    assert 'e2e-kind' not in calls.read_text()


def test_a_check_only_build_builds_nothing(tmp_path: pathlib.Path) -> None:
    """BUILD_CHECK_ONLY=1 (how hack/kind-ready.sh asks for the node image's tag): the Debian
    base that is not there is reported with exit 3, and debootstrap never runs."""
    bin_dir = tmp_path / 'bin'
    stub(bin_dir, 'docker', 'exit 1')  # no image is there
    stub(bin_dir, 'debootstrap', f'touch {tmp_path}/debootstrap-ran')
    env = {**os.environ, 'PATH': f'{bin_dir}:{os.environ["PATH"]}', 'BUILD_CHECK_ONLY': '1'}
    done = subprocess.run([str(ROOT / 'hack' / 'debian-base.sh')], capture_output=True, text=True, timeout=60, env=env)
    assert done.returncode == 3 and 'is not built' in done.stderr and done.stdout == ''
    assert not (tmp_path / 'debootstrap-ran').exists()


def test_ready_says_the_engine_needs_iptables_where_it_cannot_be_had(tmp_path: pathlib.Path) -> None:
    """dockerd's embedded DNS (how kind's workers find the control plane) needs the iptables
    command; hack/engine.sh installs it with apt-get. Where neither is on PATH, the tier is
    not ready, said as such, instead of an engine whose nodes cannot resolve each other."""
    if os.geteuid() != 0:
        pytest.skip('the check comes after the root check; this test runs as another user')
    bin_dir = tmp_path / 'bin'
    stub(bin_dir, 'docker', 'exit 1')  # the CLI is here; no docker answers
    for tool in ('bash', 'dirname', 'timeout'):  # what the script runs, and nothing of apt or iptables
        found = next(p for p in ('/usr/bin', '/bin') if (pathlib.Path(p) / tool).exists())
        (bin_dir / tool).symlink_to(pathlib.Path(found) / tool)
    done = subprocess.run([str(READY)], capture_output=True, text=True, timeout=120,
                          env=environment(tmp_path, PATH=str(bin_dir)))
    assert done.returncode == 3, done.stdout + done.stderr
    assert done.stdout == ("no docker answers, and the project's engine needs the iptables command "
                           "(its embedded DNS)\n")
