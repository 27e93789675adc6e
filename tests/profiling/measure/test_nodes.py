"""`profile --nnodes K`: nodes meeting through torchrun's c10d rendezvous, measured per node and
rank. Real torchrun agents and real gloo ranks on 127.0.0.1 (two node groups of one rank each:
the CPUs here are shared), never a stand-in for the launch."""

from __future__ import annotations

import json
import socket
import subprocess

import pytest

from profiling.records import RecordStore

STEP = ("profile", "--model", "tiny-gpt2", "--batch", "2", "--seq", "32", "--steps", "2",
        "--warmup", "1", "--no-trace")  # fmt: skip


def test_two_node_groups_on_loopback_are_gathered_per_node_and_rank(tmp_path, run_cli) -> None:
    proc = run_cli(*STEP, "--nnodes", "2", "--json", "--root", str(tmp_path), cwd=tmp_path)
    data = json.loads(proc.stdout)
    assert data["world_size"] == 2 and data["backend"] == "gloo" and data["nnodes"] == 2
    ranks = data["ranks"]
    # torchrun numbered the ranks; each of the two agents holds one, its local rank 0
    assert sorted(r["rank"] for r in ranks) == [0, 1]
    assert sorted(r["node"] for r in ranks) == [0, 1]
    assert all(r["local_rank"] == 0 and r["peak_bytes"] > 0 for r in ranks)
    assert any("c10d rendezvous on 127.0.0.1" in n for n in data["notes"])
    record = RecordStore(tmp_path / ".journal" / "measurements").load(data["record_id"])
    for r in ranks:
        assert record.result(f"node{r['node']}_peak").value == r["peak_bytes"]
    assert {(d["rank"], d["node"]) for d in record.device["ranks"]} == {
        (r["rank"], r["node"]) for r in ranks
    }
    table = record.extra["table"]
    assert "Measured on 2 ranks over 2 nodes (DDP, gloo)" in table
    assert "node 0 (" in table and "node 1 (" in table


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_one_command_per_node_meets_at_the_endpoint(tmp_path, cli) -> None:
    """As on two machines: the same command with --node-rank 0 and 1 and one endpoint; the
    process that became global rank 0 reports for both nodes, the other prints nothing."""
    endpoint = f"127.0.0.1:{_free_port()}"
    procs = [
        subprocess.Popen(
            cli.command(
                *STEP,
                "--nnodes",
                "2",
                "--node-rank",
                str(r),
                "--rdzv-endpoint",
                endpoint,
                "--json",
                "--root",
                str(tmp_path),
            ),
            cwd=tmp_path,
            env=cli.environment({}),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            stdin=subprocess.DEVNULL,
            text=True,
        )
        for r in (0, 1)
    ]
    outs = [p.communicate(timeout=300) for p in procs]
    assert [p.returncode for p in procs] == [0, 0], [e[-2000:] for _, e in outs]
    reports = [json.loads(out) for out, _ in outs if out.strip()]
    assert len(reports) == 1
    data = reports[0]
    assert data["world_size"] == 2 and data["nnodes"] == 2
    assert sorted(r["node"] for r in data["ranks"]) == [0, 1]


@pytest.mark.parametrize(
    ("flags", "words"),
    [
        (("--node-rank", "1"), "give --nnodes K (K > 1) with them"),
        (("--nnodes", "2", "--node-rank", "1"), "--node-rank needs --rdzv-endpoint HOST:PORT"),
        (("--nnodes", "2", "--node-rank", "0", "--rdzv-endpoint", "node0"), "is not HOST:PORT"),
        (("--nnodes", "2", "--node-rank", "0", "--rdzv-endpoint", "h:70000"), "is not HOST:PORT"),
        (("--nnodes", "2", "--node-rank", "2", "--rdzv-endpoint", "h:29400"), "0 to 1"),
        (("--nnodes", "2", "--rdzv-endpoint", "h:29400"), "--node-rank must be"),
    ],
)
def test_a_launch_that_cannot_meet_is_one_sentence(tmp_path, run_cli, flags, words) -> None:
    proc = run_cli(*STEP, *flags, "--root", str(tmp_path), cwd=tmp_path, check=False)
    assert proc.returncode != 0
    assert words in proc.stderr and "Traceback" not in proc.stderr
    assert not (tmp_path / ".journal" / "measurements").exists()
