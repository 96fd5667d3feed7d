"""A throwaway kopf handlers module for the runner test (loaded by path, not collected)."""

import kopf


@kopf.on.create("example.com", "v1", "widgets")
@kopf.on.resume("example.com", "v1", "widgets")
def mark_seen(spec, patch, **_):
    patch.status["phase"] = "Seen"
    patch.status["size"] = spec.get("size")
