"""`ddpjob describe` laid out as `kubectl describe` lays out an object: a golden output
(tests/cli/golden/describe-*.txt; set UPDATE_GOLDEN=1 to rewrite them after a
deliberate change, then read the diff)."""

from __future__ import annotations

import os
import pathlib
from datetime import UTC, datetime
from typing import Any

import pytest

from ddpjob import times
from ddpjob.cli.describe import describe

GOLDEN = pathlib.Path(__file__).parent / "golden"
NOW = datetime(2026, 11, 24, 7, 30, 0, tzinfo=UTC)

JOB: dict[str, Any] = {
    "metadata": {"name": "mnist-cpu", "namespace": "team-a", "creationTimestamp": "2026-11-24T07:20:00Z"},
    "spec": {
        "nodes": 2,
        "nprocPerNode": "auto",
        "backend": "auto",
        "image": "ddpjob/trainer:0.2.0-cpu",
        "gpusPerNode": 0,
        "restartPolicy": "OnFailure",
        "maxRestarts": 3,
        "activeDeadlineSeconds": 1800,
        "suspend": False,
        "command": ["ddpjob-launch"],
        "args": ["ddpjob-train", "--epochs", "3"],
    },
    "status": {
        "phase": "Running",
        "message": "2/2 nodes running",
        "readyNodes": 2,
        "scheduledNodes": 2,
        "restarts": 1,
        "worldSize": 2,
        "startTime": "2026-11-24T07:20:02Z",
        "progress": {
            "summary": "epoch 2/3 step 120/300 (40%)",
            "attempt": 1,
            "step": 120,
            "totalSteps": 300,
            "samplesPerSecond": 5120.5,
            "loss": 0.41,
            "eta": "1m30s",
            "etaSeconds": 90,
            "updateTime": "2026-11-24T07:29:48Z",
        },
        "lastFailure": {
            "pod": "mnist-cpu-1",
            "nodeRank": 1,
            "exitCode": 137,
            "reason": "OOMKilled",
            "message": "the container used more memory\nthan its limit",
            "retryable": True,
            "errorLine": "RuntimeError: out of memory",
            "sameOnAttempts": 1,
            "time": "2026-11-24T07:24:00Z",
        },
        "conditions": [
            {
                "type": "Running",
                "status": "True",
                "reason": "Running",
                "message": "2/2 nodes running",
                "lastTransitionTime": "2026-11-24T07:25:10Z",
            },
            {
                "type": "Restarting",
                "status": "False",
                "reason": "Running",
                "message": "2/2 nodes running",
                "lastTransitionTime": "2026-11-24T07:25:10Z",
            },
            {
                "type": "GangScheduled",
                "status": "False",
                "reason": "GangIntegrationUnavailable",
                "message": "spec.scheduling.gang: volcano is not enabled",
                "lastTransitionTime": "2026-11-24T07:20:01Z",
            },
        ],
    },
}
PODS: list[dict[str, Any]] = [
    {
        "metadata": {
            "name": f"mnist-cpu-{i}",
            "creationTimestamp": "2026-11-24T07:25:00Z",
            "labels": {"ddpjob.io/node-rank": str(i), "ddpjob.io/restart-count": "1"},
        },
        "status": {"phase": "Running", "containerStatuses": [{"name": "trainer", "state": {"running": {}}}]},
    }
    for i in range(2)
]
EVENTS: list[dict[str, Any]] = [
    {
        "type": "Normal",
        "reason": "Created",
        "message": "created 2 Pods of attempt 0 (2 nodes x 1 process)",
        "lastTimestamp": "2026-11-24T07:20:01.788360+00:00",
        "source": {"component": "ddpjob-operator"},
    },
    {
        "type": "Warning",
        "reason": "Restarting",
        "message": "Pod mnist-cpu-1 failed (exit code 137, OOMKilled)",
        "firstTimestamp": "2026-11-24T07:22:00Z",
        "lastTimestamp": "2026-11-24T07:24:00Z",
        "count": 2,
        "source": {"component": "ddpjob-operator"},
    },
    {
        "type": "Normal",
        "reason": "Running",
        "message": "2/2 nodes running",
        "eventTime": "2026-11-24T07:25:10.000000Z",
        "reportingComponent": "ddpjob-operator",
    },
]


