"""A job's curves as a user sees them: `ddpjob run` of a job, then of the same job resumed
from an earlier checkpoint (so it trains steps again that the first run had logged),
with `--tensorboard`; once that job is over, the TensorBoard it printed, still serving
until Ctrl-C, opened in a real headless Chromium: the page opens on the loss chart
(pinned first), which draws exactly the job's logged steps, each once, in order, where
metrics.jsonl puts them (no gap, no repeat). The page's screenshot is the README's
picture (`DDPJOB_UPDATE_SCREENSHOT=1` writes docs/images/tensorboard.png)."""

from __future__ import annotations

import itertools
import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
import yaml

from ddpjob.curves import reader, record
from tests.support import browser
from tests.support.deadlines import PHASE, RUN

pytestmark = [pytest.mark.slow, pytest.mark.timeout(2 * RUN)]
ROOT = Path(__file__).resolve().parents[2]
SCREENSHOT = ROOT / "docs" / "images" / "tensorboard.png"
# What the page shows: no data table under the chart, no settings pane, no smoothing (each
# logged point is a vertex of the drawn line), SVG lines (countable) instead of WebGL.
SETTINGS = '{"stepSelectorEnabled": false, "timeSeriesSettingsPaneOpened": false, "scalarSmoothing": 0}'


def job_file(tmp_path: Path, epochs: int) -> Path:
    path = tmp_path / "curves.yaml"
    args = [
        "ddpjob-train",
        "--synthetic-size",
        "512",
        "--batch-size",
        "32",
        "--log-every",
        "2",
        "--epochs",
        str(epochs),
    ]
    spec = {
        "nodes": 1,
        "nprocPerNode": 2,
        "backend": "gloo",
        "image": "local",
        "command": ["ddpjob-launch"],
        "args": args,
        "checkpoint": {"claimName": "c"},
        "restartBackoffSeconds": 0,
    }
    path.write_text(
        yaml.safe_dump(
            {"apiVersion": "ddpjob.io/v1alpha1", "kind": "DDPJob", "metadata": {"name": "curves"}, "spec": spec}
        )
    )
    return path


