"""Finding 10b of the third review: "no network" still reached the host's Unix-domain sockets
(only /tmp, /var/tmp and /dev/shm were private), so a default-mode command connected to a
listener under /run — where docker.sock and the user's D-Bus live on many machines.

A real listener outside the workspace; the command learns its path from a file, so that only
the sandbox, not the reading of the command line, stands in the way.
"""

from __future__ import annotations

import json
import shutil
import socket
import tempfile
import threading
from pathlib import Path

import pytest

from tests.trust_helpers import approve

CONNECT = (
    'python3 -c "import socket; s = socket.socket(socket.AF_UNIX); '
    "s.connect(open('sockpath').read()); s.sendall(b'hello-from-sandbox'); print('CONNECTED')\""
)
NO_NETWORK = [
    ("default", ("Bash",)),
    ("plan", ("Bash",)),
    ("acceptEdits", ("Bash",)),
    ("bypassPermissions", ()),
]


class Listener:
    def __init__(self, path) -> None:
        self.path = path
        self.received: list[bytes] = []
        self.sock = socket.socket(socket.AF_UNIX)
        self.sock.bind(str(path))
        self.sock.listen(8)
        self.sock.settimeout(0.2)
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        while not self.stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except OSError:
                continue
            with conn:
                conn.settimeout(2)
                try:
                    self.received.append(conn.recv(100))
                except OSError:
                    self.received.append(b"")

    def close(self) -> None:
        self.stop.set()
        self.thread.join()
        self.sock.close()


@pytest.fixture(params=["outside", "runtime-dir"])
def listener(lab, request):
    where = lab.outside if request.param == "outside" else lab.home / ".run" / "user"
    where.mkdir(parents=True, exist_ok=True)
    srv = Listener(where / "agent.sock")
    (lab.ws / "sockpath").write_text(str(srv.path))
    yield srv
    srv.close()
    srv.path.unlink(missing_ok=True)


@pytest.mark.parametrize(("mode", "allow"), NO_NETWORK)
def test_finding_10b_host_unix_sockets_are_unreachable_without_network(lab, listener, mode, allow):
    res = lab.bash(CONNECT, mode, allow)
    assert "CONNECTED" not in res.stdout, res.stdout
    assert "Connection refused" in res.stdout  # it ran and tried: the sandbox refused it
    assert listener.received == []


def _network_settings(lab, network: dict) -> None:
    (lab.ws / ".claude").mkdir(exist_ok=True)
    (lab.ws / ".claude/settings.json").write_text(json.dumps({"sandbox": {"network": network}}))
    approve(lab.ws)


def test_finding_10b_the_listener_is_real_with_network_allowed(lab, listener):
    _network_settings(lab, {"allowedDomains": ["*"]})
    res = lab.bash(CONNECT, "bypassPermissions")
    assert "CONNECTED" in res.stdout, res.stdout


def test_finding_10b_a_socket_the_user_names_stays_reachable(lab, listener):
    _network_settings(lab, {"allowUnixSockets": [f"/{listener.path}"]})
    res = lab.bash(CONNECT, "bypassPermissions")
    assert "CONNECTED" in res.stdout, res.stdout


@pytest.mark.parametrize(("mode", "allow"), NO_NETWORK[2:])
def test_a_socket_under_a_tmp_folder_bound_back_is_unreachable(lab, mode, allow):
    # The fourth review: sockets under /tmp were left alone (the private /tmp hides them), but
    # a folder under /tmp bound back into the sandbox (allowWrite here; the Python environment
    # alike) brought its sockets along — an ssh-agent's /tmp/ssh-*/agent.* for one.
    folder = Path(tempfile.mkdtemp(prefix="ja-allow-", dir="/tmp"))
    srv = Listener(folder / "agent.sock")
    try:
        (lab.ws / "sockpath").write_text(str(srv.path))
        (lab.ws / ".claude").mkdir(exist_ok=True)
        settings = {"sandbox": {"filesystem": {"allowWrite": [str(folder)]}}}
        (lab.ws / ".claude/settings.json").write_text(json.dumps(settings))
        approve(lab.ws)
        res = lab.bash(CONNECT, mode, allow)
        assert "CONNECTED" not in res.stdout and "Connection refused" in res.stdout, res.stdout
        assert srv.received == []
        listed = lab.bash('ls "$(dirname "$(cat sockpath)")"', mode, allow).stdout
        assert "agent.sock" in listed  # the folder is there, bound back: only the socket is not
    finally:
        srv.close()
        shutil.rmtree(folder, ignore_errors=True)
