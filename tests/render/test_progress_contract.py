"""The progress contract in a rendered Pod: the file, the named port, the emptyDir, and
NCCL defaults that a user's spec.env replaces."""

from ddpjob import contract
from ddpjob.api.spec import parse_job
from ddpjob.render import render_pod


def env_of(pod: dict) -> list[tuple[str, str]]:
    return [(e["name"], e.get("value")) for e in pod["spec"]["containers"][0]["env"]]


def test_every_pod_gets_the_progress_file_port_and_volume(job_body):
    pod = render_pod(parse_job(job_body()), 1)
    env = dict(env_of(pod))
    assert env["DDPJOB_PROGRESS_FILE"] == "/run/ddpjob/progress.json" and env["DDPJOB_PROGRESS_PORT"] == "29510"
    container = pod["spec"]["containers"][0]
    assert {"name": "progress", "containerPort": 29510, "protocol": "TCP"} in container["ports"]
    assert {"name": "ddpjob-progress", "mountPath": "/run/ddpjob"} in container["volumeMounts"]
    assert {"name": "ddpjob-progress", "emptyDir": {}} in pod["spec"]["volumes"]


def test_nccl_defaults_are_set_and_the_users_env_wins(job_body):
    env = env_of(render_pod(parse_job(job_body()), 0))
    assert ("TORCH_NCCL_ASYNC_ERROR_HANDLING", "1") in env and ("DDPJOB_COLLECTIVE_TIMEOUT_SECONDS", "600") in env
    body = job_body(
        env=[
            {"name": "TORCH_NCCL_ASYNC_ERROR_HANDLING", "value": "3"},
            {"name": "DDPJOB_COLLECTIVE_TIMEOUT_SECONDS", "value": "1800"},
        ]
    )
    env = env_of(render_pod(parse_job(body), 0))
    # One entry per name (no duplicates for a reader to guess between), the user's value.
    assert [v for n, v in env if n == "TORCH_NCCL_ASYNC_ERROR_HANDLING"] == ["3"]
    assert [v for n, v in env if n == "DDPJOB_COLLECTIVE_TIMEOUT_SECONDS"] == ["1800"]
    assert not set(contract.NCCL_DEFAULTS) & contract.RESERVED


def test_local_overrides_move_the_file_and_bind_a_pod_address():
    env = contract.local_overrides(4000, None, "/tmp/x/progress.json", "127.9.9.9")
    assert env["DDPJOB_PROGRESS_FILE"] == "/tmp/x/progress.json" and env["DDPJOB_PROGRESS_HOST"] == "127.9.9.9"
    assert "DDPJOB_PROGRESS_HOST" not in contract.local_overrides(4000, None)


def test_kubectl_get_shows_progress_and_eta_from_fields_the_status_schema_has():
    from tests.conftest import project_crd

    crd = project_crd()
    version = crd["spec"]["versions"][0]
    columns = {c["name"]: c["jsonPath"] for c in version["additionalPrinterColumns"]}
    assert columns["Progress"] == ".status.progress.summary" and columns["ETA"] == ".status.progress.eta"
    progress = version["schema"]["openAPIV3Schema"]["properties"]["status"]["properties"]["progress"]["properties"]
    assert {
        "summary",
        "eta",
        "step",
        "totalSteps",
        "epoch",
        "totalEpochs",
        "samplesPerSecond",
        "loss",
        "etaSeconds",
        "updateTime",
        "attempt",
        "final",
    } == set(progress)
