"""TensorBoard as a job's TensorBoard Pod runs it (`spec.tensorboard`,
render/tensorboard.py): `python -m ddpjob_trainer.tensorboard_serve` takes `tensorboard`'s
own flags and runs the very same program, with one header dropped.

Why: TensorBoard serves its page with `Content-Encoding: identity` (its core plugin asks
for no gzip). The API server's service proxy (`/api/v1/namespaces/NS/services/NAME/proxy/`,
what `ddpjob tensorboard --via proxy` and `kubectl proxy` users open) rewrites the links
of every text/html response, and on an encoding it does not know, `identity` included, it
hands back the response whose body it has already closed (k8s.io/apimachinery
pkg/util/proxy/transport.go, rewriteResponse, v0.37.2): the page never arrives, only
TensorBoard's JSON. `identity` means no encoding at all (RFC 9110 8.4.1: it is not to be
sent in Content-Encoding), so the header goes and the bytes stay the same.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterable
from typing import Any

WSGIApp = Callable[[dict, Callable[..., Any]], Iterable[bytes]]


def without_identity_encoding(app: WSGIApp) -> WSGIApp:
    """`app` with any `Content-Encoding: identity` response header left out."""

    def wrapped(environ: dict, start_response: Callable[..., Any]) -> Iterable[bytes]:
        def start(status: str, headers: list[tuple[str, str]], *exc_info: Any) -> Any:
            kept = [(k, v) for k, v in headers if not (k.lower() == "content-encoding" and v.strip() == "identity")]
            return start_response(status, kept, *exc_info)

        return app(environ, start)

    return wrapped


def main() -> None:
    """What `tensorboard` (tensorboard.main.run_main) does, on the wrapped app."""
    from absl import app
    from tensorboard import default, main_lib, program
    from tensorboard.plugins import base_plugin

    def server(wsgi_app: WSGIApp, flags: Any) -> Any:
        return program.create_port_scanning_werkzeug_server(without_identity_encoding(wsgi_app), flags)

    main_lib.global_init()
    board = program.TensorBoard(plugins=default.get_plugins(), server_class=server)
    try:
        app.run(board.main, flags_parser=board.configure)
    except base_plugin.FlagsError as e:
        print(f"Error: {e}", file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
