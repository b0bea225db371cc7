"""torch.ops.moeint4.fused_experts and moeint4.torch.fused_experts (vLLM's
keywords): CPU tensors everywhere torch is installed (Debian 12: torch 1.13,
where torch.compile does not exist and its tests report skipped); on a
CUDA/ROCm GPU with the HIP backend: eager on the caller's stream,
torch.compile(fullgraph=True), and capture in a CUDA graph through the
library's asynchronous forward with a workspace allocated by torch."""
import numpy as np
import pytest

import moeint4
from helpers import Layer, rel_l2, tolerance

torch = pytest.importorskip("torch", reason="torch is not installed")
mtorch = pytest.importorskip("moeint4.torch")

DTYPES = {"f32": torch.float32, "f16": torch.float16, "bf16": torch.bfloat16}
HAS_COMPILE = hasattr(torch, "compile")


def _tensors(layer, M, topk, device="cpu", dtype="f32"):
    inp = layer.inputs(M, topk)
    x = torch.from_numpy(inp["x32"]).to(device=device, dtype=DTYPES[dtype])
    return x, torch.from_numpy(inp["topk_weights"]).to(device), torch.from_numpy(
        inp["topk_ids"]).to(device)


def _want(layer, x, tw, ids, **kwargs):
    return layer.reference(x.detach().float().cpu().numpy().astype(np.float64),
                           ids.cpu().numpy(), tw.cpu().numpy(), **kwargs)


def _error(got, want):
    return rel_l2(got.detach().float().cpu().numpy().astype(np.float64), want)


class MoEBlock(torch.nn.Module):
    """The expert half of a model's MoE block: router, top-k, fused experts."""

    def __init__(self, weights, router):
        super().__init__()
        self.experts = weights
        self.router = torch.nn.Parameter(router, requires_grad=False)

    def forward(self, x):
        logits = x.float() @ self.router
        top = torch.topk(torch.softmax(logits, dim=-1), 2, dim=-1)
        topk_weights, topk_ids = top[0], top[1]  # (no tuple unpacking: torch.fx on 1.13)
        topk_weights = topk_weights / topk_weights.sum(dim=-1, keepdim=True)
        return mtorch.fused_experts(x, self.experts, None, topk_weights, topk_ids.to(torch.int32),
                                    activation="silu")


# ---------------------------------------------------------------- CPU tensors

@pytest.fixture(scope="module")
def layer():
    return Layer(seed=71, format="gptq", asymmetric=True, E=6, K=128, N=64, group_size=64)


@pytest.fixture(scope="module")
def cpu_weights(layer):
    with layer.weights(backend="cpu") as w:
        yield w


@pytest.mark.parametrize("dtype", ["f32", "f16", "bf16"])
@pytest.mark.parametrize("on_input", [False, True])
def test_op_equals_weights_forward_on_cpu(layer, cpu_weights, dtype, on_input):
    x, tw, ids = _tensors(layer, 9, 2, dtype=dtype)
    got = torch.ops.moeint4.fused_experts(cpu_weights.handle, x, tw, ids, "silu", None, on_input)
    assert got.dtype == x.dtype and got.shape == x.shape
    direct = cpu_weights.forward(x, ids, tw, apply_router_weight_on_input=on_input)
    assert torch.equal(got, direct)
    want = _want(layer, x, tw, ids, apply_router_weight_on_input=on_input)
    assert _error(got, want) <= tolerance(dtype, layer.K, layer.N)


def test_out_variant_writes_the_callers_tensor(layer, cpu_weights):
    x, tw, ids = _tensors(layer, 7, 3)
    out = torch.full_like(x, float("nan"))
    assert torch.ops.moeint4.fused_experts_out(out, cpu_weights.handle, x, tw, ids, "gelu",
                                               None, False) is None
    assert torch.equal(out, cpu_weights.forward(x, ids, tw, activation="gelu"))


def test_vllm_keywords_new_inplace_and_out(layer, cpu_weights):
    x, tw, ids = _tensors(layer, 5, 2, dtype="bf16")
    want = cpu_weights.forward(x, ids, tw)
    fresh = mtorch.fused_experts(hidden_states=x, w1=cpu_weights, w2=None, topk_weights=tw,
                                 topk_ids=ids.to(torch.int64), inplace=False, activation="silu",
                                 apply_router_weight_on_input=False, global_num_experts=-1,
                                 expert_map=None, use_int4_w4a16=True, w1_scale=None,
                                 w2_scale=None, w1_zp=None, w2_zp=None, block_shape=None)
    assert torch.equal(fresh, want) and fresh.data_ptr() != x.data_ptr()
    hidden = x.clone()
    result = mtorch.fused_experts(hidden, cpu_weights, cpu_weights, tw, ids, inplace=True)
    assert result is hidden and torch.equal(hidden, want)
    out = torch.empty_like(x)
    assert mtorch.fused_experts(x, cpu_weights, None, tw, ids, out=out) is out
    assert torch.equal(out, want)


