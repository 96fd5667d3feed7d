"""The metrics log's records and their TensorBoard tags: what the trainer writes, as its
readers take it.

The metrics log (`metrics.jsonl`, beside the checkpoints) is one JSON object a line,
`{"event", "step", fields..., "restart", "time"}`, appended to across attempts by
ddpjob-train's global rank 0 (ddpjob_trainer/progress.py). The same records go to
TensorBoard event files (ddpjob_trainer/event_files.py), each number under its tag in
`TAGS`, into `SUBDIR` of the checkpoint directory. Readers: reader.py, `ddpjob plot`.

Where training goes on from is written down (a `position` record: a start, a resume, a
join; a `resize`; the `resume` record of logs older than that): an attempt that resumed
from step S trains the steps after S again, so what earlier attempts logged after S is
dropped. One continuous curve, no step twice, as TensorBoard draws it.
"""

from __future__ import annotations

FILE = "metrics.jsonl"
# The event files' folder under the checkpoint directory (a run per job under it): where
# the trainer's rank 0 writes them and what a job's TensorBoard Pod serves (api/tensorboard.py).
SUBDIR = "tensorboard"
# Where training goes on from (a start, a resume, a join): the step after it is where
# this attempt's curve takes over.
POSITION = "position"
POSITIONS = (POSITION, "resume", "resize")
# Record field -> TensorBoard tag, per event. An epoch's last step is also a step record,
# so an epoch's own numbers have their own tags (no step drawn twice).
TAGS: dict[str, dict[str, str]] = {
    "step": {
        "loss": "train/loss",
        "accuracy": "train/accuracy",
        "lr": "train/lr",
        "samples_per_s": "train/samples_per_s",
        "gpu_mem_allocated_gb": "gpu/peak_allocated_gb",
        "gpu_mem_reserved_gb": "gpu/peak_reserved_gb",
    },
    "epoch": {
        "loss": "epoch/loss",
        "accuracy": "epoch/accuracy",
        "eval_loss": "eval/loss",
        "eval_accuracy": "eval/accuracy",
    },
}
MAX_STEP = 2**63 - 1  # a step is an int64 in TensorBoard's events; a larger one is a hostile record's