def ddpjob_run(tmp_path: Path, *argv: str) -> str:
    done = subprocess.run(
        [sys.executable, "-m", "ddpjob.cli", "run", *argv], cwd=tmp_path, capture_output=True, text=True, timeout=RUN
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


def drawn_vertices(driver) -> list[tuple[float, float]] | None:
    """The train/loss card's line, vertex by vertex (None until it is drawn)."""
    from selenium.webdriver.common.by import By

    for card in driver.find_elements(By.CSS_SELECTOR, "scalar-card"):
        if "train/loss" not in card.text.replace("\n", ""):
            continue
        for path in card.find_elements(By.CSS_SELECTOR, "line-chart svg path"):
            d = path.get_attribute("d") or ""
            if d.startswith("M") and "L" in d:
                return [(float(x), float(y)) for x, y in re.findall(r"([-\d.e]+),([-\d.e]+)", d)]
    return None


def open_page(driver, page: str, tag_filter: str = "") -> None:
    """The page as printed (`page`: its address, the loss card pinned), with the settings
    above and SVG lines; only the tags `tag_filter` matches, when given."""
    base, _, query = page.partition("?")
    driver.get(base)
    driver.execute_script(f"window.localStorage.setItem('_tb_global_settings', '{SETTINGS}')")
    query = query.split("#")[0]
    driver.get(f"{base}?forceSVG=true&{query}{'&tagFilter=' + tag_filter if tag_filter else ''}#timeseries")


def serving_run(tmp_path: Path, *argv: str) -> tuple[subprocess.Popen, list[str], str]:
    """`ddpjob run --tensorboard`, until it says that the job is over and its TensorBoard
    keeps serving: (the process, its lines so far, the page it printed)."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "ddpjob.cli", "run", "--tensorboard", *argv],
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    lines: list[str] = []
    threading.Thread(target=lambda: lines.extend(proc.stdout), daemon=True).start()  # type: ignore[arg-type]
    said = re.compile(r"^\[ddpjob\] the job is over; TensorBoard keeps serving its curves at (\S+) until Ctrl-C$")
    deadline = time.monotonic() + RUN
    while not (found := next((m for line in list(lines) if (m := said.match(line.rstrip("\n")))), None)):
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            pytest.fail("no TensorBoard after the job: " + "".join(lines))
        time.sleep(0.5)
    return proc, lines, found.group(1)


def test_the_loss_chart_draws_every_logged_step_once_through_a_resume(tmp_path):
    # first: skipped with the reason where no browser can be had
    with browser.chrome(1200, 600) as (driver, scratch):
        job = job_file(tmp_path, epochs=2)
        ddpjob_run(tmp_path, str(job))
        checkpoints = tmp_path / ".ddpjob" / "curves" / "checkpoints"
        newest = max(checkpoints.glob("ckpt-e00002-*.pt"))
        newest.unlink()  # lost: the next run resumes from epoch 1 and trains epoch 2 again
        job = job_file(tmp_path, epochs=3)
        proc, lines, page = serving_run(tmp_path, str(job))
        try:
            out = "".join(lines)
            said = (
                r"^\[ddpjob\] TensorBoard: http://127\.0\.0\.1:\d+/\S+ \(the job's curves, this run as curves/\S+; "
                r"it serves until Ctrl-C\)$"
            )
            assert re.search(said, out, re.M), out
            records = reader.read(checkpoints / record.FILE)
            loss = reader.curve(records, "loss")
            assert re.search(rf"^\[ddpjob\] loss \S+ [▁-█]+ \S+ \({len(loss)} points\)$", out, re.M), out
            first_attempt = [r["step"] for r in records if r["event"] == "step" and r["restart"] == 0]
            resumed = [r["step"] for r in records if r["event"] == "resume"]
            assert resumed and max(first_attempt) > resumed[0], "the second run must train logged steps again"

            # As printed: the first card is the training loss, pinned.
            open_page(driver, page)
            deadline = time.monotonic() + PHASE
            while not (cards := driver.find_elements("css selector", "scalar-card")) or "train/loss" not in cards[
                0
            ].text.replace("\n", ""):
                assert time.monotonic() < deadline, f"the page does not open on the loss: {[c.text for c in cards]}"
                time.sleep(0.5)
            open_page(driver, page, "%5Etrain%2Floss%24")
            # Chromium keeps its temporary folders in the scratch folder, not in /tmp.
            assert list(scratch.glob("org.chromium.Chromium.*")), sorted(os.listdir(scratch))
            deadline = time.monotonic() + PHASE
            while (vertices := drawn_vertices(driver)) is None or len(vertices) < len(loss):
                assert time.monotonic() < deadline, f"no loss chart of {len(loss)} points: {vertices}"
                time.sleep(0.5)
            steps = [s for s, _ in loss]
            xs = [x for x, _ in vertices]
            assert len(vertices) == len(steps)  # the job's number of points: no repeat, no gap
            assert all(a < b for a, b in itertools.pairwise(xs))  # in order, each step once
            # where each step is: the same spacing as the logged steps (a missing step would
            # show as a wider gap between two vertices)
            span, x_span = steps[-1] - steps[0], xs[-1] - xs[0]
            for s, x in zip(steps, xs, strict=True):
                assert (x - xs[0]) / x_span == pytest.approx((s - steps[0]) / span, abs=0.01)
            # The picture: loss and throughput, side by side, both drawn.
            open_page(driver, page, "%5Etrain%2F(loss%7Csamples_per_s)%24")
            deadline = time.monotonic() + PHASE
            while (
                len(
                    [
                        p
                        for p in driver.find_elements("css selector", "scalar-card line-chart svg path")
                        if (p.get_attribute("d") or "").count("L") >= len(loss) - 1
                    ]
                )
                < 2
            ):
                assert time.monotonic() < deadline, "the two charts were not drawn"
                time.sleep(0.5)
            picture = driver.get_screenshot_as_png()
            assert picture.startswith(b"\x89PNG")
            (tmp_path / "tensorboard.png").write_bytes(picture)
            if os.environ.get("DDPJOB_UPDATE_SCREENSHOT"):
                SCREENSHOT.parent.mkdir(parents=True, exist_ok=True)
                SCREENSHOT.write_bytes(picture)
            proc.send_signal(signal.SIGINT)  # Ctrl-C: TensorBoard stops, the run ends with the job's code
            assert proc.wait(PHASE) == 0
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
