"""The demo's environment for its tests (test_demo, test_demo_tensorboard): every process
the demo starts inherits a marker variable, so the fixture finds and kills whatever a
failing demo leaves behind, and fails the test that left it."""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator

import pytest

from ddpjob.local.process_tags import kill_with_env, pids_with_env
from ddpjob_devcluster.clusters.client import BIN

MARK = "DDPJOB_TEST_DEMO_MARK"


@pytest.fixture
def demo_env() -> Iterator[dict[str, str]]:
    mark = uuid.uuid4().hex
    env = dict(os.environ, PATH=os.pathsep.join([str(BIN), os.environ.get("PATH", "")]), PYTHONUNBUFFERED="1")
    env[MARK] = mark
    env.pop("KUBECONFIG", None)
    yield env
    leftovers = pids_with_env(MARK, mark)
    kill_with_env(MARK, mark)
    assert not leftovers, f"the demo left processes running: {leftovers}"
