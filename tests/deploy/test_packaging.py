"""One distribution, two packages: each side imports without the other's heavy parts,
and the wheel the images install carries the templates."""

import subprocess
import sys
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def import_without(blocked: list[str], modules: list[str]) -> subprocess.CompletedProcess:
    # A None entry in sys.modules makes `import X` raise ImportError, as if X were not installed.
    code = "import sys\n" + "".join(f"sys.modules[{b!r}] = None\n" for b in blocked)
    code += "".join(f"import {m}\n" for m in modules)
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)


def test_the_operator_side_needs_no_torch():
    result = import_without(["torch", "torchvision", "tqdm"], [
        "ddpjob.cli", "ddpjob.local.runner", "ddpjob.operator.handlers", "ddpjob.operator.main"])
    assert result.returncode == 0, result.stderr


def test_the_trainer_side_needs_no_kopf():
    # prometheus_client is a trainer dependency too (ddpjob-launch serves /metrics).
    result = import_without(["kopf", "kubernetes", "jinja2", "yaml"], [
        "ddpjob_trainer.launch", "ddpjob_trainer.progress_server", "ddpjob_trainer.train"])
    assert result.returncode == 0, result.stderr


def test_the_block_is_real():
    assert import_without(["torch"], ["ddpjob_trainer.train"]).returncode != 0


def test_the_wheel_carries_both_packages_and_the_templates(tmp_path):
    built = subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation",
                            "-w", str(tmp_path), str(ROOT)], capture_output=True, text=True, timeout=300)
    assert built.returncode == 0, built.stderr
    (wheel,) = tmp_path.glob("ddpjob-*.whl")
    files = set(zipfile.ZipFile(wheel).namelist())
    assert {"ddpjob/render/templates/pod.yaml.j2", "ddpjob/render/templates/service.yaml.j2",
            "ddpjob/render/objects.py", "ddpjob_trainer/launch.py"} <= files
    entry_points = next(f for f in files if f.endswith("entry_points.txt"))
    text = zipfile.ZipFile(wheel).read(entry_points).decode()
    for script in ("ddpjob = ddpjob.cli:main", "ddpjob-launch = ddpjob_trainer.launch:main",
                   "ddpjob-train = ddpjob_trainer.train:main"):
        assert script in text
