"""torch tensors: CPU tensors on the CPU backend everywhere torch is
installed; CUDA/ROCm tensors on the HIP backend with the caller's stream
where a GPU and libmoeint4-hip.so are present. Skipped otherwise."""
import numpy as np
import pytest

import moeint4
from helpers import Layer, rel_l2, tolerance
from moeint4 import reference as ref

torch = pytest.importorskip("torch", reason="torch is not installed")

DTYPES = {"f32": torch.float32, "f16": torch.float16, "bf16": torch.bfloat16}


def _hip_available():
    return any(b.name == "hip" and b.available for b in moeint4.backends())


def _checkpoint(layer, device):
    return {k: torch.from_numpy(v).to(device) for k, v in layer.tensors.items()}


def _as_float64(t):
    return t.detach().float().cpu().numpy().astype(np.float64)


def _check(layer, w, device, dtype, M=33, topk=2, **kwargs):
    bf16_weights = w.backend == "hip"  # HIP rounds to BF16 on the way (README: What it computes)
    inp = layer.inputs(M, topk)
    x = torch.from_numpy(inp["x32"]).to(device=device, dtype=DTYPES[dtype])
    ids = torch.from_numpy(inp["topk_ids"]).to(device)
    tw = torch.from_numpy(inp["topk_weights"]).to(device)
    out = torch.full_like(x, float("nan"))
    result = w.forward(x, ids, tw, out=out, **kwargs)
    assert result is out
    fresh = w.forward(x, ids.to(torch.int64), tw, **kwargs)
    assert isinstance(fresh, torch.Tensor) and fresh.device == x.device and fresh.dtype == x.dtype
    want = layer.reference(_as_float64(x), inp["topk_ids"], inp["topk_weights"], **{
        k: v for k, v in kwargs.items() if k == "apply_router_weight_on_input"})
    got = _as_float64(out)
    assert np.isfinite(got).all()
    error = rel_l2(got, want)
    assert error <= tolerance(dtype, layer.K, layer.N, bf16_weights), f"relative L2 error {error:.3g}"
    assert torch.equal(out, fresh)
    return error


@pytest.mark.parametrize("dtype", ["f32", "f16", "bf16"])
def test_cpu_tensors_on_cpu_backend(dtype):
    layer = Layer(seed=51, format="gptq", asymmetric=True)
    t = _checkpoint(layer, "cpu")
    with moeint4.Weights.from_gptq(t["w13_qweight"], t["w13_scales"], t["w2_qweight"],
                                   t["w2_scales"], t["w13_qzeros"], t["w2_qzeros"],
                                   backend="cpu") as w:
        _check(layer, w, "cpu", dtype)


def test_cpu_layout_helpers_return_tensors():
    layer = Layer(seed=53, format="awq", asymmetric=True)
    t = _checkpoint(layer, "cpu")
    bf16 = moeint4.dequantize_bf16(t["w13_qweight"], t["w13_scales"], t["w13_qzeros"],
                                   format="awq")
    assert bf16.dtype == torch.bfloat16
    want = ref.float32_to_bf16(layer.w13.astype(np.float32))
    assert np.array_equal(bf16.view(torch.int16).numpy().view(np.uint16), want)


needs_gpu = pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA/ROCm device")


@needs_gpu
@pytest.mark.parametrize("fmt,asym", [("gptq", False), ("gptq", True), ("awq", True)])
@pytest.mark.parametrize("dtype", ["f16", "bf16"])
def test_device_tensors_on_hip_backend_with_callers_stream(fmt, asym, dtype):
    if not _hip_available():
        pytest.skip("the HIP backend (libmoeint4-hip.so) is not available here")
    layer = Layer(seed=57, format=fmt, asymmetric=asym, E=8, K=256, N=128, group_size=128)
    with layer.weights(backend="hip") as w:
        assert w.backend == "hip" and w.device_pointers
        stream = torch.cuda.Stream()
        with torch.cuda.stream(stream):  # the caller's (non-default) stream
            error = _check(layer, w, "cuda", dtype, M=65, topk=2)
            error_in = _check(layer, w, "cuda", dtype, M=17, topk=3,
                              apply_router_weight_on_input=True)
        stream.synchronize()
    print(f"hip {fmt} asym={asym} {dtype}: relative L2 error {error:.3g} / {error_in:.3g}")


@needs_gpu
def test_gpu_tensor_on_host_backend_is_refused():
    layer = Layer(seed=59)
    with layer.weights(backend="cpu") as w:
        inp = layer.inputs(3, 2)
        x = torch.from_numpy(inp["x32"]).cuda()
        with pytest.raises(ValueError, match="takes host memory"):
            w.forward(x, torch.from_numpy(inp["topk_ids"]).cuda(),
                      torch.from_numpy(inp["topk_weights"]).cuda())


@needs_gpu
def test_weights_modes_on_hip_backend():
    """Context(gpu_weights=...) reaches the HIP backend: BF16 weights take about
    4x the device bytes of int4 ones, and both forwards meet their tolerance."""
    if not _hip_available():
        pytest.skip("the HIP backend (libmoeint4-hip.so) is not available here")
    layer = Layer(seed=63, format="gptq", E=8, K=256, N=128, group_size=128)
    device_bytes = {}
    for mode in ("int4", "bf16"):
        with moeint4.Context("hip", gpu_weights=mode) as ctx:
            with layer.weights(backend="hip", context=ctx) as w:
                device_bytes[mode] = w.memory()[1]
                _check(layer, w, "cuda", "bf16", M=9, topk=2)
    assert device_bytes["bf16"] > 3 * device_bytes["int4"] > 0, device_bytes


@needs_gpu
def test_numpy_arrays_on_hip_backend_are_staged():
    if not _hip_available():
        pytest.skip("the HIP backend (libmoeint4-hip.so) is not available here")
    layer = Layer(seed=61, format="gptq", E=4, K=128, N=64, group_size=64)
    with layer.weights(backend="hip") as w:
        inp = layer.inputs(9, 2)
        x = ref.float32_to_bf16(inp["x32"])
        out = w.forward(x, inp["topk_ids"], inp["topk_weights"], dtype="bf16")
        want = layer.reference(ref.bf16_to_float32(x).astype(np.float64), inp["topk_ids"],
                               inp["topk_weights"])
        assert rel_l2(ref.bf16_to_float32(out).astype(np.float64), want) <= tolerance(
            "bf16", layer.K, layer.N, bf16_weights=True)
