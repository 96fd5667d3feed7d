"""The README's recipe for progress without the ddpjob package: write a temporary file in
the record's directory, then rename it onto $DDPJOB_PROGRESS_FILE (atomic). Writes
DDPJOB_TEST_PROGRESS_STEPS records (none when 0), then sleeps DDPJOB_TEST_PROGRESS_LINGER
seconds so a reader sees the last one."""

import json
import os
import tempfile
import time

path = os.environ["DDPJOB_PROGRESS_FILE"]
steps = int(os.environ.get("DDPJOB_TEST_PROGRESS_STEPS", "48"))
for step in range(1, steps + 1):
    fd, tmp = tempfile.mkstemp(dir=os.path.dirname(path))  # the directory must exist already
    with os.fdopen(fd, "w") as f:
        json.dump({"step": step, "total_steps": steps, "epoch": 3, "total_epochs": 3}, f)
    os.replace(tmp, path)
time.sleep(float(os.environ.get("DDPJOB_TEST_PROGRESS_LINGER", "2.5")))