def test_swigluoai_is_the_clamped_swiglu(layer, cpu_weights):
    x, tw, ids = _tensors(layer, 4, 2)
    got = mtorch.fused_experts(x, cpu_weights, None, tw, ids, activation="swigluoai")
    assert torch.equal(got, cpu_weights.forward(x, ids, tw, activation="swiglu_clamp"))


def test_expert_map_must_be_the_prepared_one():
    expert_map = np.array([-1, 0, -1, 1, 2, -1], dtype=np.int32)
    layer = Layer(seed=73, E=3, expert_map=expert_map)
    with layer.weights(backend="cpu") as w:
        x, tw, ids = _tensors(layer, 6, 2)
        given = torch.from_numpy(expert_map.astype(np.int64))
        got = mtorch.fused_experts(x, w, None, tw, ids, global_num_experts=6, expert_map=given)
        assert torch.equal(got, w.forward(x, ids, tw))
        assert _error(got, _want(layer, x, tw, ids)) <= tolerance("f32", layer.K, layer.N)
        given[0] = 2  # changed in place: checked again
        with pytest.raises(ValueError, match="expert_map differs"):
            mtorch.fused_experts(x, w, None, tw, ids, expert_map=given)
        with pytest.raises(ValueError, match=r"expert_map has shape \(5,\)"):
            mtorch.fused_experts(x, w, None, tw, ids, expert_map=torch.arange(5))


def test_bad_arguments_are_refused(layer, cpu_weights):
    x, tw, ids = _tensors(layer, 3, 2)
    with pytest.raises(ValueError, match="global_num_experts = 7"):
        mtorch.fused_experts(x, cpu_weights, None, tw, ids, global_num_experts=7)
    with pytest.raises(ValueError, match="use_fp8_w8a8"):
        mtorch.fused_experts(x, cpu_weights, None, tw, ids, use_fp8_w8a8=True)
    with pytest.raises(TypeError, match="unexpected keyword argument 'renormalise'"):
        mtorch.fused_experts(x, cpu_weights, None, tw, ids, renormalise=True)
    with pytest.raises(TypeError, match="moeint4.Weights"):
        mtorch.fused_experts(x, torch.zeros(1), None, tw, ids)
    with pytest.raises(ValueError, match="activation must be one of"):
        mtorch.fused_experts(x, cpu_weights, None, tw, ids, activation="relu")
    with pytest.raises(ValueError, match="no open moeint4 Weights"):
        torch.ops.moeint4.fused_experts(12345, x, tw, ids)
    bad = ids.to(torch.int64)
    bad[2, 1] = 2 ** 32 + 1
    out = torch.full_like(x, 7.0)
    with pytest.raises(moeint4.MoeInt4Error, match=r"topk_ids\[2\]\[1\] = 4294967297 is outside"):
        mtorch.fused_experts(x, cpu_weights, None, tw, bad, out=out)
    assert (out == 7.0).all()


def test_inside_a_capture_the_op_runs_async_with_a_torch_workspace(layer, cpu_weights,
                                                                   monkeypatch):
    """The capture branch, on CPU tensors (the CPU backend accepts the flag):
    asynchronous=True and a torch uint8 workspace of workspace_size bytes."""
    if not moeint4.has_async_forward():
        pytest.skip("this libmoeint4 has no asynchronous forward")
    seen = []
    forward = moeint4.Weights.forward

    def recording(self, *args, **kwargs):
        seen.append((kwargs.get("asynchronous"), kwargs.get("workspace")))
        return forward(self, *args, **kwargs)

    monkeypatch.setattr(moeint4.Weights, "forward", recording)
    monkeypatch.setattr(mtorch, "_capturing", lambda hidden_states: True)
    x, tw, ids = _tensors(layer, 6, 2, dtype="f16")
    got = torch.ops.moeint4.fused_experts(cpu_weights.handle, x, tw, ids)
    (asynchronous, workspace), = seen
    assert asynchronous is True and isinstance(workspace, torch.Tensor)
    assert workspace.dtype == torch.uint8
    assert workspace.numel() == max(cpu_weights.workspace_size(6, 2, "f16"), 1)
    mtorch.check(cpu_weights)
    monkeypatch.undo()
    assert torch.equal(got, cpu_weights.forward(x, ids, tw))


