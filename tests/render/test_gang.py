"""spec.scheduling.gang renders the right objects: checked strictly against the Kubernetes
1.37 schema (native PodGroup, Pods) and against the PodGroup CRDs of the Volcano and
scheduler-plugins releases the dev cluster runs, read from their Go modules (never copied)
and installed on the worker's real control plane, which judges each PodGroup as a dry run."""

import kubernetes_validate
import pytest

from ddpjob import cli, render
from ddpjob.api import gangs, names
from ddpjob.api.gangs import coscheduling, kueue, volcano
from ddpjob.api.scheduling import gang_names
from ddpjob.api.spec import parse_job
from ddpjob.render import gang
from tests.conftest import project_crd
from tests.support import real_crd

K8S_137 = "1.37.0"  # the first release with scheduling.k8s.io/v1beta1 PodGroup


def gang_job(job_body, gang_name: str, **sched):
    body = job_body(
        nodes=4,
        gpusPerNode=2,
        nprocPerNode="auto",
        backend="nccl",
        resources={"requests": {"cpu": "500m", "memory": "4Gi"}},
        scheduling={"gang": gang_name, **sched},
    )
    return parse_job(body)


def kinds(objects):
    return [(o["apiVersion"], o["kind"]) for o in objects]


def test_gang_none_renders_no_group(job_body):
    objects = render.render(gang_job(job_body, "none"))
    assert kinds(objects)[0] == ("v1", "Service")
    for pod in objects[1:]:
        assert "schedulerName" not in pod["spec"] and "schedulingGroup" not in pod["spec"]


def test_native_pod_group_first_and_strictly_valid(job_body):
    job = gang_job(job_body, "kubernetes", priorityClassName="research-high")
    objects = render.render(job, restart_count=2)
    assert kinds(objects)[:2] == [("scheduling.k8s.io/v1beta1", "PodGroup"), ("v1", "Service")]
    group = objects[0]
    assert group["metadata"]["name"] == "demo-attempt-2"
    assert group["spec"] == {"schedulingPolicy": {"gang": {"minCount": 4}}, "priorityClassName": "research-high"}
    assert group["metadata"]["ownerReferences"][0]["uid"] == job.uid
    for obj in objects:
        kubernetes_validate.validate(obj, K8S_137, strict=True)
    for pod in objects[2:]:
        assert pod["spec"]["schedulingGroup"] == {"podGroupName": "demo-attempt-2"}
        assert pod["spec"]["priorityClassName"] == "research-high"


def test_native_schema_check_can_fail(job_body):
    objects = render.render(gang_job(job_body, "kubernetes"))
    objects[0]["spec"]["schedulingPolicy"]["gang"]["minMember"] = 4  # a Volcano spelling
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(objects[0], K8S_137, strict=True)
    pod = objects[-1]
    pod["spec"]["schedulingGroup"]["name"] = "x"
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(pod, K8S_137, strict=True)


def test_native_gang_overrides_a_template_scheduler(job_body):
    body = job_body(nodes=2, scheduling={"gang": "kubernetes"}, template={"spec": {"schedulerName": "other"}})
    for pod in render.render(parse_job(body))[2:]:
        assert "schedulerName" not in pod["spec"]  # every Pod of a group needs the same scheduler


@pytest.mark.parametrize("upstream", ["volcano"], indirect=True)
def test_volcano_pod_group_matches_the_upstream_crd(job_body, upstream):
    crd = upstream
    job = gang_job(job_body, "volcano", queue="research", priorityClassName="high")
    objects = render.render(job)
    group = objects[0]
    assert kinds([group]) == [("scheduling.volcano.sh/v1beta1", "PodGroup")]
    assert crd.validate(group) == []
    # 4 Pods x (500m cpu, 4Gi, 2 GPUs)
    assert group["spec"] == {
        "minMember": 4,
        "queue": "research",
        "priorityClassName": "high",
        "minResources": {"cpu": "2", "memory": "16Gi", "nvidia.com/gpu": "8"},
    }
    for pod in objects[2:]:
        assert pod["spec"]["schedulerName"] == "volcano"
        assert pod["metadata"]["annotations"][volcano.GROUP_ANNOTATION] == group["metadata"]["name"]
        kubernetes_validate.validate(pod, K8S_137, strict=True)
    group["spec"]["minMember"] = "4"  # the pinned release sets no minimum: a type, then
    assert crd.validate(group), "the upstream CRD check must be able to fail"


def test_volcano_default_queue(job_body):
    group = render.render(gang_job(job_body, "volcano"))[0]
    assert group["spec"]["queue"] == "default"


@pytest.mark.parametrize("upstream", ["coscheduling"], indirect=True)
def test_coscheduling_pod_group_matches_the_upstream_crd(job_body, upstream):
    crd = upstream
    job = gang_job(job_body, "coscheduling", scheduleTimeoutSeconds=600)
    objects = render.render(job, options=gang.GangOptions(schedulers={"coscheduling": "my-coscheduler"}))
    group = objects[0]
    assert kinds([group]) == [("scheduling.x-k8s.io/v1alpha1", "PodGroup")]
    assert group["spec"] == {"minMember": 4, "scheduleTimeoutSeconds": 600}
    assert crd.validate(group) == []
    for pod in objects[2:]:
        assert pod["spec"]["schedulerName"] == "my-coscheduler"
        assert pod["metadata"]["labels"][coscheduling.GROUP_LABEL] == group["metadata"]["name"]
        kubernetes_validate.validate(pod, K8S_137, strict=True)
    group["spec"]["minMember"] = 0
    assert crd.validate(group), "the upstream CRD check must be able to fail"


