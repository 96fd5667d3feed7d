"""The development cluster's scheduler against the emulator's store: Pods one at a time
(so a gang can be placed in part), the real FitError message, gates, other schedulers'
Pods left alone, and the native PodGroup placed all or nothing."""

import pytest

from ddpjob_devcluster.apiserver.emulator import KubeEmulator
from ddpjob_devcluster.scheduler.node_fit import fit_error
from ddpjob_devcluster.scheduler.pod_groups import POD_GROUPS, PROTECTION_FINALIZER, serve_native_pod_groups
from ddpjob_devcluster.scheduler.scheduler import NODES, PODS, NodeSpec, Scheduler, gpu_nodes

INSUFFICIENT_GPU = "0/6 nodes are available: 6 Insufficient nvidia.com/gpu."


@pytest.fixture
def store():
    emulator = KubeEmulator()  # its store alone: no server thread needed
    serve_native_pod_groups(emulator.store)
    return emulator.store


@pytest.fixture
def scheduler(store):
    s = Scheduler(store)
    s.add_nodes(gpu_nodes(6))
    return s


def pod(name, gpus=1, group=None, **spec):
    body = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "labels": {"app": name.rsplit("-", 1)[0]}},
        "spec": {
            "containers": [
                {"name": "c", "image": "x", "resources": {"limits": {"nvidia.com/gpu": str(gpus)}} if gpus else {}}
            ],
            **spec,
        },
    }
    if group:
        body["spec"]["schedulingGroup"] = {"podGroupName": group}
    return body


def pod_group(name, min_count):
    return {
        "apiVersion": "scheduling.k8s.io/v1beta1",
        "kind": "PodGroup",
        "metadata": {"name": name},
        "spec": {"schedulingPolicy": {"gang": {"minCount": min_count}}},
    }


def create(store, *bodies):
    for body in bodies:
        store.create(PODS if body["kind"] == "Pod" else POD_GROUPS, "default", body)


def get(store, name):
    return store.peek(PODS, "default", name)


def scheduled(store, name):
    cond = next(
        (c for c in (get(store, name).get("status") or {}).get("conditions", []) if c["type"] == "PodScheduled"), None
    )
    return get(store, name)["spec"].get("nodeName"), cond


def test_nodes_have_gpu_capacity(store, scheduler):
    nodes = store.peek_all(NODES, None)
    assert len(nodes) == 6 and all(n["status"]["allocatable"]["nvidia.com/gpu"] == "1" for n in nodes)


def test_pods_are_placed_one_at_a_time_so_two_gangs_split(store, scheduler):
    # arrival order: 3 of a, 4 of b, the last of a
    create(store, *(pod(f"a-{i}") for i in range(3)), *(pod(f"b-{i}") for i in range(4)), pod("a-3"))
    assert scheduler.schedule_once() == 6
    nodes = [scheduled(store, n)[0] for n in ("a-0", "a-1", "a-2", "b-0", "b-1", "b-2")]
    assert None not in nodes and len(set(nodes)) == 6  # one GPU each
    for name in ("b-3", "a-3"):
        node, cond = scheduled(store, name)
        assert node is None
        assert (cond["status"], cond["reason"], cond["message"]) == ("False", "Unschedulable", INSUFFICIENT_GPU)
    assert scheduled(store, "a-0")[1]["status"] == "True"
    assert scheduler.schedule_once() == 0  # stuck: nothing frees a GPU


def test_finished_pods_free_their_node(store, scheduler):
    create(store, *(pod(f"a-{i}") for i in range(7)))
    scheduler.schedule_once()
    assert scheduled(store, "a-6")[0] is None
    store.patch(PODS, "default", "a-0", "status", "application/merge-patch+json", {"status": {"phase": "Succeeded"}})
    assert scheduler.schedule_once() == 1 and scheduled(store, "a-6")[0] is not None


