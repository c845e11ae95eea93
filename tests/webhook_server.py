"""A local HTTP server standing in for a Slack-compatible incoming webhook: it keeps every JSON body
POSTed to it and answers `status` (200, or an error the sensor must survive). Its URL carries `TOKEN`
as a real webhook URL carries its secret, so tests can search every output for it."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

TOKEN = "T0ALERTS/B0ALERTS/s3cr3tW3bh00kT0ken"


class Webhook:
    """A local HTTP server that keeps every JSON body POSTed to it and answers `status`."""

    def __init__(self) -> None:
        self.received: list[dict[str, Any]] = []
        self.status = 200
        hook = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 (http.server's name)
                body = self.rfile.read(int(self.headers["Content-Length"]))
                if hook.status == 200:
                    hook.received.append(json.loads(body))
                self.send_response(hook.status)
                self.end_headers()
                self.wfile.write(b"ok")

            def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
                return

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/services/{TOKEN}"


@contextmanager
def running_webhook() -> Iterator[Webhook]:
    hook = Webhook()
    thread = threading.Thread(target=hook.server.serve_forever, daemon=True)
    thread.start()
    try:
        yield hook
    finally:
        hook.server.shutdown()
        hook.server.server_close()
