"""Malformed and well-formed DDPJobs, shared by test_validation.py and test_crd_parity.py.

Each bad case names the field path its error must carry. Every bad job (and every good
one) runs `sh -c "touch MARKER"`, so a `ddpjob run` that started anything would leave
the marker behind; the tests replace MARKER with a path in their tmp dir.

A case is a body (a dict, written to a file with yaml.safe_dump, which quotes whatever
needs quoting) or raw YAML text, for mistakes that only exist in YAML's own syntax
(`value: on` is a boolean, `name: &anchor` is an anchor with a null value).
"""

from __future__ import annotations

import copy
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "manifests" / "examples"

MARKER = "MARKER"
MARKER_COMMAND = ["sh", "-c", f"touch {MARKER}"]
DROP = object()  # a value in job(...) that removes the key


def job(spec: dict | None = None, metadata: dict | None = None, root: dict | None = None) -> dict:
    """A valid one-node job with the given changes; DROP removes a key."""
    body: dict[str, Any] = {
        "apiVersion": "ddpjob.io/v1alpha1",
        "kind": "DDPJob",
        "metadata": {"name": "bad-job"},
        "spec": {"nodes": 1, "nprocPerNode": 1, "image": "ddpjob/trainer:0.1.0", "command": MARKER_COMMAND},
    }
    for target, changes in ((body["metadata"], metadata), (body["spec"], spec), (body, root)):
        for key, value in (changes or {}).items():
            if value is DROP:
                target.pop(key, None)
            else:
                target[key] = value
    return copy.deepcopy(body)


def named(name: Any, **spec: Any) -> dict:
    return job(spec, {"name": name})


def env(*entries: dict) -> dict:
    return job({"env": list(entries)})


def raw(spec_lines: str, name_line: str = "name: bad-job") -> str:
    """YAML text of a job whose spec (or name) is written as it would be typed."""
    return (
        "apiVersion: ddpjob.io/v1alpha1\nkind: DDPJob\nmetadata:\n  " + name_line + "\n"
        "spec:\n  image: ddpjob/trainer:0.1.0\n  command: [sh, -c, touch MARKER]\n" + spec_lines
    )


@dataclass(frozen=True)
class Case:
    id: str
    path: str  # the field path an error must name
    body: Any = None
    text: str | None = None

    def yaml_text(self) -> str:
        return self.text if self.text is not None else yaml.safe_dump(self.body, sort_keys=False)

    def document(self) -> Any:
        """The object the API server would get (what the YAML parses to)."""
        return yaml.safe_load(self.text) if self.text is not None else copy.deepcopy(self.body)


def top_level(path: str) -> str:
    """`spec.env[0].name` -> `spec.env`; `metadata.name` stays; `spec` stays."""
    path = re.sub(r"^document \d+: ", "", path)
    match = re.match(r"[A-Za-z_]+(\.[A-Za-z_]+)?", path)
    return match.group(0) if match else path


