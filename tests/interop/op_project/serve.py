"""Run the test OpenID provider: ``python -m tests.interop.op_project.serve CONFIG PORT``.

Migrates its SQLite database and registers the user and the clients on the first start
(a restart, for a key rotation, finds them there), then serves Django over TLS on
127.0.0.1:PORT with the certificate and key the config names, a thread per connection,
until it is terminated. Requests are logged to stderr.
"""

from __future__ import annotations

import json
import os
import ssl
import sys
import threading
import time
from pathlib import Path
from typing import Any


def main(config_path: str, port: int) -> None:
    threading.Thread(target=_end_with_the_parent, args=(os.getppid(),), daemon=True).start()
    os.environ["DJANGO_SETTINGS_MODULE"] = "tests.interop.op_project.settings"
    os.environ["OP_CONFIG"] = config_path
    config = json.loads(Path(config_path).read_text(encoding="utf-8"))

    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0, interactive=False)
    register(config)
    serve(config, port)


def _end_with_the_parent(parent: int) -> None:
    """A test run that was killed cannot stop its provider: the provider notices instead."""
    while os.getppid() == parent:
        time.sleep(0.2)
    os._exit(0)


def register(config: dict[str, Any]) -> None:
    """The user and one confidential client per layout, each with the RP's exact redirect
    URI, the authorization-code grant, RS256 id_tokens and the consent page shown."""
    from django.contrib.auth import get_user_model
    from oauth2_provider.models import get_application_model

    user_model = get_user_model()
    if user_model.objects.exists():
        return
    user = config["user"]
    user_model.objects.create_user(username=user["username"], password=user["password"])
    application = get_application_model()
    for client_id, layout in config["clients"].items():
        application.objects.create(
            name=f"django-eid ({layout})",
            client_id=client_id,
            client_secret=config["client_secret"],
            client_type=application.CLIENT_CONFIDENTIAL,
            authorization_grant_type=application.GRANT_AUTHORIZATION_CODE,
            redirect_uris=config["redirect_uri"],
            algorithm=application.RS256_ALGORITHM,
            skip_authorization=False,
        )


def serve(config: dict[str, Any], port: int) -> None:
    from django.core.servers.basehttp import ThreadedWSGIServer, WSGIRequestHandler
    from django.core.wsgi import get_wsgi_application

    class Handler(WSGIRequestHandler):
        def get_environ(self) -> dict[str, str]:
            environ: dict[str, str] = super().get_environ()
            environ["HTTPS"] = "on"  # wsgi.url_scheme: the URLs the OP builds are https
            return environ

    class Server(ThreadedWSGIServer):
        def finish_request(self, request: Any, client_address: Any) -> None:
            # The TLS handshake in the connection's own thread, never in the accept loop.
            try:
                request.settimeout(10)
                request.do_handshake()
            except (OSError, ssl.SSLError):
                return
            super().finish_request(request, client_address)

    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(config["tls"]["cert"], config["tls"]["key"])
    server = Server(("127.0.0.1", port), Handler, allow_reuse_address=True)
    server.socket = context.wrap_socket(
        server.socket, server_side=True, do_handshake_on_connect=False
    )
    server.set_app(get_wsgi_application())
    print(f"serving https://127.0.0.1:{port}", file=sys.stderr, flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]))