def test_kueue_pod_group_labels(job_body):
    job = gang_job(job_body, "kueue", queue="user-queue")
    for attempt in (0, 3):
        objects = render.render(job, restart_count=attempt)
        assert kinds(objects)[0] == ("v1", "Service")  # Kueue makes the Workload itself
        for pod in objects[1:]:
            labels, annotations = pod["metadata"]["labels"], pod["metadata"]["annotations"]
            assert labels[kueue.QUEUE_LABEL] == "user-queue"
            # a group (a Workload) per attempt, finished once its Pods are gone (kueue.py)
            assert labels[kueue.GROUP_LABEL] == names.pod_group_name("demo", attempt)
            assert annotations[kueue.TOTAL_ANNOTATION] == "4"
            assert annotations[kueue.RETRIABLE_ANNOTATION] == "false"
            assert "schedulingGates" not in pod["spec"]  # Kueue's webhook adds its own gate
            kubernetes_validate.validate(pod, K8S_137, strict=True)


def test_pod_group_names_fit_a_label_value():
    longest = "a" * names.max_job_name_length(1)
    for attempt in (0, 7, 999):
        name = names.pod_group_name(longest, attempt)
        assert len(name) <= names.MAX_LABEL and names.is_dns1123_label(name)
        assert name.endswith(f"-{attempt}")
    assert names.pod_group_name(longest, 1) != names.pod_group_name(longest[:-1] + "b", 1)


def test_two_long_names_found_to_collide_in_32_bits_of_hash_get_different_groups():
    # Found by a birthday search of ~120,000 names: sha256's first 32 bits are both 350b6a4d.
    first = "team-vision-resnet50-imagenet-sweep-learning-rate-009e92"
    second = "team-vision-resnet50-imagenet-sweep-learning-rate-001b28f"
    assert names.pod_group_name(first, 1) != names.pod_group_name(second, 1)
    digest = names.pod_group_name(second, 1).rsplit("-", 2)[1]
    assert len(digest) == 26  # 128 bits, base32


def test_gang_requests_count_limits_where_no_request_is_given():
    pod = {
        "spec": {
            "containers": [
                {"resources": {"limits": {"cpu": "1", "memory": "1Gi"}, "requests": {"cpu": "250m"}}},
                {"name": "sidecar", "resources": {"requests": {"cpu": "100m"}}},
            ]
        }
    }
    assert volcano.gang_requests(pod, 3) == {"cpu": "1050m", "memory": "3Gi"}


def test_one_pod_times_the_nodes_is_the_sum_of_every_pod(job_body):
    """The PodGroup's resources come from one rendered Pod: the same as adding up all of them."""
    job = gang_job(job_body, "volcano", queue="q")
    template = {"spec": {"containers": [{"name": "trainer", "resources": {"limits": {"example.com/fpga": 1}}}]}}
    for candidate in (
        job,
        parse_job(job_body(nodes=3, gpusPerNode=1, template=template, scheduling={"gang": "volcano", "queue": "q"})),
    ):
        pods = [render.render_pod(candidate, i) for i in range(candidate.nodes)]
        summed: dict = {}
        for pod in pods:
            for key, qty in volcano.pod_requests(pod).items():
                summed[key] = summed.get(key, 0) + qty
        expected = {k: volcano.format_quantity(v, binary=volcano.is_bytes(k)) for k, v in sorted(summed.items())}
        assert render.render_pod_group(candidate)["spec"]["minResources"] == expected


def test_the_registry_serves_every_gang_of_the_api_and_of_the_crd():
    assert gang_names() == ("none", *gangs.names())
    crd = real_crd.schema_of(project_crd())["properties"]["spec"]["properties"]["scheduling"]["properties"]["gang"]
    assert crd["enum"] == ["none", *(i.name for i in gangs.BUILT_IN)]
    for name in gangs.names():
        integration = gangs.get(name)
        assert integration.name == name and integration.needs
        assert (integration.pod_group is None) == (integration.pod_group_spec is None)
    kinds_ = {i.name: (i.pod_group.api_version, i.pod_group.kind) for i in gangs.BUILT_IN if i.pod_group}
    assert kinds_ == {
        "kubernetes": ("scheduling.k8s.io/v1beta1", "PodGroup"),
        "volcano": ("scheduling.volcano.sh/v1beta1", "PodGroup"),
        "coscheduling": ("scheduling.x-k8s.io/v1alpha1", "PodGroup"),
    }


@pytest.mark.parametrize(
    "gang_name, first_kind",
    [
        ("none", "Service"),
        ("kubernetes", "PodGroup"),
        ("volcano", "PodGroup"),
        ("coscheduling", "PodGroup"),
        ("kueue", "Service"),
    ],
)
def test_ddpjob_render_shows_the_pod_group_first(gang_name, first_kind, tmp_path, capsys):
    import yaml

    sched = {"gang": gang_name, **({"queue": "q"} if gang_name == "kueue" else {})}
    body = {
        "apiVersion": "ddpjob.io/v1alpha1",
        "kind": "DDPJob",
        "metadata": {"name": "demo"},
        "spec": {"nodes": 3, "image": "ddpjob/trainer:0.1.0", "scheduling": sched},
    }
    path = tmp_path / "job.yaml"
    path.write_text(yaml.safe_dump(body))
    assert cli.main(["render", str(path)]) == 0
    objects = list(yaml.safe_load_all(capsys.readouterr().out))
    assert objects[0]["kind"] == first_kind
    assert [o["kind"] for o in objects].count("Pod") == 3