def test_a_gang_is_placed_all_or_nothing(store, scheduler):
    create(
        store,
        pod_group("a", 4),
        pod_group("b", 4),
        *(pod(f"a-{i}", group="a") for i in range(3)),
        *(pod(f"b-{i}", group="b") for i in range(4)),
    )
    assert scheduler.schedule_once() == 4  # a has 3 of its 4 Pods: held, b fits whole
    assert all(scheduled(store, f"b-{i}")[0] for i in range(4))
    assert all(scheduled(store, f"a-{i}") == (None, None) for i in range(3))  # PreEnqueue: no condition
    create(store, pod("a-3", group="a"))
    assert scheduler.schedule_once() == 0  # 2 GPUs left, a needs 4: none placed
    assert all(scheduled(store, f"a-{i}")[0] is None for i in range(4))
    assert scheduled(store, "a-3")[1]["reason"] == "Unschedulable"
    # kube-scheduler 1.37's words (tests/gangs/test_gang_real.py reads them from the real
    # one): the Pod that did not fit says why, the rest of the gang why the gang waits.
    messages = {scheduled(store, f"a-{i}")[1]["message"] for i in range(4)}
    assert messages == {
        "0/6 nodes are available: 6 Insufficient nvidia.com/gpu.",
        "pod group is unschedulable, minCount (4) cannot be satisfied: 2 scheduled, 1 remaining",
    }
    for i in range(4):
        store.patch(
            PODS, "default", f"b-{i}", "status", "application/merge-patch+json", {"status": {"phase": "Succeeded"}}
        )
    assert scheduler.schedule_once() == 4


def test_a_gang_waits_for_its_pod_group(store, scheduler):
    create(store, *(pod(f"a-{i}", group="a") for i in range(2)))
    assert scheduler.schedule_once() == 0
    create(store, pod_group("a", 2))
    assert scheduler.schedule_once() == 2


def test_gated_pods_are_not_placed(store, scheduler):
    create(store, pod("g-0", schedulingGates=[{"name": "kueue.x-k8s.io/admission"}]))
    assert scheduler.schedule_once() == 0
    node, cond = scheduled(store, "g-0")
    assert node is None and cond["reason"] == "SchedulingGated"
    store.patch(PODS, "default", "g-0", None, "application/merge-patch+json", {"spec": {"schedulingGates": None}})
    assert scheduler.schedule_once() == 1


def test_other_schedulers_pods_are_left_alone(store, scheduler):
    create(store, pod("v-0", schedulerName="volcano"))
    assert scheduler.schedule_once() == 0 and scheduled(store, "v-0") == (None, None)


def test_node_selector_and_cpu_reasons(store):
    s = Scheduler(store)
    s.add_nodes([NodeSpec("cpu-0", cpu="2", labels={"pool": "cpu"}), NodeSpec("gpu-0", gpus=1, cpu="2")])
    body = pod("p-0", gpus=0, nodeSelector={"pool": "gpu"})
    create(store, body)
    s.schedule_once()
    assert scheduled(store, "p-0")[1]["message"] == (
        "0/2 nodes are available: 2 node(s) didn't match Pod's node affinity/selector."
    )
    big = pod("p-1", gpus=0)
    big["spec"]["containers"][0]["resources"] = {"requests": {"cpu": "4"}}
    create(store, big)
    s.schedule_once()
    assert scheduled(store, "p-1")[1]["message"] == "0/2 nodes are available: 2 Insufficient cpu."


def test_fit_error_format():
    from collections import Counter

    assert fit_error(3, Counter({"Insufficient cpu": 2, "node(s) had untolerated taint {a: b}": 1})) == (
        "0/3 nodes are available: 1 node(s) had untolerated taint {a: b}, 2 Insufficient cpu."
    )


def test_a_deleted_pod_group_waits_for_its_pods(store, scheduler):
    create(store, pod_group("a", 2), *(pod(f"a-{i}", group="a") for i in range(2)))
    scheduler.schedule_once()
    assert store.peek(POD_GROUPS, "default", "a")["metadata"]["finalizers"] == [PROTECTION_FINALIZER]
    store.delete(POD_GROUPS, "default", "a", None)
    scheduler.schedule_once()
    assert store.peek(POD_GROUPS, "default", "a")["metadata"]["deletionTimestamp"]  # Pods still run
    for i in range(2):
        store.patch(
            PODS, "default", f"a-{i}", "status", "application/merge-patch+json", {"status": {"phase": "Succeeded"}}
        )
    scheduler.schedule_once()
    assert store.peek(POD_GROUPS, "default", "a") is None
