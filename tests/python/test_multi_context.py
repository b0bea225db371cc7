"""Several contexts in one process, used from several threads at once (each
device its own context and stream): results identical to running the same
forwards one after the other. Two CPU contexts everywhere; contexts on GPU 0
and GPU 1 where two GPUs and the HIP backend are present."""
import threading

import numpy as np
import pytest

import moeint4
from helpers import Layer

ROUNDS = 12


def _concurrently(jobs):
    """Runs every job on its own thread, all released at once; re-raises the
    first failure."""
    start = threading.Barrier(len(jobs))
    results = [None] * len(jobs)
    failures = []

    def run(i):
        try:
            start.wait()
            results[i] = jobs[i]()
        except BaseException as exc:  # reported on the main thread
            failures.append(exc)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(len(jobs))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if failures:
        raise failures[0]
    return results


def test_two_cpu_contexts_from_two_threads_equal_sequential_runs():
    layers = [Layer(seed=81, format="gptq", E=8, K=256, N=128, group_size=64),
              Layer(seed=82, format="awq", asymmetric=True, E=6, K=128, N=256, group_size=32)]
    with moeint4.Context("cpu", num_threads=1) as c0, moeint4.Context("cpu", num_threads=1) as c1:
        weights = [layers[0].weights(context=c0), layers[1].weights(context=c1)]
        inputs = [[layer.inputs(M, 2) for M in (1, 7, 64)] * (ROUNDS // 3) for layer in layers]

        def job(i):
            return lambda: [weights[i].forward(inp["x32"], inp["topk_ids"], inp["topk_weights"])
                            for inp in inputs[i]]

        together = _concurrently([job(0), job(1)])
        one_after_the_other = [job(0)(), job(1)()]
    for i in range(2):
        assert len(together[i]) == len(inputs[i])
        for got, want in zip(together[i], one_after_the_other[i]):
            assert np.isfinite(want).all()
            assert np.array_equal(got, want)


def test_contexts_on_gpu_0_and_1_from_two_threads_with_their_own_streams():
    torch = pytest.importorskip("torch", reason="torch is not installed")
    if torch.cuda.device_count() < 2:
        pytest.skip("needs two CUDA/ROCm devices")
    if not any(b.name == "hip" and b.available for b in moeint4.backends()):
        pytest.skip("the HIP backend (libmoeint4-hip.so) is not available here")
    layer = Layer(seed=83, format="gptq", asymmetric=True, E=32, K=1024, N=512, group_size=128)
    contexts = [moeint4.Context("hip", device_index=d) for d in (0, 1)]
    try:
        weights = [layer.weights(context=ctx) for ctx in contexts]
        streams = [torch.cuda.Stream(device=d) for d in (0, 1)]
        batches = [layer.inputs(M, 4) for M in (1, 8, 64, 512)] * 3

        def on_device(d):
            tensors = [(torch.from_numpy(b["x32"]).to(f"cuda:{d}", torch.bfloat16),
                        torch.from_numpy(b["topk_ids"]).to(f"cuda:{d}"),
                        torch.from_numpy(b["topk_weights"]).to(f"cuda:{d}")) for b in batches]

            def job():
                with torch.cuda.device(d), torch.cuda.stream(streams[d]):
                    outs = [weights[d].forward(x, ids, tw) for x, ids, tw in tensors]
                streams[d].synchronize()
                return [o.cpu() for o in outs]
            return job

        jobs = [on_device(0), on_device(1)]
        together = _concurrently(jobs)
        one_after_the_other = [jobs[0](), jobs[1]()]
        for d in (0, 1):
            for got, want in zip(together[d], one_after_the_other[d]):
                assert torch.isfinite(want.float()).all()
                assert torch.equal(got, want)
        for got0, got1 in zip(together[0], together[1]):  # same weights, same inputs
            assert torch.equal(got0, got1)
    finally:
        for ctx in contexts:
            ctx.close()
