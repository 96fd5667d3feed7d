"""Exactly-once sampling across resizes (elastic_data.py) and its audit (ddpjob_devcluster/scenarios/sample_audit.py),
pure: no process group."""

import itertools
import json
from collections import Counter

import pytest
import torch

from ddpjob_devcluster.scenarios import sample_audit
from ddpjob_trainer import elastic_data


@pytest.mark.parametrize("count, world", [(10, 3), (96, 4), (2, 3), (0, 2), (7, 1)])
def test_shares_cover_the_micro_batch_once(count, world):
    parts = [elastic_data.share(count, world, r) for r in range(world)]
    assert parts[0][0] == 0 and parts[-1][1] == count
    assert all(a[1] == b[0] for a, b in itertools.pairwise(parts))
    assert max(e - s for s, e in parts) - min(e - s for s, e in parts) <= 1


def test_the_epoch_order_does_not_depend_on_the_world():
    a, b = elastic_data.epoch_order(100, 7, 3), elastic_data.epoch_order(100, 7, 3)
    assert torch.equal(a, b) and sorted(a.tolist()) == list(range(100))
    assert not torch.equal(a, elastic_data.epoch_order(100, 7, 4))


def consume(order, global_size, start, stop, world):
    """Samples of micro-batches [start, stop) at `world` ranks."""
    out = []
    for k in range(start, stop):
        for r in range(world):
            idx, total = elastic_data.micro_batch(order, k, global_size, world, r)
            assert total == len(order[k * global_size : (k + 1) * global_size])
            out += idx.tolist()
    return out


def test_a_resize_mid_epoch_neither_loses_nor_repeats_a_sample():
    size, g = 1000, 48  # 21 micro-batches, the last one partial
    order = elastic_data.epoch_order(size, 0, 1)
    n = (size + g - 1) // g
    # 4 nodes for 7 micro-batches, then 3 (a node lost), then 4 again (it is back).
    seen = consume(order, g, 0, 7, 4) + consume(order, g, 7, 15, 3) + consume(order, g, 15, n, 4)
    assert Counter(seen) == Counter(range(size))


def test_the_global_batch_rule():
    assert elastic_data.global_batch(32, 2, 4) == 256  # per process x procs x maxNodes
    assert elastic_data.global_batch(32, 2, 4, explicit=100) == 100


def write(path, lines):
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))


def test_the_audit_keeps_only_the_steps_of_the_group_that_made_them_last(tmp_path):
    # Group 1 (2 ranks) trains steps 1-3 of epoch 1 over samples 0-5, checkpointed at step 2,
    # then loses a node; group 2 (1 rank) resumes at step 2, redoes step 3, finishes the epoch.
    write(
        tmp_path / "samples-1-r0.jsonl",
        [
            {"gen": 1, "start_step": 0, "world": 2},
            {"epoch": 1, "step": 1, "idx": [0]},
            {"epoch": 1, "step": 2, "idx": [2]},
            {"epoch": 1, "step": 3, "idx": [4]},
        ],
    )
    write(
        tmp_path / "samples-1-r1.jsonl",
        [
            {"gen": 1, "start_step": 0, "world": 2},
            {"epoch": 1, "step": 1, "idx": [1]},
            {"epoch": 1, "step": 2, "idx": [3]},
        ],
    )
    (tmp_path / "samples-2-r0.jsonl").write_text(
        json.dumps({"gen": 2, "start_step": 2, "world": 1})
        + "\n"
        + json.dumps({"epoch": 1, "step": 3, "idx": [4, 5]})
        + "\n"
        + '{"epoch": 1, "st'
    )  # killed mid-line
    assert sample_audit.lost_and_repeated(str(tmp_path), 6, 1) == (0, 0)
    assert sample_audit.worlds(str(tmp_path)) == [2, 1]
    # Without the resume point, step 3 of group 1 would count as well: sample 4 twice.
    (tmp_path / "samples-2-r0.jsonl").write_text(
        json.dumps({"gen": 2, "start_step": 3, "world": 1}) + "\n" + json.dumps({"epoch": 1, "step": 4, "idx": [5]})
    )
    assert sample_audit.lost_and_repeated(str(tmp_path), 6, 1) == (0, 0)
    (tmp_path / "samples-2-r0.jsonl").write_text(
        json.dumps({"gen": 2, "start_step": 3, "world": 1}) + "\n" + json.dumps({"epoch": 1, "step": 4, "idx": [4, 5]})
    )
    assert sample_audit.lost_and_repeated(str(tmp_path), 6, 1) == (0, 1)
    assert sample_audit.lost_and_repeated(str(tmp_path), 7, 1) == (1, 1)
