"""Many nodes: ``profile --nnodes K``, through torchrun's c10d rendezvous.

- **One node of K** (``--nnodes K --node-rank R --rdzv-endpoint HOST:PORT``): the same command
  on each machine; this one starts torchrun with ``--rdzv-backend c10d`` and the endpoint, so
  the K agents meet there (the agent on the endpoint's host keeps the store), and torchrun
  numbers the ranks. Whichever process becomes global rank 0 gathers every rank's result and
  reports, per node and rank.
- **K node groups on this machine** (``--nnodes K`` without an endpoint): a test of the launch
  that needs no second machine. K torchrun agents, each a node of ``--nproc`` ranks, meet through
  the same c10d rendezvous on a free port of 127.0.0.1 (torch's c10d backend lets exactly one of
  several agents on one host keep the store, the others connect to it), gloo on the loopback
  interface. The ranks, the gather and the record are those of real nodes.

Nothing home-made: the rendezvous, the rank numbering and the ranks' environment are torchrun's.
"""

from __future__ import annotations

import re
import socket
import subprocess
import threading
import uuid

from profiling.errors import ConfigError

LOOPBACK = "127.0.0.1"
LOOPBACK_ENV = "JOURNAL_AGENT_LOOPBACK_NODES"  # set for the ranks of node groups on one machine
_ENDPOINT = re.compile(
    r"^(?P<host>\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9][A-Za-z0-9.-]*):(?P<port>\d{1,5})$"
)


def check_nodes(nnodes: int, node_rank: int | None, endpoint: str | None) -> None:
    """One sentence for flags that cannot make a launch."""
    if nnodes == 1 and (node_rank is not None or endpoint is not None):
        raise ConfigError(
            "--node-rank and --rdzv-endpoint place this machine among several: give --nnodes K "
            "(K > 1) with them",
            "nnodes",
        )
    if endpoint is None:
        if node_rank is not None:
            raise ConfigError(
                "--node-rank needs --rdzv-endpoint HOST:PORT (where the nodes meet); without "
                "an endpoint, --nnodes K starts all K node groups on this machine",
                "rdzv_endpoint",
            )
        return
    m = _ENDPOINT.match(endpoint)
    if m is None or not 0 < int(m["port"]) < 65536:
        raise ConfigError(
            f"--rdzv-endpoint {endpoint!r} is not HOST:PORT (a host name or address and a port "
            "from 1 to 65535), e.g. --rdzv-endpoint node0.cluster:29400",
            "rdzv_endpoint",
        )
    if node_rank is None or not 0 <= node_rank < nnodes:
        raise ConfigError(
            f"--node-rank must be this machine's place among the {nnodes} nodes, 0 to "
            f"{nnodes - 1} (give it on each machine, with the same --rdzv-endpoint)",
            "node_rank",
        )


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((LOOPBACK, 0))
        return int(s.getsockname()[1])


def node_launches(
    nproc: int, nnodes: int, node_rank: int | None, endpoint: str | None
) -> tuple[list[list[str]], dict[str, str]]:
    """torchrun's flags for each node group this machine starts, and the environment they
    need: one group for a real node, K on loopback without an endpoint."""
    common = [f"--nnodes={nnodes}", f"--nproc-per-node={nproc}", "--rdzv-backend=c10d"]
    if endpoint is not None:
        rid = "journal-agent-profile"  # every machine's command is the same: so is the id
        return [[*common, f"--rdzv-endpoint={endpoint}", f"--rdzv-id={rid}",
                 f"--node-rank={node_rank}"]], {}  # fmt: skip
    here = f"{LOOPBACK}:{_free_port()}"
    rid = uuid.uuid4().hex
    launches = [
        [
            *common,
            f"--rdzv-endpoint={here}",
            f"--rdzv-id={rid}",
            f"--node-rank={i}",
            f"--local-addr={LOOPBACK}",
        ]
        for i in range(nnodes)
    ]
    # gloo binds the interface of the host's name, which may not be the loopback one
    return launches, {"GLOO_SOCKET_IFNAME": "lo", LOOPBACK_ENV: "1"}


def wait_all(procs: list[subprocess.Popen[str]]) -> list[str]:
    """Each process's stderr, read side by side (one torchrun blocked on a full pipe would hold
    up the rendezvous of the others)."""
    errs = ["" for _ in procs]

    def read(i: int, proc: subprocess.Popen[str]) -> None:
        errs[i] = proc.communicate()[1] or ""

    threads = [threading.Thread(target=read, args=(i, p)) for i, p in enumerate(procs)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return errs


__all__ = ["LOOPBACK", "LOOPBACK_ENV", "check_nodes", "node_launches", "wait_all"]
