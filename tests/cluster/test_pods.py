"""The Pod a user means (cluster/pods.py): by node, by global rank, or every Pod."""

from __future__ import annotations

from typing import Any

import pytest

from ddpjob.cluster.connection import ClusterError
from ddpjob.cluster.pods import select

JOB = {
    "apiVersion": "ddpjob.io/v1alpha1",
    "kind": "DDPJob",
    "metadata": {"name": "j", "namespace": "team"},
    "spec": {"nodes": 3, "nprocPerNode": 4, "image": "i"},
    "status": {"phase": "Running"},
}


def pod(name: str, node: int) -> dict[str, Any]:
    return {"metadata": {"name": name, "labels": {"ddpjob.io/job-name": "j", "ddpjob.io/node-rank": str(node)}}}


PODS = [pod("j-0", 0), pod("j-1", 1), pod("j-2", 2)]


@pytest.mark.parametrize(
    "asked, expected",
    [
        ({}, ["j-0"]),
        ({"node": 2}, ["j-2"]),
        ({"rank": 0}, ["j-0"]),
        ({"rank": 5}, ["j-1"]),  # 4 processes a node: ranks 4..7 on node 1
        ({"rank": 11}, ["j-2"]),
        ({"every": True}, ["j-0", "j-1", "j-2"]),
    ],
)
def test_a_node_a_rank_or_every_pod(asked: dict[str, Any], expected: list[str]) -> None:
    assert [p["metadata"]["name"] for p in select(JOB, PODS, **asked)] == expected


def test_a_rank_outside_the_world_or_a_node_without_a_pod_is_one_line() -> None:
    with pytest.raises(ClusterError, match=r"^--rank: must be in 0..11 for this job \(got 12\)$"):
        select(JOB, PODS, rank=12)
    with pytest.raises(ClusterError, match=r"^not found: no Pod of node 1 for ddpjob j \(phase Running\)$"):
        select(JOB, [PODS[0]], node=1)


def test_the_labels_name_the_node_and_the_api_says_which_label() -> None:
    from ddpjob.api import names

    assert (names.LABEL_JOB_NAME, names.LABEL_NODE_RANK) == ("ddpjob.io/job-name", "ddpjob.io/node-rank")
