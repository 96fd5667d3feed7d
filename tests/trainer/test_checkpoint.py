import os
import pathlib

import pytest
import torch

from ddpjob_trainer import UsageError, checkpoint


def _payload(epoch, step, value=0.0):
    return {"model_name": "mlp", "model": {"w": torch.full((2, 2), value)}, "epoch": epoch, "step": step}


def test_save_is_atomic_and_newest_wins(tmp_path):
    for e in range(1, 4):
        checkpoint.save(str(tmp_path), _payload(e, e * 10, float(e)), keep=5)
    # Leftovers of a writer that died mid-write are never candidates.
    (tmp_path / "ckpt-e00009-s0000000090-0000000000000000.pt.tmp.1").write_bytes(b"partial")
    _path, payload = checkpoint.newest(str(tmp_path))
    assert payload["epoch"] == 3 and torch.equal(payload["model"]["w"], torch.full((2, 2), 3.0))
    assert not [n for n in os.listdir(tmp_path) if ".tmp." in n and n.endswith(str(os.getpid()))]


def test_keep_last_k(tmp_path):
    for e in range(1, 6):
        checkpoint.save(str(tmp_path), _payload(e, e), keep=2)
    assert [os.path.basename(p)[:11] for _, p in checkpoint.candidates(str(tmp_path))] == ["ckpt-e00005", "ckpt-e00004"]


@pytest.mark.parametrize("damage", ["truncate", "flip", "empty"])
def test_corrupt_newest_falls_back_to_previous(tmp_path, damage, capsys):
    checkpoint.save(str(tmp_path), _payload(1, 10, 1.0), keep=3)
    newest = checkpoint.save(str(tmp_path), _payload(2, 20, 2.0), keep=3)
    data = bytearray(pathlib.Path(newest).read_bytes())
    if damage == "truncate":
        data = data[: len(data) // 2]
    elif damage == "flip":
        data[len(data) // 2] ^= 0xFF
    else:
        data = b""
    pathlib.Path(newest).write_bytes(bytes(data))
    _path, payload = checkpoint.newest(str(tmp_path))
    assert payload["epoch"] == 1
    assert "skipping checkpoint" in capsys.readouterr().err


def test_only_corrupt_checkpoints_is_an_error(tmp_path):
    path = checkpoint.save(str(tmp_path), _payload(1, 10), keep=3)
    pathlib.Path(path).write_bytes(b"garbage")
    with pytest.raises(UsageError, match="none of the 1 checkpoint"):
        checkpoint.newest(str(tmp_path))


def test_no_checkpoint_is_a_fresh_start(tmp_path):
    (tmp_path / "metrics.jsonl").write_text("")
    assert checkpoint.newest(str(tmp_path)) is None
    assert checkpoint.newest(str(tmp_path / "missing")) is None


def test_checkpoint_of_another_model_is_refused():
    model = torch.nn.Linear(3, 2)
    payload = {"model_name": "cnn", "model": model.state_dict()}
    with pytest.raises(UsageError, match="written for model 'cnn', not 'mlp'"):
        checkpoint.check_compatible("p", payload, "mlp", model)
    payload = {"model_name": "mlp", "model": torch.nn.Linear(4, 2).state_dict()}
    with pytest.raises(UsageError, match="does not fit this model"):
        checkpoint.check_compatible("p", payload, "mlp", model)