def check_golden(name: str, text: str) -> None:
    path = GOLDEN / name
    if os.environ.get("UPDATE_GOLDEN"):
        path.write_text(text + "\n")
    assert text + "\n" == path.read_text()


def test_describe_a_running_job_golden() -> None:
    check_golden("describe-running.txt", describe(JOB, PODS, EVENTS, NOW))


def test_describe_a_new_job_golden() -> None:
    job = {
        "metadata": {"name": "hello", "namespace": "default", "creationTimestamp": "2026-11-24T07:29:55Z"},
        "spec": {"nodes": 1, "image": "x", "suspend": True},
    }
    check_golden("describe-new.txt", describe(job, [], [], NOW))


ELASTIC: dict[str, Any] = {
    "metadata": {"name": "elastic", "namespace": "team-a", "creationTimestamp": "2026-11-24T07:20:00Z"},
    "spec": {
        "nodes": 3,
        "elastic": {"minNodes": 2, "maxNodes": 4},
        "nprocPerNode": 1,
        "image": "ddpjob/trainer:x",
        "checkpoint": {"claimName": "ckpt", "mountPath": "/checkpoints"},
        "scheduling": {"gang": "kubernetes", "minAvailable": 2},
        "command": ["ddpjob-launch"],
    },
    "status": {
        "phase": "Running",
        "message": "3/3 nodes running (elastic, 2 to 4)",
        "nodes": "3/3",
        "desiredNodes": 3,
        "readyNodes": 3,
        "restarts": 0,
        "resizes": 2,
        "worldSize": 3,
        "startTime": "2026-11-24T07:20:02Z",
        "lostIndices": [
            {"index": 1, "losses": 2, "lostAt": "2026-11-24T07:28:00Z", "replaced": True},
            {"index": 2, "losses": 1, "lostAt": "2026-11-24T07:29:30Z"},
        ],
    },
}
RESIZE_EVENTS = [
    {
        "type": "Normal",
        "reason": "Resized",
        "message": "spec.nodes changed from 4 to 3",
        "lastTimestamp": "2026-11-24T07:27:00Z",
        "source": {"component": "ddpjob-operator"},
    },
    {
        "type": "Warning",
        "reason": "NodeLost",
        "message": "Pod elastic-2 failed: training goes on with 2 nodes",
        "lastTimestamp": "2026-11-24T07:29:30Z",
        "source": {"component": "ddpjob-operator"},
    },
]


def test_describe_an_elastic_job_golden() -> None:
    """The range it trains in, its checkpoint and gang, its size as the operator acted on it,
    its resizes, and the indices it lost lately."""
    check_golden("describe-elastic.txt", describe(ELASTIC, [], RESIZE_EVENTS, NOW))


def test_describe_says_the_range_checkpoint_resizes_and_lost_indices() -> None:
    lines = describe(ELASTIC, [], RESIZE_EVENTS, NOW).splitlines()
    assert "  elastic:       2 to 4 nodes" in lines
    assert "  checkpoint:    claimName ckpt at /checkpoints" in lines
    assert [line.split() for line in lines if line.startswith(("  resizes:", "  desiredNodes:", "  nodes:"))] == [
        ["nodes:", "3"],
        ["nodes:", "3/3"],
        ["desiredNodes:", "3"],
        ["resizes:", "2"],
    ]
    lost = lines[lines.index("Lost Indices:") + 1 : lines.index("Lost Indices:") + 5]
    assert [line.split() for line in lost] == [
        ["Index", "Losses", "Lost", "Replaced"],
        ["-----", "------", "----", "--------"],
        ["1", "2", "2m", "true"],
        ["2", "1", "30s", "false"],
    ]
    volume = {**ELASTIC, "spec": {**ELASTIC["spec"], "checkpoint": {"volume": {"nfs": {"server": "s", "path": "/x"}}}}}
    assert "  checkpoint:    volume nfs at /checkpoints" in describe(volume, [], [], NOW).splitlines()


def test_a_rigid_job_shows_no_elastic_only_fields() -> None:
    job = {**JOB, "status": {**JOB["status"], "desiredNodes": 2}}
    text = describe(job, [], [], NOW)
    assert "desiredNodes" not in text and "Lost Indices" not in text and "elastic" not in text


