"""What the dev cluster takes from Volcano's module, without Go: the pinned release and its
binaries' names, the objects picked from its chart, the scheduler configuration."""

from __future__ import annotations

import pytest
import yaml

from ddpjob_devcluster.controlplane import build, volcano
from ddpjob_devcluster.controlplane.process import StartFailure


def chart_docs() -> list[dict]:
    """What `helm template` of Volcano's chart renders, cut down to names (and the conf)."""
    docs = [
        {"kind": "CustomResourceDefinition", "metadata": {"name": n}}
        for n in (*volcano.CRDS, "jobs.batch.volcano.sh", "jobflows.flow.volcano.sh")
    ]
    for who in ("scheduler", "controllers", "admission"):
        docs += [
            {"kind": "ServiceAccount", "metadata": {"name": f"volcano-{who}", "namespace": "volcano-system"}},
            {"kind": "ClusterRole", "metadata": {"name": f"volcano-{who}"}},
            {"kind": "ClusterRoleBinding", "metadata": {"name": f"volcano-{who}-role"}},
            {"kind": "Deployment", "metadata": {"name": f"volcano-{who}"}},
        ]
    conf = {
        "actions": "enqueue, allocate, backfill",
        "tiers": [{"plugins": [{"name": "priority"}, {"name": "gang", "enablePreemptable": False}]}],
    }
    docs.append(
        {
            "kind": "ConfigMap",
            "metadata": {"name": "volcano-scheduler-configmap"},
            "data": {"volcano-scheduler.conf": yaml.safe_dump(conf)},
        }
    )
    return docs


def test_the_pinned_release_and_its_binaries_are_named_as_upstream_ships_them() -> None:
    assert build.VOLCANO.version() == "v1.10.0"
    assert sorted(build.VOLCANO.binary_names()) == ["vc-controller-manager", "vc-scheduler"]
    assert build.COMPONENTS["volcano"] is build.VOLCANO


def test_the_chart_gives_the_crds_and_the_scheduler_and_controllers_rbac_only() -> None:
    picked = [(d["kind"], d["metadata"]["name"]) for d in volcano.objects(chart_docs())]
    assert picked[0] == ("Namespace", "volcano-system")
    assert [n for k, n in picked if k == "CustomResourceDefinition"] == list(volcano.CRDS)
    assert {n for k, n in picked if k != "CustomResourceDefinition"} == {
        "volcano-system",
        "volcano-scheduler",
        "volcano-controllers",
        "volcano-scheduler-role",
        "volcano-controllers-role",
    }  # no admission webhook, no vcjob or flow CRDs, no Deployments


def test_a_chart_without_an_expected_object_is_one_line_naming_it() -> None:
    docs = [d for d in chart_docs() if d["metadata"]["name"] != "volcano-scheduler-role"]
    with pytest.raises(StartFailure, match="no ClusterRoleBinding 'volcano-scheduler-role'"):
        volcano.objects(docs)


def test_the_scheduler_runs_the_charts_tiers_with_upstream_cis_actions() -> None:
    conf = volcano.scheduler_conf(chart_docs())
    assert conf["actions"] == "enqueue, allocate, backfill, reclaim, preempt"
    assert conf["tiers"][0]["plugins"][1] == {"name": "gang", "enablePreemptable": False}
    assert volcano.scheduler_conf(chart_docs(), volcano.PREEMPTING)["actions"] == "allocate, backfill, reclaim, preempt"
