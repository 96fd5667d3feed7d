import pytest

from ddpjob_trainer import UsageError
from ddpjob_trainer.env import read_launch_env, read_process_env

CONTRACT = dict(MASTER_ADDR="j-0.j.ns.svc", MASTER_PORT="29500", NNODES="2", NODE_RANK="1", NPROC_PER_NODE="4")


def test_launch_env_reads_the_contract():
    e = read_launch_env(CONTRACT)
    assert (e.nnodes, e.node_rank, e.nproc_per_node, e.master_addr, e.master_port) == (2, 1, 4, "j-0.j.ns.svc", 29500)
    assert e.from_contract


def test_launch_env_accepts_pet_spellings():
    e = read_launch_env({f"PET_{k}": v for k, v in CONTRACT.items()})
    assert (e.nnodes, e.node_rank, e.nproc_per_node) == (2, 1, 4)


def test_no_contract_means_single_node_defaults():
    e = read_launch_env({})
    assert (e.nnodes, e.node_rank, e.master_addr, e.from_contract) == (1, 0, "127.0.0.1", False)
    assert e.nproc_per_node >= 1


@pytest.mark.parametrize(
    "name,value,needle",
    [
        ("NNODES", "two", "NNODES='two' is not an integer"),
        ("MASTER_PORT", "http", "MASTER_PORT='http' is not an integer"),
        ("NODE_RANK", "5", "NODE_RANK=5 must be < NNODES=2"),
        ("NPROC_PER_NODE", "0", "NPROC_PER_NODE=0 must be >= 1"),
        ("MASTER_PORT", "70000", "MASTER_PORT=70000 is not a TCP port"),
    ],
)
def test_bad_contract_values_name_the_variable(name, value, needle):
    with pytest.raises(UsageError, match=needle):
        read_launch_env({**CONTRACT, name: value})


def test_partial_contract_names_the_missing_variable():
    env = dict(CONTRACT)
    del env["NPROC_PER_NODE"]
    with pytest.raises(UsageError, match="NPROC_PER_NODE is not set"):
        read_launch_env(env)


def test_process_env_falls_back_to_world_size_one():
    p = read_process_env({})
    assert (p.rank, p.world_size, p.distributed, p.restart_count, p.backend) == (0, 1, False, 0, None)


def test_process_env_from_torchrun():
    p = read_process_env(
        dict(
            RANK="3",
            LOCAL_RANK="1",
            WORLD_SIZE="4",
            LOCAL_WORLD_SIZE="2",
            DDPJOB_RESTART_COUNT="2",
            DDPJOB_BACKEND="gloo",
            DDPJOB_CHECKPOINT_DIR="/ck",
        )
    )
    assert (p.rank, p.local_rank, p.world_size, p.local_world_size) == (3, 1, 4, 2)
    assert (p.restart_count, p.backend, p.checkpoint_dir, p.distributed) == (2, "gloo", "/ck", True)


def test_multi_process_pod_without_rank_is_refused():
    # WORLD_SIZE=4 from the contract but no RANK: someone ran ddpjob-train without a launcher.
    with pytest.raises(UsageError, match="RANK is not set"):
        read_process_env({"WORLD_SIZE": "4"})


@pytest.mark.parametrize(
    "env,needle",
    [
        ({"DDPJOB_RESTART_COUNT": "x"}, "DDPJOB_RESTART_COUNT"),
        ({"DDPJOB_BACKEND": "tcp"}, "DDPJOB_BACKEND"),
        ({"RANK": "0", "WORLD_SIZE": "many"}, "WORLD_SIZE"),
        ({"RANK": "2", "WORLD_SIZE": "2"}, "RANK=2 must be < WORLD_SIZE=2"),
    ],
)
def test_bad_process_env(env, needle):
    with pytest.raises(UsageError, match=needle):
        read_process_env(env)
