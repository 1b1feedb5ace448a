"""`to_minari` of a large image rollout takes memory bounded by one episode, not the rollout.

Issue 38 asks for at most 2 times the payload. Measured in a fresh interpreter (peak RSS,
`VmHWM` reset after a warm-up export) on 55 MiB of uint8 observations (T=256, B=8, 84x84x4):
2.20 times the payload before (the bounds check made three payload-sized temporaries, the
spaces' checked copy of the rollout and every episode's stacked buffer were held at once);
0.23 times now (bounds checked a MiB at a time, no copy, one episode's buffer at a time).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("minari")
pytestmark = pytest.mark.skipif(
    not sys.platform.startswith("linux"), reason="reads the peak RSS from /proc/self/status"
)

CHILD = """
import os, sys
import numpy as np
import trajkit, trajkit.minari as tm

def status(field):
    with open("/proc/self/status") as lines:
        return next(int(line.split()[1]) << 10 for line in lines if line.startswith(field))

T, B = 256, 8
rng = np.random.default_rng(0)
obses = rng.integers(0, 255, (T + 1, B, 84, 84, 4), np.uint8)
dones = np.zeros((T + 1, B), np.float32)
dones[::50] = 1
r = trajkit.Rollout(
    states=np.zeros((T + 1, B, 0), np.float32), obses=obses, rews=np.zeros((T, B), np.float32),
    dones=dones, infos=None, model_outs={"actions": rng.integers(0, 4, (T + 1, B))}, copy=False,
)
tm.to_minari(r.replace(obses=obses[:, :1], dones=dones[:, :1], rews=r.rews[:, :1],
             states=r.states[:, :1], model_outs={"actions": r.model_outs.arrays["actions"][:, :1]}),
             "trajkit/warm-v0")  # imports and first-use caches belong to the interpreter
with open("/proc/self/clear_refs", "w") as clear:
    clear.write("5")
base = status("VmRSS:")
tm.to_minari(r, "trajkit/big-v0")
print(status("VmHWM:") - base, obses.nbytes)
"""


def test_exporting_a_large_image_rollout_takes_at_most_twice_its_payload(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-W", "ignore", "-c", CHILD],
        capture_output=True,
        text=True,
        env={**os.environ, "MINARI_DATASETS_PATH": str(tmp_path)},
        timeout=300,
        check=True,
    )
    grown, payload = map(int, done.stdout.split())
    assert grown <= 2 * payload, (grown / payload, grown, payload)
    assert grown <= payload // 2 + (32 << 20), (grown / payload, grown, payload)  # measured 0.23
