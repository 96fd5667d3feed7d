"""`spec.tensorboard`: TensorBoard for the job, served from its checkpoint volume.

The one home of what the field means and of the names and address its TensorBoard gets.
Its users: container_fields.py (the field, checked with the checkpoint volume it
serves: `Checkpoint.tensorboard`), render/tensorboard.py (the Deployment and
Service), operator/tensorboard.py (creates them, writes `status.tensorboard`) and
cli/tensorboard.py (`ddpjob tensorboard JOB`, which port-forwards to PORT, or goes
through the API server's service proxy where port-forward is not served).
"""

from __future__ import annotations

import base64
import hashlib
from typing import Any

from ddpjob.api import names
from ddpjob.api.checker import Checker, show
from ddpjob.curves import record

FIELD = "spec.tensorboard"
PORT = 6006  # TensorBoard's own default: its Service's port and what the CLI forwards to
PORT_NAME = "http"
# Marks the TensorBoard's Pods, Deployment and Service, and is the Service's selector. Not
# LABEL_JOB_NAME: that one makes a Pod one of the gang's (the operator's Pod index, the
# headless Service).
LABEL_FOR = f"{names.GROUP}/tensorboard-for"
SUFFIX = "-tensorboard"


def check(c: Checker, value: Any, has_checkpoint: bool) -> bool:
    """The field, off by default; on, it needs the checkpoint volume it reads."""
    if value is None:
        return False
    if not isinstance(value, bool):
        c.err(FIELD, f"must be true or false (got {show(value)})")
        return False
    if value and not has_checkpoint:
        c.err(FIELD, "needs spec.checkpoint: TensorBoard reads the event files the trainer writes there")
    return bool(value)


def object_name(job: str) -> str:
    """The Deployment's and the Service's name: `<job>-tensorboard`, a DNS-1035 label. A
    long job name keeps its head and gets 64 bits of its hash, so two long names that
    share a head still get two names."""
    name = job + SUFFIX
    if len(name) <= names.MAX_LABEL:
        return name
    digest = base64.b32encode(hashlib.sha256(job.encode()).digest()[:8]).decode().lower().rstrip("=")
    tail = f"-{digest}{SUFFIX}"
    return job[: names.MAX_LABEL - len(tail)].rstrip("-") + tail


def url(job: str, namespace: str) -> str:
    """Where TensorBoard answers inside the cluster: its Service's DNS name and port."""
    return f"http://{object_name(job)}.{namespace}.svc:{PORT}/"


def log_dir(mount_path: str) -> str:
    """The event files' directory in a container that mounts the checkpoint at `mount_path`
    (where the trainer's rank 0 writes them, under the checkpoint directory)."""
    return mount_path.rstrip("/") + "/" + record.SUBDIR
