"""``journal-agent view``: bind, print the address with its token, open the browser, serve.

The socket is bound here (port 0: the system picks a free one) and handed to uvicorn, so the
address printed, the ``Host`` values accepted and the port listened on cannot disagree.
"""

from __future__ import annotations

import errno
import ipaddress
import secrets
import socket
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from journal_agent.errors import UserError

if TYPE_CHECKING:
    from journal_agent.workspace import Workspace

LOOPBACK = "127.0.0.1"


@dataclass
class Served:
    url: str  # with the token: the one address that lets a browser in
    host: str
    port: int
    warning: str | None


def bind(host: str, port: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    # Accepted connections inherit it: a response's headers and body go out at once instead
    # of the body waiting ~40 ms for the browser's delayed ACK of the headers (Nagle).
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    try:
        sock.bind((host, port))
    except OSError as exc:
        sock.close()
        where = f"{host}:{port}" if port else host
        if isinstance(exc, socket.gaierror) or exc.errno == errno.EADDRNOTAVAIL:
            fix = "give --host an address of this machine, or leave it out for 127.0.0.1"
        else:  # in use, or a port below 1024 without the right to it
            fix = "choose another --port or leave it out for a free one"
        raise UserError(f"cannot listen on {where} ({exc.strerror}); {fix}.") from None
    sock.listen(128)
    return sock


def accepted_hosts(host: str, port: int) -> set[str]:
    """The ``Host`` values a request may carry: the address we listen on; for a wildcard or
    another address given with ``--host``, also this machine's own addresses and names (a
    rebinding page sends its own domain name, never one of these)."""
    names = {host, "localhost", "127.0.0.1", "::1"}
    if not _is_loopback(host):
        import psutil

        names |= {socket.gethostname(), socket.getfqdn()}
        names |= {
            a.address.split("%")[0]
            for addrs in psutil.net_if_addrs().values()
            for a in addrs
            if a.family in (socket.AF_INET, socket.AF_INET6)
        }
    return {f"[{n}]:{port}" if ":" in n else f"{n}:{port}" for n in names if n}


def _is_loopback(host: str) -> bool:
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return host == "localhost"


def serve(
    ws: Workspace,
    *,
    host: str = LOOPBACK,
    port: int = 0,
    on_ready: Callable[[Served], None] | None = None,
) -> None:
    """Serve the view until interrupted; ``on_ready`` gets the address once it listens."""
    import uvicorn

    from journal_agent.view.server import create_app

    sock = bind(host, port)
    port = sock.getsockname()[1]
    token = secrets.token_urlsafe(24)
    app = create_app(ws, token=token, hosts=accepted_hosts(host, port), port=port)
    shown = f"[{host}]" if ":" in host else host
    warning = None
    if not _is_loopback(host):
        warning = (
            f"listening on {host}, not only this machine: anyone who can reach it and learns "
            "the token can read the journal and the workspace's files."
        )
    served = Served(f"http://{shown}:{port}/index.html?token={token}", host, port, warning)
    config = uvicorn.Config(app, log_level="warning", access_log=False, lifespan="off")
    server = uvicorn.Server(config)
    if on_ready is not None:
        on_ready(served)
    server.run(sockets=[sock])