def test_meta_tensors_never_reach_the_library(layer):
    x, tw, ids = (t.to("meta") for t in _tensors(layer, 11, 2, dtype="bf16"))
    got = torch.ops.moeint4.fused_experts(0, x, tw, ids)  # no weights needed: shapes only
    assert got.device.type == "meta" and got.shape == x.shape and got.dtype == x.dtype
    torch.ops.moeint4.fused_experts_out(torch.empty_like(x), 0, x, tw, ids)


def test_fx_trace_of_a_moe_block(layer, cpu_weights):
    router = torch.from_numpy(layer.rng.standard_normal((layer.K, layer.E)).astype(np.float32))
    block = MoEBlock(cpu_weights, router)
    x = torch.from_numpy(layer.rng.standard_normal((13, layer.K)).astype(np.float32))
    traced = torch.fx.symbolic_trace(block)
    assert "moeint4.fused_experts" in str(traced.graph)
    assert torch.equal(traced(x), block(x))


@pytest.mark.skipif(not HAS_COMPILE, reason=f"torch {torch.__version__} has no torch.compile")
def test_compile_fullgraph_on_cpu(layer, cpu_weights):
    router = torch.from_numpy(layer.rng.standard_normal((layer.K, layer.E)).astype(np.float32))
    block = MoEBlock(cpu_weights, router)
    x = torch.from_numpy(layer.rng.standard_normal((13, layer.K)).astype(np.float32))
    compiled = torch.compile(block, fullgraph=True, backend="aot_eager")
    got = compiled(x)
    assert torch.allclose(got, block(x), rtol=1e-6, atol=1e-6)
    hidden = x.clone()
    inplace = torch.compile(lambda h, tw, ids: mtorch.fused_experts(
        h, cpu_weights, None, tw, ids, inplace=True), fullgraph=True, backend="aot_eager")
    _, tw, ids = _tensors(layer, 13, 2)
    inplace(hidden, tw, ids)
    assert torch.equal(hidden, cpu_weights.forward(x, ids, tw))


# ---------------------------------------------------------------- GPU tensors

needs_gpu = pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA/ROCm device")


@pytest.fixture(scope="module")
def gpu_layer():
    if not any(b.name == "hip" and b.available for b in moeint4.backends()):
        pytest.skip("the HIP backend (libmoeint4-hip.so) is not available here")
    return Layer(seed=79, format="awq", asymmetric=True, E=16, K=512, N=256, group_size=128)


@pytest.fixture(scope="module")
def gpu_weights(gpu_layer):
    with gpu_layer.weights(backend="hip") as w:
        yield w


def _needs_async():
    if not moeint4.has_async_forward():
        pytest.skip("this libmoeint4 has no asynchronous forward (moeint4_forward_workspace_size)")


@needs_gpu
@pytest.mark.parametrize("dtype", ["f16", "bf16"])
def test_gpu_eager_op_on_the_callers_stream(gpu_layer, gpu_weights, dtype):
    x, tw, ids = _tensors(gpu_layer, 33, 4, "cuda", dtype)
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        got = torch.ops.moeint4.fused_experts(gpu_weights.handle, x, tw, ids)
        hidden = x.clone()
        mtorch.fused_experts(hidden, gpu_weights, None, tw, ids, inplace=True)
    stream.synchronize()
    want = _want(gpu_layer, x, tw, ids)
    assert _error(got, want) <= tolerance(dtype, gpu_layer.K, gpu_layer.N, bf16_weights=True)
    assert torch.equal(hidden, got)
    assert torch.equal(got, gpu_weights.forward(x, ids, tw))


@needs_gpu
@pytest.mark.skipif(not HAS_COMPILE, reason="no torch.compile")
def test_gpu_compile_fullgraph(gpu_layer, gpu_weights):
    router = torch.from_numpy(gpu_layer.rng.standard_normal(
        (gpu_layer.K, gpu_layer.E)).astype(np.float32)).cuda()
    block = MoEBlock(gpu_weights, router).cuda()
    x = torch.from_numpy(gpu_layer.rng.standard_normal((40, gpu_layer.K))).to("cuda", torch.bfloat16)
    compiled = torch.compile(block, fullgraph=True)
    got = compiled(x)
    logits = x.float() @ router
    tw, ids = torch.topk(torch.softmax(logits, dim=-1), 2, dim=-1)
    tw = tw / tw.sum(dim=-1, keepdim=True)
    want = _want(gpu_layer, x, tw, ids.to(torch.int32))
    assert _error(got, want) <= tolerance("bf16", gpu_layer.K, gpu_layer.N, bf16_weights=True)


