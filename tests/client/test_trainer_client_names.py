"""`DDPJobClient` as a Kubeflow Trainer `TrainerClient` user calls it, against a stand-in
backend (what a cluster or `ddpjob run` would answer): TrainerClient's status names where
they mean the same and any other refused, callbacks on every poll, `step=` for the node,
list_jobs' filters, typed Events, `trainer=CustomTrainerContainer(...)`, errors that are
RuntimeErrors. The same calls on the real control plane: tests/system/test_python_client.py."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from datetime import UTC, datetime
from typing import Any

import pytest

from ddpjob.client import (
    ClusterError,
    CustomTrainerContainer,
    DDPJobClient,
    Event,
    InvalidSpec,
    Job,
    JobFailed,
    client as client_module,
    status_names,
)
from ddpjob.client.events import oldest_first
from ddpjob.client.kubernetes_backend import label_selector


def job(name: str = "j", phase: str | None = None, labels: Mapping[str, str] | None = None) -> Job:
    return Job.from_object(
        {
            "metadata": {"name": name, "namespace": "team", "labels": dict(labels or {})},
            "spec": {"nodes": 2},
            "status": {"phase": phase} if phase else {},
        }
    )


class StandIn:
    """A backend whose jobs go through the phases given, one a poll."""

    namespace = "team"

    def __init__(self, phases: list[str | None] | None = None, jobs: list[Job] | None = None):
        self.phases, self.jobs = list(phases or []), list(jobs or [])
        self.created: list[dict[str, Any]] = []
        self.asked: list[tuple[Any, ...]] = []

    def create(self, body: Mapping[str, Any]) -> None:
        self.created.append(dict(body))

    def get(self, name: str) -> Job:
        phase = self.phases.pop(0) if len(self.phases) > 1 else self.phases[0]
        return job(name, phase)

    def find(self, labels: Mapping[str, str] | None) -> list[Job]:
        self.asked.append(("find", labels))
        return [j for j in self.jobs if (labels or {}).items() <= dict(j.raw["metadata"]["labels"]).items()]

    def events(self, name: str) -> list[Event]:
        return [
            Event("DDPJob", name, "Succeeded", "done", datetime(2026, 1, 2, tzinfo=UTC)),
            Event("DDPJob", name, "Created", "made", datetime(2026, 1, 1, tzinfo=UTC)),
        ]

    def log_lines(
        self, name: str, node: int | None, rank: int | None, every: bool, follow: bool, tail: int | None
    ) -> Iterator[tuple[str, str]]:
        self.asked.append(("logs", name, node, rank, every, follow, tail))
        return iter([(f"{name}-{node or 0}", "a line")])

    def delete(self, name: str) -> None:
        self.asked.append(("delete", name))

    def suspend(self, name: str, suspend: bool) -> None:
        self.asked.append(("suspend", name, suspend))


def client(backend: StandIn) -> DDPJobClient:
    made = DDPJobClient.__new__(DDPJobClient)
    made._backend = backend
    return made


@pytest.fixture(autouse=True)
def no_sleep(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(client_module.time, "sleep", lambda seconds: None)


def test_complete_is_succeeded_and_created_is_pending() -> None:
    assert status_names.phases({"Complete"}) == {"Succeeded"}
    assert status_names.phases(["Created", "Running", "Failed"]) == {"Pending", "Running", "Failed"}
    assert status_names.phases("Suspended") == {"Suspended"}
    assert (job(phase="Succeeded").status, job().status, job(phase="Restarting").status) == (
        "Complete",
        "Created",
        "Restarting",
    )
    assert job().num_nodes == 2


def test_a_wait_for_complete_returns_the_succeeded_job_calling_back_on_every_poll(capsys) -> None:
    polls: list[str] = []
    done = client(StandIn([None, "Running", "Running", "Running", "Succeeded"])).wait_for_job_status(
        "j", status={"Complete"}, timeout=60, polling_interval=2, callbacks=[lambda j: polls.append(j.phase)]
    )
    assert done.phase == "Succeeded" and done.status == "Complete"
    assert polls == ["Pending", "Running", "Running", "Running", "Succeeded"]  # each poll, not each change
    assert capsys.readouterr().out.splitlines() == ["j: Pending", "j: Running", "j: Succeeded"]  # each change


@pytest.mark.parametrize("status", [{"Completed"}, {"Succeeded", "complete"}, "Done", set()])
def test_an_unknown_status_name_is_refused_before_any_poll(status: Any) -> None:
    backend = StandIn(["Succeeded"])
    with pytest.raises(ValueError, match=r"^wait_for_job_status\(status=\): ") as refused:
        client(backend).wait_for_job_status("j", status=status)
    said = str(refused.value)
    assert ("Complete (= Succeeded)" in said and "Created (= Pending)" in said) or "at least one" in said
    assert backend.phases == ["Succeeded"]  # not polled


def test_a_job_that_fails_or_never_gets_there_is_a_runtime_or_timeout_error() -> None:
    with pytest.raises(JobFailed, match=r"^j: Failed$") as failed:
        client(StandIn(["Running", "Failed"])).wait_for_job_status("j", status={"Complete"}, polling_interval=1)
    assert isinstance(failed.value, RuntimeError) and failed.value.job.phase == "Failed"
    assert client(StandIn(["Failed"])).wait_for_job_status("j", status={"Failed"}, progress=False).phase == "Failed"
    with pytest.raises(TimeoutError, match=r"^j: not Complete after 0s \(phase Running\)$"):
        client(StandIn(["Running"])).wait_for_job_status("j", status={"Complete"}, timeout=0, progress=False)
    refused: list[dict[str, Any]] = [{"polling_interval": 0}, {"timeout": -1}]  # a value each refuses
    for bad in refused:
        with pytest.raises(ValueError, match=f"^{next(iter(bad))}: must be"):
            client(StandIn(["Running"])).wait_for_job_status("j", **bad)


def test_step_is_the_node_as_trainer_client_names_it() -> None:
    backend = StandIn()
    made = client(backend)
    assert list(made.get_job_logs("j", step="node-1", follow=True)) == ["a line"]
    assert list(made.get_job_logs("j", "node-0")) == ["a line"]  # positional, as TrainerClient's order
    assert list(made.get_job_logs("j", all_nodes=True)) == ["[j-0] a line"]
    assert [a[2:] for a in backend.asked] == [
        (1, None, False, True, None),
        (0, None, False, False, None),
        (None, None, True, False, None),
    ]
    for step in ("dataset-initializer", "node-", "node--1", "node-1x", "Node-1"):
        with pytest.raises(ValueError, match=f"^step: {step!r} is not a step of a DDPJob: its steps are node-0"):
            made.get_job_logs("j", step=step)
    with pytest.raises(TypeError, match="give step= or node=/rank=/all_nodes=, not both"):
        made.get_job_logs("j", step="node-1", rank=3)


def test_list_jobs_filters_by_status_and_labels_and_has_no_runtime() -> None:
    backend = StandIn(
        jobs=[
            job("b", "Succeeded", {"team": "x"}),
            job("a", "Running", {"team": "x"}),
            job("c", "Failed", {"team": "y"}),
        ]
    )
    made = client(backend)
    assert [j.name for j in made.list_jobs()] == ["a", "b", "c"]
    assert [j.name for j in made.list_jobs(status={"Complete", "Failed"})] == ["b", "c"]
    assert [j.name for j in made.list_jobs(status={"Running"}, labels={"team": "x"})] == ["a"]
    assert ("find", {"team": "x"}) in backend.asked  # labels go to the backend: a label selector on a cluster
    with pytest.raises(ValueError, match=r"^list_jobs\(status=\): unknown status 'Done'"):
        made.list_jobs(status={"Done"})
    with pytest.raises(ValueError, match=r"^runtime: a DDPJob has no runtime"):
        made.list_jobs(runtime=object())


def test_a_label_filter_cannot_reach_the_selectors_syntax() -> None:
    assert label_selector({"team": "x", "ddpjob.io/sweep": "lr-0.1"}) == "team=x,ddpjob.io/sweep=lr-0.1"
    for labels in ({"team": "x,owner!=me"}, {"team in (a)": "x"}, {"a": "b c"}, {"": "x"}, {"a": 1}):
        with pytest.raises(ValueError, match=r"^labels"):
            label_selector(labels)  # type: ignore[arg-type]


def test_events_are_typed_and_oldest_first() -> None:
    events = client(StandIn()).get_job_events("j")
    assert [(e.reason, e.event_time.day if e.event_time else None) for e in events] == [
        ("Created", 1),
        ("Succeeded", 2),
    ]
    raw = {
        "metadata": {
            "name": "j.1",
            "managedFields": [{"manager": "kopf"}],
            "creationTimestamp": "2026-01-01T00:00:00Z",
        },
        "involvedObject": {"kind": "DDPJob", "name": "j", "uid": "u"},
        "reason": "Restarting",
        "message": "Pod j-1 failed",
        "type": "Warning",
        "count": 3,
        "lastTimestamp": "2026-11-29T07:00:37Z",
    }
    event = Event.from_object(raw)
    assert event == Event(
        "DDPJob", "j", "Restarting", "Pod j-1 failed", datetime(2026, 11, 29, 7, 0, 37, tzinfo=UTC), "Warning", 3
    )
    assert not hasattr(event, "metadata") and not hasattr(event, "managed_fields")
    # One second's Events: the eventTime's microseconds order them (the API lists them by name).
    second = "2026-11-29T07:00:37"
    same = [
        Event.from_object({"reason": r, "lastTimestamp": f"{second}Z", "eventTime": f"{second}.{u}Z"})
        for r, u in (("Succeeded", "900000"), ("Running", "000500"), ("Created", "000040"))
    ]
    assert [e.reason for e in oldest_first(same)] == ["Created", "Running", "Succeeded"]
    assert same[0].event_time == datetime(2026, 11, 29, 7, 0, 37, 900000, tzinfo=UTC)
    odd = Event.from_object({"reason": 7, "count": True, "eventTime": "not a time", "involvedObject": "x"})
    assert (odd.reason, odd.count, odd.event_time, odd.involved_object_name) == ("", 1, None, "")


def test_trainer_is_a_custom_trainer_container() -> None:
    backend = StandIn()
    made = client(backend)
    name = made.train(
        trainer=CustomTrainerContainer(
            image="ddpjob/trainer:test",
            num_nodes=2,
            resources_per_node={"gpu": 1, "cpu": "2", "memory": "4Gi"},
            env={"OMP_NUM_THREADS": "1"},
            command=["ddpjob-launch"],
        ),
        name="ported",
    )
    assert name == "ported"
    spec = backend.created[0]["spec"]
    assert (spec["image"], spec["nodes"], spec["gpusPerNode"], spec["command"]) == (
        "ddpjob/trainer:test",
        2,
        1,
        ["ddpjob-launch"],
    )
    assert spec["resources"] == {"requests": {"cpu": "2", "memory": "4Gi"}, "limits": {"cpu": "2", "memory": "4Gi"}}
    assert spec["env"] == [{"name": "OMP_NUM_THREADS", "value": "1"}]
    with pytest.raises(ValueError, match=r"^trainer: a DDPJob runs a container: give a CustomTrainerContainer"):
        made.train(trainer=lambda: None)  # type: ignore[arg-type]  # TrainerClient's CustomTrainer(func=...)
    for argument in ("runtime", "initializer", "options"):
        with pytest.raises(ValueError, match=f"^{argument}: a DDPJob has no {argument}"):
            extra: dict[str, Any] = {argument: "torch-distributed"}
            made.train(trainer=CustomTrainerContainer(image="i"), **extra)
    with pytest.raises(TypeError, match="not both"):
        made.train({"spec": {"image": "i"}}, trainer=CustomTrainerContainer(image="i"))
    with pytest.raises(InvalidSpec, match=r"spec\.nodes"):
        made.train(trainer=CustomTrainerContainer(image="i", num_nodes=0))
    assert len(backend.created) == 1  # nothing refused was sent


def test_the_errors_are_the_kinds_trainer_client_raises() -> None:
    assert issubclass(ClusterError, RuntimeError) and issubclass(JobFailed, RuntimeError)
    assert issubclass(InvalidSpec, ValueError)


def test_one_backend_configuration_or_the_kubeconfig_arguments() -> None:
    from ddpjob.client import KubernetesBackendConfig

    with pytest.raises(TypeError, match="not both"):
        DDPJobClient(namespace="a", backend_config=KubernetesBackendConfig())
    with pytest.raises(ValueError, match=r"^backend_config: not a backend configuration"):
        DDPJobClient(backend_config=object())  # type: ignore[arg-type]


def test_the_phases_are_the_job_logics_own() -> None:
    from ddpjob.job import decision

    assert set(status_names.PHASES) == {
        decision.PENDING,
        decision.RUNNING,
        decision.RESTARTING,
        decision.SUSPENDED,
        decision.SUCCEEDED,
        decision.FAILED,
    }
    assert set(decision.FINISHED) == status_names.TERMINAL
