"""What the dev cluster installs of Kueue, read from its pinned module: every webhook and
conversion webhook reaches the manager on loopback (a URL, the cluster's CA), upstream's
namespaceSelector patches are kept, and the manager's roles are bound to its identity.
Needs the module in the Go module cache (its build downloads it)."""

from __future__ import annotations

import pytest

from ddpjob_devcluster.controlplane import build, go_module, kueue

URL, CA = "https://127.0.0.1:9443", "Q0E="


@pytest.fixture(scope="module", autouse=True)
def module_present() -> None:
    if build.shutil.which("go") is None:
        pytest.skip("no Go toolchain on PATH: the Kueue module cannot be located")
    try:
        build.module_dir(build.KUEUE)
    except go_module.BuildError as exc:
        pytest.skip(f"the Kueue module is not in the Go module cache ({exc}); `make gang-schedulers` fetches it")


def test_every_webhook_calls_the_manager_on_loopback_with_the_clusters_ca() -> None:
    configs = kueue.webhooks(URL, CA)
    assert {c["kind"] for c in configs} == {"MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"}
    hooks = [h for c in configs for h in c["webhooks"]]
    assert hooks and all(
        h["clientConfig"]["url"].startswith(URL + "/")
        and h["clientConfig"]["caBundle"] == CA
        and "service" not in h["clientConfig"]
        for h in hooks
    )
    pod = {h["name"]: h for h in hooks}["mpod.kb.io"]
    assert pod["clientConfig"]["url"] == URL + "/mutate--v1-pod"
    excluded = pod["namespaceSelector"]["matchExpressions"][0]
    assert excluded["operator"] == "NotIn" and set(excluded["values"]) == {"kube-system", "kueue-system"}


def test_crds_convert_through_the_manager_and_roles_are_bound_to_it() -> None:
    crds = {c["metadata"]["name"]: c for c in kueue.crds(URL, CA)}
    assert "workloads.kueue.x-k8s.io" in crds and "clusterqueues.kueue.x-k8s.io" in crds
    conversion = crds["workloads.kueue.x-k8s.io"]["spec"]["conversion"]
    assert conversion["strategy"] == "Webhook" and conversion["webhook"]["clientConfig"] == {
        "url": URL + "/convert",
        "caBundle": CA,
    }
    objects = kueue.rbac()
    roles = [o for o in objects if o["kind"] in ("Role", "ClusterRole")]
    bindings = [o for o in objects if o["kind"].endswith("Binding")]
    assert len(roles) == len(bindings) == len(kueue.MANAGER_ROLES)
    assert all(b["subjects"][0]["name"] == kueue.USER for b in bindings)
    assert all(r["metadata"].get("namespace") == kueue.NAMESPACE for r in roles if r["kind"] == "Role")


def test_queue_objects_give_a_gpu_quota_and_preempt_lower_priority() -> None:
    flavor, cq, lq = kueue.queue_objects("q", "team", {"nvidia.com/gpu": "6"})
    assert (flavor["kind"], cq["kind"], lq["kind"]) == ("ResourceFlavor", "ClusterQueue", "LocalQueue")
    assert cq["spec"]["preemption"] == {"withinClusterQueue": "LowerPriority"}
    assert cq["spec"]["resourceGroups"][0]["flavors"][0]["resources"] == [
        {"name": "nvidia.com/gpu", "nominalQuota": "6"}
    ]
    assert lq["metadata"]["namespace"] == "team" and lq["spec"]["clusterQueue"] == "q"
