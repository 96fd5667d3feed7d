"""The operator's view of the Nodes (operator/nodes.py) and the node-health rules it reads
them with (job/node_health.py): the Ready condition, the conditions and taints a cluster
admin names as unhealthy, a deleted Node remembered as gone, and a change said once."""

from __future__ import annotations

import pytest

from ddpjob.job import node_health
from ddpjob.job.node_health import NodeRules, NodeState, Taint
from ddpjob.operator import settings
from ddpjob.operator.nodes import MAX_GONE, Nodes


def node(ready="True", conditions=(), taints=()):
    return {
        "metadata": {"name": "n"},
        "spec": {"taints": list(taints)},
        "status": {"conditions": [{"type": "Ready", "status": ready}, *conditions]},
    }


RULES = NodeRules(
    node_health.parse_conditions("KernelDeadlock,GPUHealthy=False"),
    node_health.parse_taints("nvidia.com/gpu-unhealthy,example.com/pool=bad:NoExecute"),
)


def test_rules_parse_as_the_chart_writes_them_and_refuse_what_they_cannot_mean():
    assert RULES.conditions == (("KernelDeadlock", "True"), ("GPUHealthy", "False"))
    assert RULES.taints == (Taint("nvidia.com/gpu-unhealthy"), Taint("example.com/pool", "bad", "NoExecute"))
    assert node_health.parse_conditions(" ") == () and not NodeRules()
    for bad in ("Ready=Maybe", "a/b", "x=", "-x"):
        with pytest.raises(ValueError, match="is not TYPE or TYPE=STATUS"):
            node_health.parse_conditions(bad)
    for bad in ("k:Sometimes", "k=v w", "=v", "k=:NoSchedule"):
        with pytest.raises(ValueError, match=r"is not KEY\[=VALUE\]\[:EFFECT\]"):
            node_health.parse_taints(bad)
    with pytest.raises(ValueError, match="at most 32"):
        node_health.parse_taints(",".join(f"k{i}" for i in range(33)))
    # A bad value stops the operator's start with one line naming the variable.
    with pytest.raises(settings.SettingsError, match=r"^DDPJOB_UNHEALTHY_NODE_TAINTS: 'k:Sometimes' is not"):
        settings.from_env({"DDPJOB_UNHEALTHY_NODE_TAINTS": "k:Sometimes"})
    assert settings.from_env({"DDPJOB_UNHEALTHY_NODE_CONDITIONS": "KernelDeadlock"}).node_rules.conditions == (
        ("KernelDeadlock", "True"),
    )


def test_a_node_is_read_for_its_ready_condition_and_what_the_rules_name():
    assert node_health.read(node(), RULES) == NodeState("True")
    assert node_health.read({"status": {}}, RULES) == NodeState("")
    assert node_health.read({"status": "junk", "spec": []}, RULES) == NodeState("")
    deadlock = {"type": "KernelDeadlock", "status": "True", "reason": "DockerHung", "message": "task hung\x1b[2J"}
    state = node_health.read(node(conditions=[deadlock]), RULES)
    assert state.unhealthy == "condition KernelDeadlock=True (task hung\\x1b[2J)"  # the node's words, escaped
    assert node_health.read(node(conditions=[{**deadlock, "status": "False"}]), RULES).unhealthy is None
    gpu = node(taints=[{"key": "nvidia.com/gpu-unhealthy", "value": "xid", "effect": "NoSchedule"}])
    assert node_health.read(gpu, RULES).unhealthy == "taint nvidia.com/gpu-unhealthy=xid:NoSchedule"
    # A value or an effect named by the rule must match.
    pool = {"key": "example.com/pool", "value": "bad", "effect": "NoSchedule"}
    assert node_health.read(node(taints=[pool]), RULES).unhealthy is None
    assert node_health.read(node(taints=[{**pool, "effect": "NoExecute"}]), RULES).unhealthy is not None
    # No rules: nothing is unhealthy, whatever the node says.
    assert node_health.read(node(conditions=[deadlock], taints=[pool]), NodeRules()).unhealthy is None


def test_the_cache_says_each_change_once_and_remembers_a_deleted_node_as_gone():
    nodes = Nodes(RULES)
    assert nodes.seen("a", node()) is True
    assert nodes.seen("a", node()) is False  # a heartbeat that changes nothing we read
    assert nodes.seen("a", node("Unknown")) is True
    assert nodes.ready_of(["a", "never-seen", None]) == {"a": "Unknown"}
    assert nodes.seen("b", node(taints=[{"key": "nvidia.com/gpu-unhealthy", "effect": "NoSchedule"}])) is True
    assert nodes.unhealthy() == {"b": "taint nvidia.com/gpu-unhealthy:NoSchedule"}
    assert nodes.seen("b", node()) is True and nodes.unhealthy() == {}
    assert nodes.seen("a", None) is True and nodes.seen("a", None) is False
    assert nodes.ready_of(["a"]) == {"a": None}
    assert nodes.seen("a", node()) is True and nodes.ready_of(["a"]) == {"a": "True"}  # back again
    for i in range(MAX_GONE + 1):
        nodes.seen(f"gone-{i}", None)
    assert nodes.ready_of(["gone-0", f"gone-{MAX_GONE}"]) == {f"gone-{MAX_GONE}": None}  # bounded


def test_a_nodes_change_reconciles_the_jobs_with_a_pod_on_it_and_nothing_else_does():
    from ddpjob.job.observe import PodState

    def on(node):
        return PodState(name="p", node_rank=0, restart_count=0, phase="Running", node_name=node)

    pods = [
        (("ns", "a"), ("u1", on("n1"))),
        (("ns", "b"), ("u2", on("n2"))),
        (("ns", "c"), ("u3", on(None))),
        (("other", "d"), ("u4", on("n1"))),
    ]
    nodes = Nodes(RULES)
    assert nodes.to_reconcile("n1", node(), pods) == {("ns", "a"), ("other", "d")}  # first seen
    assert nodes.to_reconcile("n1", node(), pods) == set()  # nothing the job logic reads changed
    assert nodes.to_reconcile("n1", node("Unknown"), pods) == {("ns", "a"), ("other", "d")}
    assert nodes.to_reconcile("n2", None, pods) == {("ns", "b")}  # deleted
