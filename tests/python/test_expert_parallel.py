"""Expert parallelism over torch.distributed (examples/python/expert_parallel.py):
one process per rank, each with its own moeint4 context and slice of the
experts; the all-reduce and the all-to-all forms equal the single-process
forward. On the CPU with gloo everywhere torch is installed; with NCCL where
two GPUs and the HIP backend are present."""
import os
import subprocess
import sys

import pytest

import moeint4
from helpers import REPO

torch = pytest.importorskip("torch", reason="torch is not installed")
dist = pytest.importorskip("torch.distributed")

EXAMPLE = REPO / "examples" / "python" / "expert_parallel.py"


def _run(*args):
    env = dict(os.environ, PYTHONPATH=str(REPO / "python"))
    result = subprocess.run([sys.executable, str(EXAMPLE), *args], env=env, capture_output=True,
                            text=True, timeout=600)
    output = result.stdout + result.stderr
    assert result.returncode == 0, output
    assert result.stdout.rstrip().endswith("OK"), output
    assert "(a) all-reduce" in result.stdout and "(b) all-to-all" in result.stdout
    return result.stdout


@pytest.mark.skipif(not dist.is_available() or not dist.is_gloo_available(),
                    reason="torch.distributed with gloo is not available")
@pytest.mark.parametrize("dtype,world,tokens,experts,topk", [
    ("f32", 2, 33, 8, 2),
    ("bf16", 3, 2, 7, 4),  # uneven expert slices; one rank without tokens
])
def test_gloo_ranks_on_the_cpu_backend(dtype, world, tokens, experts, topk):
    out = _run("--backend", "gloo", "--world-size", str(world), "--dtype", dtype,
               "--tokens", str(tokens), "--experts", str(experts), "--topk", str(topk))
    assert f"over {world} ranks (gloo, cpu)" in out


@pytest.mark.skipif(torch.cuda.device_count() < 2, reason="needs two CUDA/ROCm devices")
def test_nccl_ranks_on_two_gpus():
    if not any(b.name == "hip" and b.available for b in moeint4.backends()):
        pytest.skip("the HIP backend (libmoeint4-hip.so) is not available here")
    out = _run("--backend", "nccl", "--world-size", "2", "--dtype", "bf16", "--tokens", "512",
               "--experts", "64", "--topk", "8", "--hidden", "1024", "--intermediate", "512",
               "--group-size", "128", "--repeat", "5")
    print(out)
    assert "over 2 ranks (nccl, cuda)" in out
