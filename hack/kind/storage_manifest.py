"""The kind node image's default storage: the local-path provisioner's own manifest (read
from its pinned module) set up as kind sets it up in its node images: our images, volumes
under /var (a kind node's /var is a volume of its own), the default StorageClass named
"standard", control-plane taints tolerated. Nothing else of upstream's manifest changes.

    python hack/kind/storage_manifest.py UPSTREAM.yaml PROVISIONER_IMAGE HELPER_IMAGE > default-storage.yaml
"""

from __future__ import annotations

import json
import sys

import yaml


def adapt(documents: list[dict], provisioner: str, helper: str) -> list[dict]:
    kinds = set()
    for doc in documents:
        kinds.add(doc["kind"])
        if doc["kind"] == "Deployment":
            spec = doc["spec"]["template"]["spec"]
            spec["nodeSelector"] = {"kubernetes.io/os": "linux"}
            spec["tolerations"] = [
                {"key": "node-role.kubernetes.io/control-plane", "operator": "Equal", "effect": "NoSchedule"}
            ]
            (container,) = spec["containers"]
            container["image"] = provisioner
            container["imagePullPolicy"] = "IfNotPresent"
            args = container["command"]
            args[args.index("start") + 1 : args.index("start") + 1] = ["--helper-image", helper]
        elif doc["kind"] == "StorageClass":
            doc["metadata"] = {
                "name": "standard",
                "annotations": {"storageclass.kubernetes.io/is-default-class": "true"},
            }
        elif doc["kind"] == "ConfigMap":
            config = json.loads(doc["data"]["config.json"])
            for entry in config["nodePathMap"]:
                entry["paths"] = ["/var/local-path-provisioner"]
            doc["data"]["config.json"] = json.dumps(config, indent=2)
            pod = yaml.safe_load(doc["data"]["helperPod.yaml"])
            pod["spec"]["containers"][0].update(image=helper, imagePullPolicy="IfNotPresent")
            doc["data"]["helperPod.yaml"] = yaml.safe_dump(pod, sort_keys=False)
    missing = {"Deployment", "StorageClass", "ConfigMap"} - kinds
    if missing:
        raise SystemExit(
            f"storage_manifest: the upstream manifest has no {', '.join(sorted(missing))}: has its layout changed?"
        )
    return documents


def main(argv: list[str]) -> int:
    if len(argv) != 3:
        print(__doc__.strip().splitlines()[-1].strip(), file=sys.stderr)
        return 2
    with open(argv[0]) as f:
        documents = [d for d in yaml.safe_load_all(f) if d]
    yaml.safe_dump_all(adapt(documents, argv[1], argv[2]), sys.stdout, sort_keys=False)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
