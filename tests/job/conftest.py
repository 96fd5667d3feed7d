"""The job logic tests' `job` fixture: a parsed job made from the shared small body
(tests/conftest.py's `job_body`), with a 10 s restart backoff unless a test says otherwise."""

import pytest

from ddpjob.api.spec import parse_job


@pytest.fixture
def job(job_body):
    def make(**spec):
        return parse_job(job_body(**{"restartBackoffSeconds": 10, **spec}))

    return make
