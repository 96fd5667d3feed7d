"""An elastic job's rendered contract: torchrun's own elastic flags as PET_* (so `torchrun
train.py` needs none), c10d at Pod 0 which alone hosts the store, no fixed world size, and
gang integrations that place `minNodes` Pods together."""

from ddpjob import contract, render
from ddpjob.api.spec import parse_job


def job(**spec):
    spec = {"image": "img", "nodes": 4, "elastic": {"minNodes": 2, "maxNodes": 6}, **spec}
    return parse_job(
        {
            "apiVersion": "ddpjob.io/v1alpha1",
            "kind": "DDPJob",
            "metadata": {"name": "el", "namespace": "ns"},
            "spec": spec,
        }
    )


def env_of(pod) -> dict:
    return {e["name"]: e["value"] for e in pod["spec"]["containers"][0]["env"] if "value" in e}


def test_the_pods_run_torchrun_elastic_at_pod_zero():
    pods = [o for o in render.render(job(nprocPerNode=1)) if o["kind"] == "Pod"]
    assert [p["metadata"]["name"] for p in pods] == ["el-0", "el-1", "el-2", "el-3"]
    for rank, pod in enumerate(pods):
        env = env_of(pod)
        assert env["PET_NNODES"] == env["NNODES"] == "2:6"
        assert env["PET_RDZV_BACKEND"] == "c10d" and env["PET_RDZV_ID"] == "el"
        assert env["PET_RDZV_ENDPOINT"] == "el-0.el.ns.svc:29500"
        assert env["PET_RDZV_CONF"] == (
            f"is_host={int(rank == 0)},last_call_timeout=10,keep_alive_interval=2,keep_alive_max_attempt=3"
        )
        assert env["PET_MAX_RESTARTS"] == str(contract.ELASTIC_RESTARTS_PER_NODE * 6)
        # The world and the ranks are the rendezvous' to say.
        assert not {"WORLD_SIZE", "RANK", "LOCAL_RANK"} & set(env)


def test_a_rigid_job_keeps_its_static_contract():
    env = env_of(render.render_pod(job(elastic=None, nprocPerNode=1), 1))
    assert env["NNODES"] == "4" and env["WORLD_SIZE"] == "4" and env["RANK"] == "1"
    assert not any(k.startswith("PET_RDZV") for k in env)


def test_the_rendezvous_names_are_reserved():
    for name in ("PET_RDZV_ENDPOINT", "PET_RDZV_CONF", "PET_MAX_RESTARTS"):
        assert name in contract.RESERVED


def test_the_local_endpoint_is_this_machine():
    assert contract.local_overrides(4000, None)["PET_RDZV_ENDPOINT"] == "127.0.0.1:4000"


def test_a_gang_of_an_elastic_job_needs_min_nodes():
    for gang, path in (
        ("kubernetes", ("schedulingPolicy", "gang", "minCount")),
        ("volcano", ("minMember",)),
        ("coscheduling", ("minMember",)),
    ):
        group = render.render_pod_group(job(scheduling={"gang": gang}, resources={"requests": {"cpu": "1"}}))
        value = group["spec"]
        for key in path:
            value = value[key]
        assert value == 2, gang
        if gang == "volcano":
            assert group["spec"]["minResources"] == {"cpu": "2"}