def test_describe_is_aligned_and_says_values_as_yaml_does() -> None:
    text = describe(JOB, PODS, EVENTS, NOW)
    assert "False" not in text.replace("Status  ", "").split("Conditions:")[0]  # suspend: false, not Python's
    assert "  suspend:                false" in text.splitlines()  # two spaces after the longest label
    assert "  activeDeadlineSeconds:  1800" in text.splitlines()
    # Every value of a section starts in one column; table cells never run together.
    conditions = text.split("Conditions:\n")[1].split("\nPods:")[0].splitlines()
    starts = {line.index("Reason") for line in conditions[:1]} | {
        line.index("GangIntegrationUnavailable") for line in conditions if "Gang" in line
    }
    assert len(starts) == 1
    assert "ddpjob-operator" in text and "kopf" not in text
    assert "6m (x2 over 8m)" in text  # an Event seen twice


def test_describe_shows_the_jobs_own_events_not_its_services() -> None:
    job = {**JOB, "metadata": {**JOB["metadata"], "uid": "job-uid"}}
    service_event = {
        "type": "Warning",
        "reason": "FailedToUpdateEndpointSlices",
        "message": "loopback",
        "lastTimestamp": "2026-11-24T07:25:00Z",
        "involvedObject": {"kind": "Service", "uid": "svc-uid"},
    }
    own = {**EVENTS[0], "involvedObject": {"kind": "DDPJob", "uid": "job-uid"}}
    text = describe(job, [], [service_event, own], NOW)
    assert "FailedToUpdateEndpointSlices" not in text and "Created" in text


def test_events_of_one_second_keep_the_order_they_happened_in() -> None:
    """lastTimestamp has whole seconds; the eventTime (microseconds) orders a job that was
    created, ran and succeeded in one second, as the API lists them in any order."""
    second = "2026-11-24T07:25:00"
    made = [
        {"reason": reason, "type": "Normal", "lastTimestamp": f"{second}Z", "eventTime": f"{second}.{micros:06d}Z"}
        for reason, micros in (("Succeeded", 900_000), ("Running", 5_000), ("Created", 40))
    ]
    text = describe(JOB, [], made, NOW).split("Events:")[1]
    assert text.index("Created") < text.index("Running") < text.index("Succeeded")
    later = {**made[2], "reason": "Restarting", "lastTimestamp": "2026-11-24T07:26:00Z"}  # seen again later
    assert times.event_order(later) > times.event_order(made[0])


@pytest.mark.parametrize(
    "seconds,expected",
    [
        (-5, "<invalid>"),
        (-0.5, "0s"),
        (0, "0s"),
        (119, "119s"),
        (120, "2m"),
        (200, "3m20s"),
        (600, "10m"),
        (179 * 60, "179m"),
        (3 * 3600, "3h"),
        (3 * 3600 + 600, "3h10m"),
        (47 * 3600, "47h"),
        (50 * 3600, "2d2h"),
        (400 * 86400, "400d"),
        (3 * 365 * 86400 + 5 * 86400, "3y5d"),
        (3 * 365 * 86400, "3y"),
        (9 * 365 * 86400 + 86400, "9y"),
    ],
)
def test_ages_as_kubectl_says_them(seconds: float, expected: str) -> None:
    assert times.age(seconds) == expected


def test_the_loss_curve_is_drawn_under_progress() -> None:
    """`ddpjob describe` hands in the losses Pod 0 logged, as one line (ddpjob.curves.sparkline)."""
    curve = "loss 2.302 █▇▆▄▃▂▁▁ 0.118 (48 points)"
    lines = describe(JOB, PODS, EVENTS, NOW, loss_curve=curve).splitlines()
    progress = lines.index("Progress:")
    updated = next(i for i, line in enumerate(lines) if line.startswith("  updateTime:"))
    assert lines[updated + 1] == f"  curve:             {curve}"  # the section's column, after its fields
    assert progress < updated
    assert describe(JOB, PODS, EVENTS, NOW) == describe(JOB, PODS, EVENTS, NOW, loss_curve=None)