BAD: list[Case] = [
    # wrong types
    Case("nodes-string", "spec.nodes", job({"nodes": "two"})),
    Case("nodes-float", "spec.nodes", job({"nodes": 1.5})),
    Case("nodes-bool", "spec.nodes", job({"nodes": True})),
    Case("suspend-string", "spec.suspend", job({"suspend": "yes"})),
    Case("env-not-a-list", "spec.env", job({"env": "FOO=1"})),
    Case("env-entry-a-string", "spec.env[0]", job({"env": ["FOO=1"]})),
    Case("command-a-string", "spec.command", job({"command": "touch MARKER"})),
    Case("command-item-a-number", "spec.command[2]", job({"command": ["sh", "-c", 7]})),
    Case("args-not-a-list", "spec.args", job({"args": "--epochs 3"})),
    Case("image-a-number", "spec.image", job({"image": 123})),
    Case("working-dir-a-number", "spec.workingDir", job({"workingDir": 1})),
    Case("shm-size-a-bool", "spec.shmSize", job({"shmSize": True})),
    Case("port-a-string", "spec.port", job({"port": "29500"})),
    Case("template-a-string", "spec.template", job({"template": "spec: {}"})),
    Case("resources-a-list", "spec.resources", job({"resources": [{"cpu": 1}]})),
    Case("resources-quantity-a-list", "spec.resources.limits", job({"resources": {"limits": {"memory": [1]}}})),
    Case("spec-a-list", "spec", job(root={"spec": ["nodes: 2"]})),
    Case("metadata-a-string", "metadata", job(root={"metadata": "bad-job"})),
    # counts out of range
    Case("nodes-zero", "spec.nodes", job({"nodes": 0})),
    Case("nodes-negative", "spec.nodes", job({"nodes": -2})),
    Case("nodes-too-many", "spec.nodes", job({"nodes": 2000})),
    Case("nproc-many", "spec.nprocPerNode", job({"nprocPerNode": "many"})),
    Case("nproc-zero", "spec.nprocPerNode", job({"nprocPerNode": 0})),
    Case("nproc-too-many", "spec.nprocPerNode", job({"nprocPerNode": 300})),
    Case("nproc-bool", "spec.nprocPerNode", job({"nprocPerNode": True})),
    Case("nproc-auto-capitalised", "spec.nprocPerNode", job({"nprocPerNode": "Auto"})),
    Case("gpus-negative", "spec.gpusPerNode", job({"gpusPerNode": -1})),
    Case("gpus-too-many", "spec.gpusPerNode", job({"gpusPerNode": 65})),
    Case("port-zero", "spec.port", job({"port": 0})),
    Case("port-too-high", "spec.port", job({"port": 70000})),
    Case("max-restarts-negative", "spec.maxRestarts", job({"maxRestarts": -1})),
    Case("backoff-too-long", "spec.restartBackoffSeconds", job({"restartBackoffSeconds": 4000})),
    Case("deadline-zero", "spec.activeDeadlineSeconds", job({"activeDeadlineSeconds": 0})),
    Case("ttl-negative", "spec.ttlSecondsAfterFinished", job({"ttlSecondsAfterFinished": -1})),
    Case("stall-timeout-too-short", "spec.stallTimeoutSeconds", job({"stallTimeoutSeconds": 5})),
    Case("stall-timeout-too-long", "spec.stallTimeoutSeconds", job({"stallTimeoutSeconds": 604801})),
    Case("stall-timeout-string", "spec.stallTimeoutSeconds", job({"stallTimeoutSeconds": "60s"})),
    Case("port-is-progress-port", "spec.port", job({"port": 29510})),
    Case("env-reserved-progress-file", "spec.env[0].name", env({"name": "DDPJOB_PROGRESS_FILE", "value": "/x"})),
    # durations a user could not mean (they overflowed the timers and wedged the job)
    Case("deadline-huge", "spec.activeDeadlineSeconds", job({"activeDeadlineSeconds": 100000000000000})),
    Case("deadline-over-a-year", "spec.activeDeadlineSeconds", job({"activeDeadlineSeconds": 31536001})),
    Case("ttl-huge", "spec.ttlSecondsAfterFinished", job({"ttlSecondsAfterFinished": 10**30})),
    Case("backoff-huge", "spec.restartBackoffSeconds", job({"restartBackoffSeconds": 2**63})),
    # enums
    Case("backend-unknown", "spec.backend", job({"backend": "mpi"})),
    Case("restart-policy-unknown", "spec.restartPolicy", job({"restartPolicy": "Always"})),
    Case("pull-policy-lower-case", "spec.imagePullPolicy", job({"imagePullPolicy": "always"})),
    # the environment
    Case("env-reserved-master-addr", "spec.env[0].name", env({"name": "MASTER_ADDR", "value": "10.0.0.1"})),
    Case("env-reserved-rank", "spec.env[0].name", env({"name": "RANK", "value": "0"})),
    Case(
        "env-reserved-world-size",
        "spec.env[1].name",
        env({"name": "OK", "value": "1"}, {"name": "WORLD_SIZE", "value": "8"}),
    ),
    Case("env-reserved-backend", "spec.env[0].name", env({"name": "DDPJOB_BACKEND", "value": "nccl"})),
    Case("env-reserved-pet", "spec.env[0].name", env({"name": "PET_NNODES", "value": "2"})),
    Case("env-duplicate-name", "spec.env[1].name", env({"name": "FOO", "value": "1"}, {"name": "FOO", "value": "2"})),
    Case("env-value-a-number", "spec.env[0].value", env({"name": "FOO", "value": 1})),
    Case("env-value-yaml-on", "spec.env[0].value", text=raw("  env:\n    - name: VERBOSE\n      value: on\n")),
    Case("env-name-missing", "spec.env[0].name", env({"value": "1"})),
    Case("env-name-empty", "spec.env[0].name", env({"name": "", "value": "1"})),
    Case("env-name-starts-with-digit", "spec.env[0].name", env({"name": "1FOO", "value": "1"})),
    Case("env-name-with-space", "spec.env[0].name", env({"name": "MY VAR", "value": "1"})),
    Case("env-name-with-equals", "spec.env[0].name", env({"name": "FOO=1", "value": "1"})),
    Case("env-name-trailing-newline", "spec.env[0].name", env({"name": "FOO\n", "value": "1"})),
    Case("env-unknown-field", "spec.env[0]", env({"name": "FOO", "valu": "1"})),
    Case("env-value-from-a-string", "spec.env[0].valueFrom", env({"name": "FOO", "valueFrom": "secret"})),
    # the image
    Case("image-missing", "spec.image", job({"image": DROP})),
    Case("image-empty", "spec.image", job({"image": ""})),
    Case("image-null", "spec.image", text=raw("", "name: bad-job").replace("image: ddpjob/trainer:0.1.0", "image:")),
    # GPUs and NCCL
    Case("nccl-without-gpus", "spec.backend", job({"backend": "nccl", "nprocPerNode": "auto"})),
    Case("nccl-without-gpus-two-procs", "spec.backend", job({"backend": "nccl", "nprocPerNode": 2})),
    Case(
        "nccl-more-procs-than-gpus", "spec.nprocPerNode", job({"backend": "nccl", "gpusPerNode": 2, "nprocPerNode": 4})
    ),
    # names: DNS-1123 labels that leave room for '-<rank>'
    Case("name-too-long-for-one-node", "metadata.name", named("a" * 62)),
    Case("name-too-long-for-ten-nodes", "metadata.name", named("a" * 62, nodes=10)),
    Case("name-too-long-for-1000-nodes", "metadata.name", named("a" * 60, nodes=1000)),
    Case("name-upper-case", "metadata.name", named("Bad-Job")),
    Case("name-starts-with-a-digit", "metadata.name", named("1abc")),  # its Service name would be invalid
    Case("name-with-dots", "metadata.name", named("bad.job")),
    Case("name-with-underscore", "metadata.name", named("bad_job")),
    Case("name-leading-dash", "metadata.name", named("-bad")),
    Case("name-trailing-dash", "metadata.name", named("bad-")),
    Case("name-yaml-mapping", "metadata.name", named("a: b")),
    Case("name-yaml-flow-mapping", "metadata.name", named("{x}")),
    Case("name-single-quoted", "metadata.name", named("'quoted'")),
    Case("name-double-quoted", "metadata.name", named('"q"')),
    Case("name-newline", "metadata.name", named("bad\njob")),
    Case("name-trailing-newline", "metadata.name", named("bad-job\n")),
    Case("name-comment", "metadata.name", named("bad#job")),
    Case("name-star", "metadata.name", named("*")),
    Case("name-anchor", "metadata.name", named("&anchor")),
    Case("name-space", "metadata.name", named("bad job")),
    Case("name-missing", "metadata.name", job(metadata={"name": DROP})),
    Case("name-a-number", "metadata.name", named(123)),
    Case("name-raw-anchor-is-null", "metadata.name", text=raw("", "name: &anchor")),
    Case("name-raw-flow-mapping", "metadata.name", text=raw("", "name: {x}")),
    Case("namespace-invalid", "metadata.namespace", job(metadata={"namespace": "Team_A"})),
    # what the API server cannot decode (a 400 before validation): validate refuses it too
    Case("generation-a-string", "metadata.generation", job(metadata={"generation": "abc"})),
    Case("generation-beyond-int64", "metadata.generation", job(metadata={"generation": 1 << 63})),
    Case("label-value-a-number", "metadata.labels.team", job(metadata={"labels": {"team": 7}})),
    Case("annotations-a-list", "metadata.annotations", job(metadata={"annotations": ["a"]})),
    # unknown fields
    Case("spec-typo-node", "spec.node", job({"node": 2})),
    Case("spec-typo-gpus", "spec.gpus", job({"gpus": 1})),
    Case("unknown-top-level-field", "specs", job(root={"specs": {"nodes": 2}})),
    Case("resources-unknown-key", "spec.resources.cpu", job({"resources": {"cpu": "1"}})),
    Case("spec-typo-nproc", "spec.nprocPerNod", job({"nprocPerNode": DROP, "nprocPerNod": 2})),
    Case("checkpoint-typo-claim-name", "spec.checkpoint.claimname", job({"checkpoint": {"claimname": "ckpt"}})),
    Case("elastic-typo-min-nodes", "spec.elastic.minNode", job({"elastic": {"minNode": 1, "maxNodes": 2}})),
    # checkpoint
    Case("checkpoint-both", "spec.checkpoint", job({"checkpoint": {"claimName": "c", "volume": {"emptyDir": {}}}})),
    Case("checkpoint-neither", "spec.checkpoint", job({"checkpoint": {"mountPath": "/ckpt"}})),
    Case(
        "checkpoint-relative-mount",
        "spec.checkpoint.mountPath",
        job({"checkpoint": {"claimName": "c", "mountPath": "ckpt"}}),
    ),
    Case("checkpoint-empty-claim", "spec.checkpoint.claimName", job({"checkpoint": {"claimName": ""}})),
    Case("checkpoint-volume-a-string", "spec.checkpoint.volume", job({"checkpoint": {"volume": "nfs"}})),
    Case("checkpoint-a-string", "spec.checkpoint", job({"checkpoint": "/ckpt"})),
    # tensorboard
    Case("tensorboard-without-checkpoint", "spec.tensorboard", job({"tensorboard": True})),
    Case("tensorboard-a-string", "spec.tensorboard", job({"tensorboard": "yes", "checkpoint": {"claimName": "c"}})),
    # scheduling
    Case("gang-unknown", "spec.scheduling.gang", job({"scheduling": {"gang": "slurm"}})),
    Case("gang-capitalised", "spec.scheduling.gang", job({"scheduling": {"gang": "Volcano"}})),
    Case("scheduling-a-string", "spec.scheduling", job({"scheduling": "volcano"})),
    Case(
        "scheduling-unknown-field",
        "spec.scheduling.minMember",
        job({"scheduling": {"gang": "volcano", "minMember": 1}}),
    ),
    Case("queue-without-gang", "spec.scheduling.queue", job({"scheduling": {"queue": "team-a"}})),
    Case("queue-with-native-gang", "spec.scheduling.queue", job({"scheduling": {"gang": "kubernetes", "queue": "q"}})),
    Case(
        "queue-with-coscheduling", "spec.scheduling.queue", job({"scheduling": {"gang": "coscheduling", "queue": "q"}})
    ),
    Case("kueue-without-queue", "spec.scheduling.queue", job({"scheduling": {"gang": "kueue"}})),
    Case("queue-upper-case", "spec.scheduling.queue", job({"scheduling": {"gang": "volcano", "queue": "Team_A"}})),
    Case("queue-too-long", "spec.scheduling.queue", job({"scheduling": {"gang": "kueue", "queue": "q" * 64}})),
    Case(
        "priority-class-with-space",
        "spec.scheduling.priorityClassName",
        job({"scheduling": {"priorityClassName": "high prio"}}),
    ),
    Case(
        "min-available-below-nodes",
        "spec.scheduling.minAvailable",
        job({"nodes": 4, "scheduling": {"gang": "volcano", "minAvailable": 3}}),
    ),
    Case(
        "min-available-above-nodes",
        "spec.scheduling.minAvailable",
        job({"nodes": 2, "scheduling": {"gang": "kubernetes", "minAvailable": 8}}),
    ),
    Case("min-available-zero", "spec.scheduling.minAvailable", job({"scheduling": {"minAvailable": 0}})),
    Case(
        "min-available-too-many",
        "spec.scheduling.minAvailable",
        job({"nodes": 1024, "scheduling": {"minAvailable": 2000}}),
    ),
    Case("min-available-a-string", "spec.scheduling.minAvailable", job({"scheduling": {"minAvailable": "all"}})),
    Case(
        "schedule-timeout-zero",
        "spec.scheduling.scheduleTimeoutSeconds",
        job({"scheduling": {"gang": "coscheduling", "scheduleTimeoutSeconds": 0}}),
    ),
    Case(
        "schedule-timeout-too-long",
        "spec.scheduling.scheduleTimeoutSeconds",
        job({"scheduling": {"gang": "coscheduling", "scheduleTimeoutSeconds": 86401}}),
    ),
    Case(
        "on-timeout-unknown",
        "spec.scheduling.onScheduleTimeout",
        job({"scheduling": {"scheduleTimeoutSeconds": 60, "onScheduleTimeout": "Retry"}}),
    ),
    Case(
        "on-timeout-fail-without-timeout",
        "spec.scheduling.onScheduleTimeout",
        job({"scheduling": {"gang": "volcano", "onScheduleTimeout": "Fail"}}),
    ),
    # elastic
    Case("elastic-a-number", "spec.elastic", job({"elastic": 2})),
    Case(
        "elastic-unknown-field",
        "spec.elastic.minReplicas",
        job({"elastic": {"minNodes": 1, "maxNodes": 2, "minReplicas": 1}}),
    ),
    Case("elastic-without-min", "spec.elastic.minNodes", job({"nodes": 2, "elastic": {"maxNodes": 2}})),
    Case("elastic-without-max", "spec.elastic.maxNodes", job({"nodes": 2, "elastic": {"minNodes": 2}})),
    Case("elastic-min-zero", "spec.elastic.minNodes", job({"elastic": {"minNodes": 0, "maxNodes": 2}})),
    Case("elastic-max-too-many", "spec.elastic.maxNodes", job({"elastic": {"minNodes": 1, "maxNodes": 1025}})),
    Case("elastic-min-a-string", "spec.elastic.minNodes", job({"elastic": {"minNodes": "2", "maxNodes": 4}})),
    Case(
        "elastic-min-above-max", "spec.elastic.minNodes", job({"nodes": 3, "elastic": {"minNodes": 4, "maxNodes": 2}})
    ),
    Case("elastic-nodes-below-min", "spec.nodes", job({"nodes": 1, "elastic": {"minNodes": 2, "maxNodes": 4}})),
    Case("elastic-nodes-above-max", "spec.nodes", job({"nodes": 5, "elastic": {"minNodes": 2, "maxNodes": 4}})),
    Case(
        "elastic-min-available-is-nodes",
        "spec.scheduling.minAvailable",
        job(
            {
                "nodes": 4,
                "elastic": {"minNodes": 2, "maxNodes": 4},
                "scheduling": {"gang": "volcano", "minAvailable": 4},
            }
        ),
    ),
    Case(
        "name-too-long-for-elastic-max",
        "metadata.name",
        job({"nodes": 2, "elastic": {"minNodes": 1, "maxNodes": 10}}, {"name": "a" * 62}),
    ),
    # the object itself
    Case("spec-missing", "spec", job(root={"spec": DROP})),
    Case("api-version-wrong", "apiVersion", job(root={"apiVersion": "ddpjob.io/v1"})),
    Case("api-version-other-group", "apiVersion", job(root={"apiVersion": "batch/v1"})),
    Case("kind-wrong", "kind", job(root={"kind": "Job"})),
]

