"""The operator's settings: read from its environment once, at start; a bad value is one line naming it."""

from __future__ import annotations

import pytest

from ddpjob.operator import settings
from ddpjob.operator.gang import GangSupport


def test_no_environment_means_the_defaults() -> None:
    config = settings.from_env({})
    assert config == settings.DEFAULTS
    assert config.progress_polling and config.metrics_port is None and config.gang_explicit is False
    assert config.gang_integrations == frozenset({"kubernetes", "volcano", "coscheduling", "kueue"})


def test_every_setting_is_read() -> None:
    config = settings.from_env(
        {
            settings.TEMPLATE_ALLOW_ENV: "hostPath, privileged",
            settings.METRICS_PORT_ENV: "9090",
            settings.PROGRESS_INTERVAL_ENV: "5",
            settings.PROGRESS_RATE_ENV: "2.5",
            settings.PROGRESS_WRITES_ENV: "1",
            settings.LIVENESS_OUTAGE_ENV: "60",
            settings.GANG_INTEGRATIONS_ENV: "volcano,kueue",
            "DDPJOB_VOLCANO_SCHEDULER": "my-volcano",
            "DDPJOB_COSCHEDULING_SCHEDULER": "cosched",
        }
    )
    assert config.template_allow == {"hostPath", "privileged"} and config.metrics_port == 9090
    assert (config.progress_interval, config.progress_max_per_second, config.progress_max_writes_per_second) == (
        5.0,
        2.5,
        1.0,
    )
    assert config.liveness_outage_seconds == 60.0
    assert config.gang_integrations == {"volcano", "kueue"} and config.gang_explicit
    gang = GangSupport.from_settings(config)
    assert gang.options.schedulers == {"volcano": "my-volcano", "coscheduling": "cosched"}
    assert gang.unavailable("kubernetes") and gang.unavailable("volcano") is None


def test_polling_is_off_with_a_zero_interval_or_rate() -> None:
    assert not settings.from_env({settings.PROGRESS_INTERVAL_ENV: "0"}).progress_polling
    assert not settings.from_env({settings.PROGRESS_RATE_ENV: "0"}).progress_polling
    assert settings.from_env({settings.GANG_INTEGRATIONS_ENV: ""}).gang_integrations == frozenset()


@pytest.mark.parametrize(
    "name, value, says",
    [
        (settings.METRICS_PORT_ENV, "http", "must be a port number"),
        (settings.METRICS_PORT_ENV, "70000", "must be a port number"),
        (settings.METRICS_PORT_ENV, "-1", "must be a port number"),
        (settings.PROGRESS_INTERVAL_ENV, "0.5", "must be 0 (off) or within [1, 3600]"),
        (settings.PROGRESS_RATE_ENV, "nan", "must be 0 (off) or within [0.1, 1000]"),
        (settings.PROGRESS_WRITES_ENV, "0", "cannot be turned off alone"),
        (settings.LIVENESS_OUTAGE_ENV, "0", "must be within [1, 86400]"),
        (settings.LIVENESS_OUTAGE_ENV, "soon", "is not a number"),
        (settings.GANG_INTEGRATIONS_ENV, "kubernetes,slurm", "unknown gang integration(s) 'slurm'"),
        ("DDPJOB_VOLCANO_SCHEDULER", "Volcano Scheduler", "must be a scheduler name"),
        (settings.TEMPLATE_ALLOW_ENV, "everything", "unknown template allowance 'everything'"),
        (settings.TENSORBOARD_PULL_ENV, "Sometimes", "must be Always, IfNotPresent or Never"),
        (settings.TENSORBOARD_RESOURCES_ENV, "cpu=1", "is not JSON"),
        (settings.TENSORBOARD_RESOURCES_ENV, '{"cpu": "1"}', "must be an object of requests and limits"),
        (settings.TENSORBOARD_RESOURCES_ENV, '{"limits": {"cpu": [1]}}', "must be an object of requests and limits"),
    ],
)
def test_a_bad_value_is_one_line_naming_the_variable(name: str, value: str, says: str) -> None:
    with pytest.raises(settings.SettingsError) as err:
        settings.from_env({name: value})
    message = str(err.value)
    assert message.startswith(name) and says in message and "\n" not in message


def test_a_hostile_value_is_shown_bounded() -> None:
    with pytest.raises(settings.SettingsError) as err:
        settings.from_env({settings.METRICS_PORT_ENV: "9" * 10_000})
    assert len(str(err.value)) < 300


def test_ddpjob_operator_hands_its_flags_to_the_operator_as_settings_not_through_the_environment(
    monkeypatch, capsys
) -> None:
    import os

    from ddpjob import cli
    from ddpjob.operator import main as operator_main

    given: list = []
    monkeypatch.setattr(operator_main, "run_operator", lambda **kw: given.append(kw))
    monkeypatch.setenv(settings.PROGRESS_INTERVAL_ENV, "7")
    monkeypatch.delenv(settings.TEMPLATE_ALLOW_ENV, raising=False)
    before = dict(os.environ)
    assert (
        cli.main(["operator", "-n", "ns", "--standalone", "--template-allow", "hostPath", "--metrics-port", "9099"])
        == 0
    )
    config = given[0]["settings"]
    assert config.template_allow == {"hostPath"} and config.progress_interval == 7.0  # flags and environment
    assert given[0]["metrics_port"] == 9099 and dict(os.environ) == before  # nothing written into it
    # A bad setting is one line, and nothing starts.
    monkeypatch.setenv(settings.PROGRESS_INTERVAL_ENV, "soon")
    assert cli.main(["operator", "--standalone"]) == 2 and len(given) == 1
    assert capsys.readouterr().err.strip().splitlines() == [
        f"error: {settings.PROGRESS_INTERVAL_ENV}='soon' is not a number"
    ]


def test_the_notice_key_is_bounded_and_never_shown():
    key = "k" * 40
    config = settings.from_env({settings.NOTICE_KEY_ENV: key})
    assert config.notice_key == key.encode() and key not in repr(config)
    assert settings.from_env({}).notice_key is None  # drawn at start
    with pytest.raises(settings.SettingsError, match=settings.NOTICE_KEY_ENV):
        settings.from_env({settings.NOTICE_KEY_ENV: "short"})


def test_the_tensorboard_settings_are_read_and_default_to_the_trainer_image() -> None:
    from ddpjob.version import trainer_image

    default = settings.from_env({}).tensorboard
    assert default.image == trainer_image("cpu") and default.image_pull_policy is None
    config = settings.from_env(
        {
            settings.TENSORBOARD_IMAGE_ENV: "registry.example/tb:2",
            settings.TENSORBOARD_PULL_ENV: "Always",
            settings.TENSORBOARD_RESOURCES_ENV: '{"limits": {"memory": "2Gi"}}',
        }
    ).tensorboard
    assert (config.image, config.image_pull_policy) == ("registry.example/tb:2", "Always")
    assert config.resources == {"limits": {"memory": "2Gi"}}
