"""The trainer's testing aids that need no training run to check."""

from __future__ import annotations

from ddpjob_trainer import testing_aids


def test_a_slow_step_sleeps_until_the_test_releases_the_job(tmp_path, monkeypatch) -> None:
    slept: list[float] = []
    monkeypatch.setattr(testing_aids.time, "sleep", slept.append)
    release = tmp_path / "release"
    monkeypatch.delenv(testing_aids.STEP_SECONDS_UNTIL, raising=False)
    testing_aids.slow_step(0.25)  # no release file named: every step is slow
    monkeypatch.setenv(testing_aids.STEP_SECONDS_UNTIL, str(release))
    testing_aids.slow_step(0.25)  # named, not there yet
    release.touch()
    testing_aids.slow_step(0.25)  # released: full speed
    assert slept == [0.25, 0.25]
