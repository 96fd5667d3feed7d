"""A CRD as the real kube-apiserver enforces it (the DDPJob's, for tests that compare it with
ddpjob.api.spec; a gang scheduler's, for the objects ddpjob renders for it): `install` puts
it on a control plane and waits until its objects are served; `validate` sends a body as a
dry run (server-side, strict field validation, as `kubectl apply` does) and returns the
field paths and messages the server answered; `validate(new, old=...)` stores `old` and
sends `new` as its update, so the transition rules (`oldSelf`) run; `defaulted` is the
object as the server would store it.

The server's answers come in three shapes: a 422 Invalid with one cause per field (the
structural schema, CEL rules, ObjectMeta's checks), a 400 BadRequest whose message lists
strict decoding's unknown or duplicate fields, and a 400 for a body it cannot decode at
all (a Go type error that names the field). Each becomes `ServerError(path, message)`.
"""

from __future__ import annotations

import contextlib
import copy
import itertools
import json
import re
from collections.abc import Iterator, Mapping
from typing import Any, NamedTuple

import kubernetes

_NAMES = itertools.count()
# strict decoding: `unknown field "spec.foo"`, `duplicate field "x"`
_STRICT = re.compile(r'(?:unknown|duplicate) field "([^"]+)"')
# a body Go cannot decode: `... Go struct field ObjectMeta.generation of type int64`
_GO_FIELD = re.compile(r"Go struct field ObjectMeta\.([\w.]+) of type")
_DNS_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?")
_WRONG_NAMESPACE = "the namespace of the provided object does not match"
# the body's apiVersion is not the one served at the URL
_WRONG_VERSION = re.compile(r"the API version in the data .* does not match|^DDPJob in version \"(?!v1alpha1\")")
# a number's format check, which says its field only in its words
_CHECKED = re.compile(r"Checked value must be of type .* in ([\w.\[\]]+)$")
# metadata that is not an object at all
_NOT_META = "Go value of type v1.ObjectMeta"
# a note beside other errors, about none of them: CEL rules skipped on an invalid object
_RULES_SKIPPED = "some validation rules were not checked because the object was invalid"


class ServerError(NamedTuple):
    path: str
    message: str


class Rule(NamedTuple):
    path: str  # where the rule sits, e.g. `spec.scheduling` (`` for the root)
    rule: str


def rules(crd: Mapping[str, Any]) -> list[Rule]:
    """Every CEL rule of the CRD's served version, with where it sits."""
    found: list[Rule] = []

    def walk(schema: Mapping[str, Any], path: str) -> None:
        found.extend(Rule(path, r["rule"]) for r in schema.get("x-kubernetes-validations") or [])
        for key, sub in (schema.get("properties") or {}).items():
            walk(sub, f"{path}.{key}" if path else key)
        if isinstance(schema.get("items"), Mapping):
            walk(schema["items"], f"{path}[*]")
        if isinstance(schema.get("additionalProperties"), Mapping):
            walk(schema["additionalProperties"], f"{path}[*]")

    walk(schema_of(crd), "")
    return found


def schema_of(crd: Mapping[str, Any]) -> Mapping[str, Any]:
    return crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]


class Refused(Exception):
    def __init__(self, status: int, body: bytes):
        super().__init__(f"{status}: {body[:300]!r}")
        self.status, self.body = status, body


def errors_of(exc: Refused) -> list[ServerError]:
    """The server's refusal as field errors (a refusal it gives no field for keeps ``)."""
    body = json.loads(exc.body or b"{}")
    message = body.get("message", "")
    causes = (body.get("details") or {}).get("causes") or []
    if exc.status == 422 and causes:
        said = [ServerError(_field(c.get("field"), c.get("message", "")), c.get("message", "")) for c in causes]
        return [e for e in said if _RULES_SKIPPED not in e.message]
    if _WRONG_NAMESPACE in message:
        return [ServerError("metadata.namespace", message)]
    if _WRONG_VERSION.search(message):
        return [ServerError("apiVersion", message)]
    strict = _STRICT.findall(message)
    if strict:
        return [ServerError(path, message) for path in strict]
    if _NOT_META in message:
        return [ServerError("metadata", message)]
    go_field = _GO_FIELD.search(message)
    return [ServerError("metadata." + go_field.group(1) if go_field else "", message)]


def _field(field: str | None, message: str) -> str:
    """A rule on the root object has no field on the server (`<nil>`): `(root)`; a format
    check without one names it in its message."""
    if field not in (None, "", "<nil>"):
        return str(field)
    checked = _CHECKED.search(message)
    return checked.group(1) if checked else "(root)"


