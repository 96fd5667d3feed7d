"""What a job's TensorBoard Pod runs (ddpjob_trainer/tensorboard_serve.py): TensorBoard's
own app, its `Content-Encoding: identity` header left out (the API server's service proxy
cannot pass an HTML page with it), every other header and byte as they were."""

from __future__ import annotations

from ddpjob_trainer.tensorboard_serve import without_identity_encoding


def test_identity_is_dropped_and_everything_else_kept() -> None:
    def app(environ, start_response):
        encoding = environ["encoding"]
        start_response("200 OK", [("Content-Type", "text/html"), ("Content-Encoding", encoding), ("X-A", "1")])
        return [b"<html>"]

    for encoding, kept in (("identity", []), ("gzip", [("Content-Encoding", "gzip")])):
        started = []
        body = without_identity_encoding(app)(
            {"encoding": encoding},
            lambda s, h, *e: started.append((s, h)),  # noqa: B023 - called within this iteration
        )
        assert list(body) == [b"<html>"]
        assert started == [("200 OK", [("Content-Type", "text/html"), *kept, ("X-A", "1")])]
