"""The kind tier's curve check (hack/kind/curve_check.py), against a stand-in for
TensorBoard's scalars route: it passes only when every logged step's loss is served once,
as logged, and says which steps differ otherwise."""

from __future__ import annotations

import http.server
import json
import pathlib
import subprocess
import sys
import threading
import urllib.parse
from collections.abc import Iterator

import pytest

from tests.deploy.deploy_helpers import ROOT

CHECK = ROOT / "hack" / "kind" / "curve_check.py"


@pytest.fixture
def board() -> Iterator[tuple[str, dict[str, list[list[float]]]]]:
    """A server answering /data/plugin/scalars/scalars for train/loss with `points[run]`."""
    points: dict[str, list[list[float]]] = {}

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 - http.server's name
            url = urllib.parse.urlsplit(self.path)
            query = urllib.parse.parse_qs(url.query)
            if url.path != "/data/plugin/scalars/scalars" or query.get("tag") != ["train/loss"]:
                self.send_error(404)
                return
            body = json.dumps(points.get(query["run"][0], [])).encode()
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/", points
    finally:
        server.shutdown()
        server.server_close()


def check(url: str, metrics: pathlib.Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(CHECK), url, "job", str(metrics)], capture_output=True, text=True, timeout=60
    )


def test_the_served_curve_must_be_the_logged_one(board, tmp_path: pathlib.Path) -> None:
    url, points = board
    metrics = tmp_path / "metrics.jsonl"
    records = [{"event": "position", "step": 0}]
    records += [{"event": "step", "step": s, "loss": 2.0 / s} for s in (4, 8, 12)]
    records += [{"event": "epoch", "step": 12, "loss": 0.1}]  # an epoch's loss is another tag's
    metrics.write_text("".join(json.dumps(r) + "\n" for r in records))

    points["job"] = [[1.0, s, 2.0 / s] for s in (4, 8, 12)]
    ok = check(url, metrics)
    assert ok.returncode == 0 and ok.stdout.strip() == "3 points", ok.stderr

    points["job"] = [[1.0, s, 2.0 / s] for s in (4, 8)]
    missing = check(url, metrics)
    assert missing.returncode == 1 and "missing steps [12]" in missing.stderr

    points["job"] = [[1.0, 4, 0.5], [1.0, 8, 0.25], [1.0, 12, 0.9]]
    wrong = check(url, metrics)
    assert wrong.returncode == 1 and "other values at [(12," in wrong.stderr

    points["job"] = [[1.0, s, 2.0 / s] for s in (4, 8, 12, 16)]
    assert "steps never logged [16]" in check(url, metrics).stderr


def test_an_unreachable_tensorboard_is_told_apart(tmp_path: pathlib.Path) -> None:
    metrics = tmp_path / "metrics.jsonl"
    metrics.write_text(json.dumps({"event": "step", "step": 1, "loss": 1.0}) + "\n")
    done = check("http://127.0.0.1:9/", metrics)
    assert done.returncode == 2 and "TensorBoard not read" in done.stderr
