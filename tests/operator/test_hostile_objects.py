"""One hostile DDPJob cannot stop the operator for everyone: kopf decodes, copies and diffs
an object nested as deep as the API server stores (10,000 levels) at the operator's
recursion limit, the spec is then refused before anything of ours walks it, and kopf's
copy of the spec (an annotation) always fits, so its patch never fails for ever."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import kopf
import kubernetes
import pytest

from ddpjob.api import bounds, spec
from ddpjob.operator import bookkeeping, handlers
from ddpjob_devcluster.clusters.client import json_object, wait_until
from ddpjob_devcluster.clusters.operator_runner import run_operator, wait_for
from tests.operator.conftest import Cluster
from tests.support.deadlines import REACTION

# kopf's own watch, copy and diff, read through its public API: the `diff` it hands an
# on.update handler. Of a bare resource (no schema rules: the real API server stores
# 10,000 levels of it).
GROUP, VERSION, PLURAL = "hostile.example", "v1", "deepobjects"
CRD = {
    "apiVersion": "apiextensions.k8s.io/v1",
    "kind": "CustomResourceDefinition",
    "metadata": {"name": f"{PLURAL}.{GROUP}"},
    "spec": {
        "group": GROUP,
        "scope": "Namespaced",
        "names": {"plural": PLURAL, "singular": "deepobject", "kind": "DeepObject"},
        "versions": [
            {
                "name": VERSION,
                "served": True,
                "storage": True,
                "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}},
            }
        ],
    },
}
DIFFS: list[Any] = []
DIFF_HANDLERS = f"""
import kopf
from tests.operator import test_hostile_objects as test


@kopf.on.update("{GROUP}", "{VERSION}", "{PLURAL}", field="spec")
def spec_changed(diff, **_):
    test.DIFFS.append(diff)