@needs_gpu
def test_gpu_async_forward_with_a_torch_workspace_equals_sync(gpu_layer, gpu_weights):
    _needs_async()
    x, tw, ids = _tensors(gpu_layer, 64, 4, "cuda", "bf16")
    workspace = torch.empty(gpu_weights.workspace_size(64, 4, "bf16"), dtype=torch.uint8,
                            device="cuda")
    got = gpu_weights.forward(x, ids, tw, asynchronous=True, workspace=workspace)
    mtorch.check(gpu_weights)
    assert torch.equal(got, gpu_weights.forward(x, ids, tw))


@needs_gpu
@pytest.mark.parametrize("M", [1, 8, 64])
def test_gpu_cuda_graph_capture_and_replay(gpu_layer, gpu_weights, M):
    _needs_async()
    topk = 4
    static_x, static_tw, static_ids = _tensors(gpu_layer, M, topk, "cuda", "bf16")
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):  # warm-up outside the capture, as torch asks
        mtorch.fused_experts(static_x, gpu_weights, None, static_tw, static_ids)
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        static_out = mtorch.fused_experts(static_x, gpu_weights, None, static_tw, static_ids)
    for _ in range(20):  # new inputs copied into the captured buffers
        x, tw, ids = _tensors(gpu_layer, M, topk, "cuda", "bf16")
        static_x.copy_(x)
        static_tw.copy_(tw)
        static_ids.copy_(ids)
        graph.replay()
        torch.cuda.synchronize()
        assert torch.equal(static_out, gpu_weights.forward(x, ids, tw))
    mtorch.check(gpu_weights)  # nothing bad so far

    # A bad id written before a replay: its slot contributes nothing, and the
    # next check reports it with the synchronous path's message.
    x, tw, ids = _tensors(gpu_layer, M, topk, "cuda", "bf16")
    bad = ids.clone()
    bad[M - 1, 1] = gpu_layer.E + 5
    static_x.copy_(x)
    static_tw.copy_(tw)
    static_ids.copy_(bad)
    graph.replay()
    dropped = tw.clone()
    dropped[M - 1, 1] = 0.0
    want = _want(gpu_layer, x, dropped, ids)
    assert _error(static_out, want) <= tolerance("bf16", gpu_layer.K, gpu_layer.N,
                                                 bf16_weights=True)
    with pytest.raises(moeint4.MoeInt4Error, match=rf"topk_ids\[{M - 1}\]\[1\] = "
                                                   rf"{gpu_layer.E + 5} is outside"):
        mtorch.check(gpu_weights)
    mtorch.check(gpu_weights)  # read and cleared


@needs_gpu
@pytest.mark.skipif(not HAS_COMPILE, reason="no torch.compile")
def test_gpu_compile_reduce_overhead_uses_cuda_graphs(gpu_layer, gpu_weights, monkeypatch):
    _needs_async()
    calls = []
    forward = moeint4.Weights.forward

    def recording(self, *args, **kwargs):  # which forwards ran inside a capture
        calls.append(kwargs.get("asynchronous", False))
        return forward(self, *args, **kwargs)

    monkeypatch.setattr(moeint4.Weights, "forward", recording)
    fn = torch.compile(lambda x, tw, ids: mtorch.fused_experts(x, gpu_weights, None, tw, ids),
                       fullgraph=True, mode="reduce-overhead")
    for _ in range(4):  # the first calls record, later ones replay the graph
        x, tw, ids = _tensors(gpu_layer, 8, 4, "cuda", "bf16")
        got = fn(x, tw, ids).clone()
        assert torch.equal(got, gpu_weights.forward(x, ids, tw))
    assert True in calls, "torch.compile(mode='reduce-overhead') captured no forward"


# ---------------------------------------------------------------- the example

def _run_example(*args):
    import os
    import subprocess
    import sys
    from helpers import REPO
    env = dict(os.environ, PYTHONPATH=str(REPO / "python"))
    result = subprocess.run([sys.executable, str(REPO / "examples" / "python" /
                                                 "torch_moe_block.py"), *args],
                            env=env, capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.rstrip().endswith("OK")


def test_example_moe_block_on_cpu():
    _run_example("--tokens", "16")


@needs_gpu
@pytest.mark.skipif(not HAS_COMPILE, reason="no torch.compile")
def test_example_moe_block_compiled_on_gpu(gpu_layer):
    _run_example("--device", "cuda", "--compile", "--tokens", "64")
