"""`trajkit.ray` on a two-node Ray cluster that the test starts on the loopback address.

The head and a second node are started with `ray start` (each with its own ports and its
own temporary folder), a driver in a subprocess connects to them with `ray.init(address=...)`
(this process may hold a local Ray of its own), and afterwards every process of the two
nodes is stopped: found by their temporary folders, so other Ray instances on the machine
(`ray stop` would stop them all) are left alone.
"""

from __future__ import annotations

import importlib
import json
import os
import random
import shutil
import socket
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from contextlib import ExitStack, suppress
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import trajkit
from trajkit.dataset import Dataset, validate_files
from trajkit.testing import example_rollout

pytest.importorskip("ray", reason="Ray is not installed (pip install 'trajkit[ray]')")
# Ray ships psutil (untyped) and puts it on the path when imported.
psutil: Any = importlib.import_module("psutil")

RAY = shutil.which(str(Path(sys.executable).with_name("ray")))
TIMEOUT = 240  # seconds for any one command: generous, for busy machines
GAMMA, LAM = 0.99, 0.95

# Offline and quiet: no usage statistics, no token written to the home folder.
_ENV = {"RAY_USAGE_STATS_ENABLED": "0", "RAY_AUTH_MODE": "disabled", "RAY_DEDUP_LOGS": "0"}

_DRIVER = """
import json, sys
import ray
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy
import trajkit.ray
from trajkit.dataset import validate_files

address, clean, folder, gamma, lam = sys.argv[1:]
ray.init(address=address, logging_level="ERROR", log_to_driver=False)
nodes = sorted(node["NodeID"] for node in ray.nodes() if node["Alive"])

@ray.remote(num_cpus=1)
def load_here(path):
    import trajkit
    return ray.get_runtime_context().get_node_id(), trajkit.load(path).num_steps

pinned = [
    load_here.options(scheduling_strategy=NodeAffinitySchedulingStrategy(node, soft=False))
    for node in nodes
]
loaded = ray.get([task.remote(clean + "/rollout-000000.npz") for task in pinned])
steps = trajkit.ray.read_steps(clean, gamma=float(gamma), lam=float(lam))
rows = steps.select_columns(["file", "env", "step", "advantage", "return"]).take_all()
checks = list(validate_files(folder, engine="ray"))
print(json.dumps({
    "nodes": len(nodes),
    "loaded_on": sorted(node for node, _ in loaded),
    "cpus": ray.cluster_resources().get("CPU"),
    "rows": [[int(r["file"]), int(r["env"]), int(r["step"]), float(r["advantage"]),
              float(r["return"])] for r in rows],
    "checks": [[check.path, check.ok, list(check.problems)] for check in checks],
}))
"""


def _free_ports(count: int) -> list[int]:
    """`count` distinct ports that are free now (held open together while they are chosen)."""
    with ExitStack() as stack:
        sockets = [stack.enter_context(socket.socket()) for _ in range(count)]
        for sock in sockets:
            sock.bind(("127.0.0.1", 0))
        return [sock.getsockname()[1] for sock in sockets]


def _free_range(size: int, avoid: set[int]) -> int:
    """The first of `size` consecutive free ports, below the usual ephemeral range."""
    chooser = random.Random()
    for _ in range(200):
        first = chooser.randrange(20000, 32000 - size)
        span = set(range(first, first + size))
        if span & avoid:
            continue
        try:
            with ExitStack() as stack:
                for port in span:
                    sock = stack.enter_context(socket.socket())
                    sock.bind(("127.0.0.1", port))
        except OSError:
            continue
        avoid |= span
        return first
    pytest.fail(f"found no {size} consecutive free ports for Ray workers")


def _run(command: list[str], what: str) -> subprocess.CompletedProcess[str]:
    env = {key: value for key, value in os.environ.items() if key != "RAY_ADDRESS"}
    done = subprocess.run(
        command,
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
        env={**env, **_ENV},
        check=False,
    )
    if done.returncode != 0:
        pytest.fail(f"{what} failed ({done.returncode}):\n{done.stdout}\n{done.stderr}")
    return done