GOOD: list[Case] = [
    Case("example-mnist-cpu", "", text=(EXAMPLES / "mnist-cpu.yaml").read_text()),
    Case("example-resnet-gpu", "", text=(EXAMPLES / "resnet-gpu.yaml").read_text()),
    Case(
        "minimal",
        "",
        {
            "apiVersion": "ddpjob.io/v1alpha1",
            "kind": "DDPJob",
            "metadata": {"name": "m"},
            "spec": {"image": "ddpjob/trainer:0.1.0", "command": MARKER_COMMAND},
        },
    ),
    Case(
        "metacharacters-in-env-values-and-args",
        "",
        job(
            {
                "env": [
                    {"name": n, "value": v}
                    for n, v in [
                        ("COLON", "a: b"),
                        ("FLOW", "{x}"),
                        ("SQUOTE", "'quoted'"),
                        ("DQUOTE", '"q"'),
                        ("NEWLINE", "line1\nline2"),
                        ("HASH", "# not a comment"),
                        ("STAR", "*"),
                        ("ANCHOR", "&anchor"),
                        ("ALIAS", "*anchor"),
                        ("LIST", "[1, 2]"),
                        ("EMPTY", ""),
                        ("DASHES", "---"),
                        ("PIPE", "| x"),
                        ("TEMPLATE", "{{ name }}"),
                        ("UNICODE", "naïve ✓"),
                        ("NUMBER_TEXT", "0755"),
                        ("YES", "yes"),
                        ("dotted.name-ok", "x"),
                    ]
                ],
                "args": ["a: b", "{x}", "'q'", '"q"', "# c", "*", "&a", "\n"],
            }
        ),
    ),
    Case("env-value-from", "", env({"name": "TOKEN", "valueFrom": {"secretKeyRef": {"name": "s", "key": "k"}}})),
    Case("durations-of-a-year", "", job({"activeDeadlineSeconds": 31536000, "ttlSecondsAfterFinished": 31536000})),
    Case("name-longest-for-ten-nodes", "", named("a" * 61, nodes=10)),
    Case("name-longest-for-eleven-nodes", "", named("a" * 60, nodes=11)),
    Case("nodes-and-nproc-null-take-defaults", "", text=raw("  nodes:\n  nprocPerNode:\n  suspend:\n")),
    Case("nccl-one-proc-per-gpu", "", job({"backend": "nccl", "gpusPerNode": 4, "nprocPerNode": "auto"})),
    Case("nccl-fewer-procs-than-gpus", "", job({"backend": "nccl", "gpusPerNode": 4, "nprocPerNode": 2})),
    Case("checkpoint-volume", "", job({"checkpoint": {"volume": {"nfs": {"server": "nfs", "path": "/x"}}}})),
    Case("checkpoint-claim-default-mount", "", job({"checkpoint": {"claimName": "ckpt"}})),
    Case("tensorboard-on-a-claim", "", job({"tensorboard": True, "checkpoint": {"claimName": "ckpt"}})),
    Case("tensorboard-off-without-checkpoint", "", job({"tensorboard": False})),
    Case("stall-timeout", "", job({"stallTimeoutSeconds": 10})),
    Case("nccl-default-overridden", "", env({"name": "TORCH_NCCL_ASYNC_ERROR_HANDLING", "value": "3"})),
    Case(
        "every-field",
        "",
        job(
            {
                "nodes": 3,
                "nprocPerNode": 2,
                "backend": "gloo",
                "imagePullPolicy": "Always",
                "args": ["--epochs", "1"],
                "workingDir": "/work",
                "resources": {"limits": {"cpu": 2, "memory": "1Gi"}},
                "gpusPerNode": 0,
                "gpuResource": "amd.com/gpu",
                "port": 1,
                "shmSize": "1Gi",
                "restartPolicy": "Never",
                "maxRestarts": 0,
                "restartBackoffSeconds": 0,
                "activeDeadlineSeconds": 1,
                "ttlSecondsAfterFinished": 0,
                "stallTimeoutSeconds": 604800,
                "suspend": True,
                "template": {"spec": {"nodeSelector": {"pool": "a"}}},
            },
            {"namespace": "team-a"},
        ),
    ),
    Case("gang-none-explicit", "", job({"scheduling": {"gang": "none", "priorityClassName": "batch-low"}})),
    Case("gang-kubernetes", "", job({"nodes": 4, "scheduling": {"gang": "kubernetes", "minAvailable": 4}})),
    Case(
        "gang-volcano-queue",
        "",
        job({"scheduling": {"gang": "volcano", "queue": "research", "priorityClassName": "high.priority"}}),
    ),
    Case(
        "gang-coscheduling-timeout",
        "",
        job({"scheduling": {"gang": "coscheduling", "scheduleTimeoutSeconds": 600, "onScheduleTimeout": "Fail"}}),
    ),
    Case("gang-kueue", "", job({"nodes": 2, "scheduling": {"gang": "kueue", "queue": "user-queue"}})),
    Case("gang-none-with-timeout", "", job({"scheduling": {"scheduleTimeoutSeconds": 86400}})),
    Case("status-is-ignored", "", job(root={"status": {"phase": "Running"}})),
    Case("elastic", "", job({"nodes": 4, "elastic": {"minNodes": 2, "maxNodes": 6}})),
    Case("elastic-fixed-range", "", job({"nodes": 3, "elastic": {"minNodes": 3, "maxNodes": 3}})),
    Case(
        "elastic-gang-min",
        "",
        job(
            {
                "nodes": 4,
                "elastic": {"minNodes": 2, "maxNodes": 4},
                "scheduling": {"gang": "kubernetes", "minAvailable": 2},
            }
        ),
    ),
]
