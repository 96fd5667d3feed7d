"""Pure rendering: a DDPJob becomes its headless Service and one Pod per node."""

from ddpjob.render.objects import (
    job_labels,
    owner_references,
    pod_labels,
    render,
    render_pod,
    render_pod_group,
    render_service,
    to_yaml_stream,
    with_notice_token,
)

__all__ = [
    "job_labels",
    "owner_references",
    "pod_labels",
    "render",
    "render_pod",
    "render_pod_group",
    "render_service",
    "to_yaml_stream",
    "with_notice_token",
]