"""


# The deepest spec.template kube-apiserver (1.37.2) stores and reads back, measured: its
# JSON decoders refuse nesting past 10,000 levels ("exceeded max depth"): a request body
# 400 from a template of 9,999 levels, and from 9,995 to 9,998 the object is written but
# cannot be decoded again (500, "object not decodable").
DEEPEST = 9_994


def deep(levels: int) -> dict[str, Any]:
    value: dict[str, Any] = {}
    for _ in range(levels - 1):
        value = {"a": value}
    return value


def body(spec_fields: dict[str, Any], annotations: dict[str, str] | None = None) -> kopf.Body:
    return kopf.Body(
        {
            "apiVersion": "ddpjob.io/v1alpha1",
            "kind": "DDPJob",
            "metadata": {"name": "j", "namespace": "ns", "annotations": annotations or {}},
            "spec": {"image": "img", **spec_fields},
        }
    )


@pytest.fixture
def operator_recursion_limit() -> Iterator[None]:
    before = sys.getrecursionlimit()
    sys.setrecursionlimit(max(before, handlers.RECURSION_LIMIT))  # what the operator's start sets
    yield
    sys.setrecursionlimit(before)


def test_an_object_as_deep_as_the_api_server_stores_is_decoded_copied_diffed_and_refused(
    operator_recursion_limit: None, cluster: Cluster, kubeconfig: Any, tmp_path: Any
) -> None:
    wire = json.dumps(
        {
            "apiVersion": "ddpjob.io/v1alpha1",
            "kind": "DDPJob",
            "metadata": {"name": "j"},
            "spec": {"image": "img", "template": deep(DEEPEST)},
        }
    )
    decoded = json.loads(wire)  # kopf's watch stream: json.loads of each line
    storage = bookkeeping.DiffBaseStorage(prefix="ddpjob.io", key="last-handled-configuration")
    essence = storage.build(body=kopf.Body(decoded))
    assert essence["spec"]["template"] == decoded["spec"]["template"]  # a full copy: it fits
    # kopf watches it, keeps its copy (the operator's storage) and diffs a change of it.
    (tmp_path / "diff_handlers.py").write_text(DIFF_HANDLERS)
    DIFFS.clear()

    def operator_storage(settings: kopf.OperatorSettings) -> None:
        settings.persistence.diffbase_storage = storage

    extensions = kubernetes.client.ApiextensionsV1Api(cluster.api)
    try:  # the worker's plane's, kept for its later tests
        extensions.create_custom_resource_definition(CRD)  # type: ignore[arg-type]  # a dict body: the client sends it as it is
    except kubernetes.client.ApiException as exc:
        if exc.status != 409:
            raise
    objects, ns = cluster.custom, cluster.ns
    wait_until(
        lambda: objects.list_namespaced_custom_object(GROUP, VERSION, ns, PLURAL) is not None,
        REACTION,
        "the deep objects' CRD is not served",
    )

    def stored() -> dict[str, Any]:
        return json_object(objects.get_namespaced_custom_object(GROUP, VERSION, ns, PLURAL, "j"))

    # The operator straight to the server as the admin (the fault proxy's Python would
    # decode each deep request body again).
    with run_operator(kubeconfig, tmp_path / "diff_handlers.py", namespace=ns, configure=operator_storage):
        objects.create_namespaced_custom_object(
            GROUP, VERSION, ns, PLURAL, {**decoded, "apiVersion": f"{GROUP}/{VERSION}", "kind": "DeepObject"}
        )
        # Each read copies the object in this process (a second, not the usual 0.05 s, apart).
        wait_for(
            lambda: "last-handled-configuration" in json.dumps(stored()["metadata"]),
            REACTION,
            interval=1,
            message="kopf kept no copy of the deep object",
        )
        # The deepest value changed, at no more depth (one level more is past the server's).
        changed = json.loads(wire.replace("{}", "1"))

        def change() -> bool:
            # A replace of what is stored (again after a conflict with kopf's own write), not
            # a merge patch: kube-apiserver merges a patch this deep in tens of seconds (23 s
            # measured on 2 cores, near its 60 s request timeout), stores a replace in about 2.
            current = stored()
            current["spec"] = changed["spec"]
            objects.replace_namespaced_custom_object(GROUP, VERSION, ns, PLURAL, "j", current)
            return True

        wait_for(change, REACTION, interval=1, message="the deep object's change was not stored")
        wait_for(lambda: DIFFS, REACTION, interval=1, message="kopf handed no diff of the deep object's change")
    assert len(DIFFS[0]) == 1
    with pytest.raises(spec.InvalidSpec, match=r"spec.template: is nested deeper than 32 levels"):
        spec.parse_job(decoded)


def test_at_pythons_default_limit_the_same_object_does_not_decode() -> None:
    """What the operator's limit is for: kopf's decoder died on it, and the watch with it.
    In a fresh interpreter: this process's limit is whatever an earlier test's operator
    (or the dev cluster's CEL library) left it at."""
    text = (  # deep(DEEPEST), built with no recursion
        '{"spec": {"template": ' + '{"a": ' * (DEEPEST - 1) + "{}" + "}" * (DEEPEST - 1) + "}}"
    )
    probe = (
        "import json, sys\n"
        f"assert sys.getrecursionlimit() < {handlers.RECURSION_LIMIT}, sys.getrecursionlimit()\n"
        "try:\n    json.loads(sys.stdin.read())\nexcept RecursionError:\n    sys.exit(7)\n"
    )
    done = subprocess.run([sys.executable, "-c", probe], input=text, capture_output=True, text=True, timeout=60)
    assert done.returncode == 7, done.stderr


def test_a_spec_too_big_for_an_annotation_is_kept_as_a_digest_and_refused() -> None:
    storage = bookkeeping.DiffBaseStorage(prefix="ddpjob.io", key="last-handled-configuration")
    big = body({"args": ["x" * 1000] * 300})  # 300 KiB: kopf's copy would not fit in 256 KiB
    essence = storage.build(body=big)
    assert list(essence) == ["spec"] and list(essence["spec"]) == [bookkeeping.DIGEST]
    assert storage.build(body=big) == essence  # the same spec, the same digest: no change seen
    other = storage.build(body=body({"args": ["y" * 1000] * 300}))
    assert other != essence  # a changed spec is still a change
    with pytest.raises(spec.InvalidSpec, match=r"spec: is 29\d KiB of JSON; at most 100 KiB"):
        spec.parse_job(dict(big))


def test_a_small_spec_beside_large_annotations_of_the_users_is_kept_as_a_digest() -> None:
    storage = bookkeeping.DiffBaseStorage(prefix="ddpjob.io", key="last-handled-configuration")
    # The copy holds the spec alone, but shares the annotations' 256 KiB with the user's.
    crowded = body({"nodes": 2}, annotations={"team.example/notes": "n" * 255_000})
    essence = storage.build(body=crowded)
    assert list(essence["spec"]) == [bookkeeping.DIGEST]
    assert len(json.dumps(essence)) < 200
    roomy = storage.build(body=body({"nodes": 2}, annotations={"team.example/notes": "short"}))
    assert roomy["spec"] == {"image": "img", "nodes": 2}  # the usual full copy


def test_the_spec_bound_leaves_room_for_kopfs_copy_and_kubectls() -> None:
    # Two copies of the largest spec a job may have, plus kopf's own annotations.
    assert 2 * bounds.MAX_SPEC_BYTES + bookkeeping.KOPF_ROOM <= bounds.ANNOTATIONS_LIMIT


def test_an_update_of_the_spec_only_triggers_a_reconcile_whatever_kopfs_old_copy_says() -> None:
    """kopf's `old` is an annotation anyone who may patch the job can rewrite (a digest, or
    a forged spec): the handler decides nothing from it (api/accepted_spec.py decides)."""
    calls: list[tuple[str, ...]] = []

    class Controller:
        def trigger(self, namespace: str, name: str) -> None:
            calls.append(("trigger", namespace, name))

    memo = kopf.Memo(controller=Controller())
    new = body({"nodes": 3})
    for old in ({bookkeeping.DIGEST: "0" * 64}, {"image": "evil/image", "nodes": 7}):
        asyncio.run(
            handlers.job_spec_changed(
                namespace="ns", name="j", old=old, body=new, meta=new.metadata, memo=memo, logger=None
            )
        )
    assert calls == [("trigger", "ns", "j")] * 2


def test_labels_and_annotations_are_no_change_to_kopf_a_spec_is() -> None:
    """A DDPJob's metadata is anyone's with `patch`: a write of it costs the operator no
    handling and no bookkeeping patch (one tenant's 2,000 label patches were 2,000 of the
    operator's; docs/benchmarks.md)."""
    storage = bookkeeping.DiffBaseStorage(prefix="ddpjob.io", key="last-handled-configuration")
    before = storage.build(body=body({"nodes": 2}, annotations={"team.example/notes": "a"}))
    relabelled = body({"nodes": 2}, annotations={"team.example/notes": "b"})
    relabelled["metadata"]["labels"] = {"noise": "1"}
    assert storage.build(body=relabelled) == before  # kopf diffs these essences
    assert storage.build(body=body({"nodes": 3})) != before