def _stop(temp_dirs: list[str]) -> None:
    """End the processes of the nodes that use `temp_dirs`, and their children, by id."""
    me = os.getpid()
    found: dict[int, Any] = {}
    for process in psutil.process_iter(["cmdline"]):
        command = " ".join(process.info["cmdline"] or ())
        if process.pid != me and any(folder in command for folder in temp_dirs):
            found[process.pid] = process
            try:
                for child in process.children(recursive=True):
                    found[child.pid] = child
            except psutil.Error:
                pass
    for process in found.values():
        with suppress(psutil.Error):
            process.terminate()
    # A few seconds to shut down; a process that has exited but is not reaped yet (a zombie,
    # where nothing reaps orphans) waits out the time too, and is killed, harmlessly.
    _, alive = psutil.wait_procs(list(found.values()), timeout=5)
    for process in alive:
        with suppress(psutil.Error):
            process.kill()


@pytest.fixture
def cluster() -> Iterator[str]:
    """A head and a second node with one CPU each, on 127.0.0.1; yields the head's address."""
    if RAY is None:
        pytest.skip("the `ray` command is not installed next to this Python (trajkit[ray])")
    ports = _free_ports(14)
    avoid = set(ports)
    head_workers, node_workers = _free_range(40, avoid), _free_range(40, avoid)
    # Short folders: Ray's Unix sockets live under them, and socket paths are short.
    temp_dirs = [tempfile.mkdtemp(prefix="tkray-"), tempfile.mkdtemp(prefix="tkray-")]
    address = f"127.0.0.1:{ports[0]}"
    common = ["--num-cpus=1", "--node-ip-address=127.0.0.1", "--disable-usage-stats"]
    head = [
        RAY, "start", "--head", f"--port={ports[0]}", *common, "--include-dashboard=false",
        f"--dashboard-port={ports[1]}", f"--temp-dir={temp_dirs[0]}",
        f"--node-manager-port={ports[2]}", f"--object-manager-port={ports[3]}",
        f"--dashboard-agent-listen-port={ports[4]}", f"--dashboard-agent-grpc-port={ports[5]}",
        f"--runtime-env-agent-port={ports[6]}", f"--metrics-export-port={ports[7]}",
        f"--min-worker-port={head_workers}", f"--max-worker-port={head_workers + 39}",
    ]  # fmt: skip
    second = [
        RAY, "start", f"--address={address}", *common, f"--temp-dir={temp_dirs[1]}",
        f"--node-manager-port={ports[8]}", f"--object-manager-port={ports[9]}",
        f"--dashboard-agent-listen-port={ports[10]}", f"--dashboard-agent-grpc-port={ports[11]}",
        f"--runtime-env-agent-port={ports[12]}", f"--metrics-export-port={ports[13]}",
        f"--min-worker-port={node_workers}", f"--max-worker-port={node_workers + 39}",
    ]  # fmt: skip
    try:
        _run(head, "ray start --head")  # returns once the head is up
        _run(second, "ray start --address")  # returns once the node has joined
        yield address
    finally:
        _stop(temp_dirs)
        for folder in temp_dirs:
            shutil.rmtree(folder, ignore_errors=True)


@pytest.mark.slow
def test_two_nodes_read_steps_and_validate(cluster: str, tmp_path: Path) -> None:
    clean = tmp_path / "runs" / "clean"
    Dataset.write(
        clean, [example_rollout(num_steps=4 + i % 2, truncation=True, seed=i) for i in range(4)]
    )
    (tmp_path / "runs" / "junk.npz").write_bytes(b"junk")
    args = [repr(GAMMA), repr(LAM)]
    done = _run(
        [sys.executable, "-c", _DRIVER, cluster, str(clean), str(tmp_path / "runs"), *args],
        "the driver",
    )
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["nodes"] == 2
    assert result["cpus"] == 2
    assert len(set(result["loaded_on"])) == 2  # a task ran on each node, and read the files
    files = list(Dataset.open(clean).files)
    rows = sorted(result["rows"])
    expected = []
    for index, path in enumerate(files):
        rollout = trajkit.load(path)
        advantages, returns = rollout.advantages(GAMMA, LAM), rollout.returns(GAMMA, LAM)
        for b in range(rollout.batch_size):
            for t in range(rollout.num_steps):
                expected.append([index, b, t, advantages[t, b], returns[t, b]])
    assert [row[:3] for row in rows] == [row[:3] for row in expected]
    np.testing.assert_allclose(
        np.array([row[3:] for row in rows]), np.array([row[3:] for row in expected]), rtol=1e-6
    )
    local = list(validate_files([str(tmp_path / "runs")], jobs=1))
    assert result["checks"] == [[c.path, c.ok, list(c.problems)] for c in local]
    assert [ok for _, ok, _ in result["checks"]].count(False) == 1
