"""One home for the API's names: group, labels, child object names and their limits."""

from __future__ import annotations

import base64
import hashlib
import re

from ddpjob import contract

GROUP = "ddpjob.io"
VERSION = "v1alpha1"
API_VERSION = f"{GROUP}/{VERSION}"
KIND = "DDPJob"
PLURAL = "ddpjobs"
SHORT_NAME = "ddpj"

LABEL_JOB_NAME = f"{GROUP}/job-name"
LABEL_NODE_RANK = f"{GROUP}/node-rank"
LABEL_RESTART_COUNT = f"{GROUP}/restart-count"

# The container the environment contract is written into; users' sidecars keep theirs.
TRAINER_CONTAINER = "trainer"

DEFAULT_PORT = contract.DEFAULT_PORT
DEFAULT_CHECKPOINT_MOUNT = "/checkpoints"
DEFAULT_GPU_RESOURCE = "nvidia.com/gpu"

# Kubernetes limits: a label value and a DNS-1123 label (Service name, Pod hostname)
# are both at most 63 characters.
MAX_LABEL = 63
_DNS1123_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")


def service_name(job: str) -> str:
    return job


def pod_name(job: str, node_rank: int) -> str:
    return f"{job}-{node_rank}"


def pod_fqdn(job: str, namespace: str, node_rank: int) -> str:
    """The stable DNS name a Pod gets from hostname + subdomain + the headless Service."""
    return f"{pod_name(job, node_rank)}.{service_name(job)}.{namespace}.svc"


def max_job_name_length(nodes: int) -> int:
    """A job name must leave room for '-<rank>' so every Pod hostname stays a DNS label."""
    return MAX_LABEL - len(f"-{max(nodes - 1, 0)}")


_DNS1035_LABEL = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")


def is_dns1035_label(value: str) -> bool:
    """A Service name: a DNS-1123 label that starts with a letter (validation.IsDNS1035Label)."""
    return len(value) <= MAX_LABEL and bool(_DNS1035_LABEL.fullmatch(value))


def is_dns1123_label(value: str) -> bool:
    return len(value) <= MAX_LABEL and bool(_DNS1123_LABEL.fullmatch(value))


MAX_SUBDOMAIN = 253
_DNS1123_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")


def is_dns1123_subdomain(value: str, limit: int = MAX_SUBDOMAIN) -> bool:
    """An object name (validation.IsDNS1123Subdomain), at most `limit` characters."""
    return len(value) <= limit and bool(_DNS1123_SUBDOMAIN.fullmatch(value))


def pod_group_name(job: str, attempt: int) -> str:
    """The PodGroup of one gang attempt. Each attempt gets its own: a native PodGroup
    waits on a protection finalizer until its old Pods are gone, so a new one of the
    same name could not be made yet, and a Volcano / coscheduling PodGroup that finished
    is not scheduled again. Some integrations put it in a label value: 63 at most. A long
    name keeps its head and gets 128 bits of its hash (26 base32 letters): with fewer (32
    bits were used), a second job name giving the same group, and so joining the first
    job's gang, could be searched for."""
    name = f"{job}-attempt-{attempt}"
    if len(name) <= MAX_LABEL:
        return name
    digest = base64.b32encode(hashlib.sha256(job.encode()).digest()[:16]).decode().lower().rstrip("=")
    suffix = f"-{digest}-{attempt}"
    return job[: MAX_LABEL - len(suffix)].rstrip("-") + suffix