def install(api: kubernetes.client.ApiClient, crd: Mapping[str, Any]) -> None:
    """`crd` on the plane (kept if there already: one installed by a chart on the same plane
    is the same CRD, tests/deploy checks the copies agree), once its objects are served."""
    from ddpjob_devcluster.clusters.client import wait_until
    from tests.support.deadlines import REACTION

    extensions = kubernetes.client.ApiextensionsV1Api(api)
    try:
        extensions.create_custom_resource_definition(crd)  # type: ignore[arg-type]  # a dict body: the client sends it as it is
    except kubernetes.client.ApiException as exc:
        if exc.status != 409:
            raise

    def established() -> bool:
        served = extensions.read_custom_resource_definition(crd["metadata"]["name"])
        conditions = (served.status.conditions if served.status else None) or []
        return any(c.type == "Established" and c.status == "True" for c in conditions)

    wait_until(established, REACTION, f"the CRD {crd['metadata']['name']} was not Established")
    # Established is not yet served: until its watch cache has started, a list answers
    # 429 "storage is (re)initializing", and a client (kopf) backs off for seconds.
    group, version = crd["spec"]["group"], crd["spec"]["versions"][0]["name"]
    objects = kubernetes.client.CustomObjectsApi(api)
    wait_until(
        lambda: objects.list_cluster_custom_object(group, version, crd["spec"]["names"]["plural"], limit=1),
        REACTION,
        f"the CRD {crd['metadata']['name']}'s objects are not served",
    )


def send(api: kubernetes.client.ApiClient, method: str, path: str, body: Any, dry_run: bool = True) -> Any:
    """The body as it is (no model serialization or validation: a malformed one must reach
    the server), with strict field validation; `Refused` for any answer but a success."""
    query = "?fieldValidation=Strict" + ("&dryRun=All" if dry_run else "")
    headers = {"Content-Type": "application/json", "Accept": "application/json"}
    _, url, headers, _, _ = api.param_serialize(
        method, path + query, header_params=headers, auth_settings=["BearerToken"]
    )
    response = api.call_api(method, url, header_params=headers, body=body, _request_timeout=30)
    data = response.read()
    if response.status >= 300:
        raise Refused(response.status, data)
    return json.loads(data)


class RealCRD:
    def __init__(self, api: kubernetes.client.ApiClient, namespace: str, crd: Mapping[str, Any]):
        self.api, self.namespace = api, namespace
        served = next(v for v in crd["spec"]["versions"] if v.get("served", True))
        self.group, self.version, self.plural = crd["spec"]["group"], served["name"], crd["spec"]["names"]["plural"]
        self.custom = kubernetes.client.CustomObjectsApi(api)

    def _send(self, method: str, path: str, body: Any, dry_run: bool = True) -> Any:
        return send(self.api, method, path, body, dry_run)

    def _collection(self) -> str:
        return f"/apis/{self.group}/{self.version}/namespaces/{self.namespace}/{self.plural}"

    def _in_own_namespace(self, doc: Any) -> Any:
        """`doc` in this validator's namespace when it names one that could exist (which
        one is not what is judged); a malformed one stays, for the server to refuse as not
        matching the request's, as it refuses `kubectl apply -n`."""
        meta = doc.get("metadata") if isinstance(doc, Mapping) else None
        if not isinstance(meta, Mapping):
            return doc
        wanted = meta.get("namespace")
        if not isinstance(wanted, str) or not _DNS_LABEL.fullmatch(wanted):
            return doc
        return {**doc, "metadata": {**meta, "namespace": self.namespace}}

    def validate(self, doc: Any, old: Mapping[str, Any] | None = None) -> list[ServerError]:
        try:
            if old is None:
                self._send("POST", self._collection(), self._in_own_namespace(doc))
            else:
                with self._stored(old) as (name, version):
                    new = copy.deepcopy(doc)
                    new["metadata"] = {**new.get("metadata", {}), "name": name, "resourceVersion": version}
                    self._send("PUT", f"{self._collection()}/{name}", new)
        except Refused as exc:
            return errors_of(exc)
        return []

    def defaulted(self, doc: Mapping[str, Any]) -> dict[str, Any]:
        """`doc` as the server would store it: its spec defaulted, its name kept."""
        stored = self._send("POST", self._collection(), doc)
        return {**copy.deepcopy(dict(doc)), "spec": stored["spec"]}

    @contextlib.contextmanager
    def _stored(self, old: Mapping[str, Any]) -> Iterator[tuple[str, str]]:
        """`old` stored under a name of its own (its name and resourceVersion), deleted after."""
        name = f"update-{next(_NAMES)}"
        body = copy.deepcopy(dict(old))
        body["metadata"] = {**body.get("metadata", {}), "name": name}
        made = self._send("POST", self._collection(), body, dry_run=False)
        try:
            yield name, made["metadata"]["resourceVersion"]
        finally:
            self.custom.delete_namespaced_custom_object(self.group, self.version, self.namespace, self.plural, name)


@contextlib.contextmanager
def in_namespace(
    api: kubernetes.client.ApiClient, namespace: str, crd: Mapping[str, Any] | None = None
) -> Iterator[RealCRD]:
    """A validator of `crd` (the DDPJob's by default, installed) in a namespace of its own."""
    from tests.conftest import project_crd

    core = kubernetes.client.CoreV1Api(api)
    core.create_namespace({"metadata": {"name": namespace}})  # type: ignore[arg-type]  # a dict body: the client sends it as it is
    validator = RealCRD(api, namespace, crd or project_crd())
    try:
        yield validator
    finally:
        core.delete_namespace(namespace)
