"""forward() against the float64 numpy reference across formats, dtypes,
activations, expert maps and router-weight placement (CPU backend)."""
import numpy as np
import pytest

import moeint4
from helpers import (Layer, load_vector, poisoned_like, rel_l2, to_dtype, to_float64, tolerance,
                     vector_params)
from moeint4 import reference as ref

FORMATS = [("gptq", False, 0), ("gptq", True, 0), ("gptq", True, 1), ("awq", True, 0)]
DTYPES = ["f32", "f16", "bf16"]


def _run(layer, w, dtype, M=9, topk=2, use_out=True, **kwargs):
    inp = layer.inputs(M, topk)
    x = to_dtype(inp["x32"], dtype)
    declared = {"dtype": "bf16"} if dtype == "bf16" else {}
    if use_out:
        out = poisoned_like(x)
        result = w.forward(x, inp["topk_ids"], inp["topk_weights"], out=out, **declared, **kwargs)
        assert result is out
    else:
        result = w.forward(x, inp["topk_ids"], inp["topk_weights"], **declared, **kwargs)
        assert isinstance(result, np.ndarray) and result.dtype == x.dtype
        assert result.shape == x.shape
    ref_kwargs = {k: v for k, v in kwargs.items() if k != "apply_router_weight_on_input"}
    renamed = {{"swiglu_limit": "limit", "swiglu_alpha": "alpha", "swiglu_beta": "beta"}.get(k, k): v
               for k, v in ref_kwargs.items()}
    want = layer.reference(to_float64(x, dtype), inp["topk_ids"], inp["topk_weights"],
                           apply_router_weight_on_input=kwargs.get(
                               "apply_router_weight_on_input", False), **renamed)
    got = to_float64(result, dtype)
    assert np.isfinite(got).all()
    error = rel_l2(got, want)
    assert error <= tolerance(dtype, layer.K, layer.N), f"relative L2 error {error:.3g}"
    return error


@pytest.mark.parametrize("fmt,asym,zero_offset", FORMATS)
@pytest.mark.parametrize("dtype", DTYPES)
def test_formats_and_dtypes(fmt, asym, zero_offset, dtype):
    seed = 100 + 10 * FORMATS.index((fmt, asym, zero_offset)) + DTYPES.index(dtype)
    layer = Layer(seed=seed, format=fmt, asymmetric=asym,
                  zero_offset=zero_offset)
    with layer.weights(backend="cpu") as w:
        assert w.backend == "cpu"
        _run(layer, w, dtype)


@pytest.mark.parametrize("group_size", [32, 128, -1])
def test_group_sizes_inferred(group_size):
    layer = Layer(seed=7, format="gptq", asymmetric=True, K=256, N=128, group_size=group_size)
    t = layer.tensors
    with moeint4.Weights.from_gptq(t["w13_qweight"], t["w13_scales"], t["w2_qweight"],
                                   t["w2_scales"], t["w13_qzeros"], t["w2_qzeros"],
                                   backend="cpu") as w:
        assert w.group_size == group_size
        _run(layer, w, "f32")


@pytest.mark.parametrize("activation", ["silu", "gelu", "swiglu_clamp"])
@pytest.mark.parametrize("dtype", ["f32", "bf16"])
def test_activations(activation, dtype):
    layer = Layer(seed=11, format="awq", asymmetric=True)
    extra = {}
    if activation == "swiglu_clamp":
        extra = dict(swiglu_limit=0.75, swiglu_alpha=1.5, swiglu_beta=0.5)  # limit that bites
    with layer.weights(backend="cpu") as w:
        _run(layer, w, dtype, activation=activation, **extra)


@pytest.mark.parametrize("dtype", DTYPES)
def test_apply_router_weight_on_input(dtype):
    layer = Layer(seed=13, format="gptq")
    with layer.weights(backend="cpu") as w:
        _run(layer, w, dtype, apply_router_weight_on_input=True)
        # It must change the result (silu is not linear), or the flag is ignored.
        inp = layer.inputs(5, 2)
        x = inp["x32"]
        a = w.forward(x, inp["topk_ids"], inp["topk_weights"])
        b = w.forward(x, inp["topk_ids"], inp["topk_weights"], apply_router_weight_on_input=True)
        assert rel_l2(a.astype(np.float64), b.astype(np.float64)) > 1e-3


@pytest.mark.parametrize("fmt,asym", [("gptq", False), ("awq", True)])
def test_expert_map(fmt, asym):
    # 10 global experts, 6 local, the rest elsewhere; local ids shuffled.
    expert_map = np.array([3, -1, 0, 5, -1, -1, 1, 4, -1, 2], dtype=np.int32)
    layer = Layer(seed=17, format=fmt, asymmetric=asym, E=6, expert_map=expert_map)
    with layer.weights(backend="cpu") as w:
        assert w.num_experts == 10 and w.num_local_experts == 6
        _run(layer, w, "f32", M=12, topk=3)
        _run(layer, w, "bf16", M=12, topk=3)
        # A token routed only to non-local experts gets zeros.
        ids = np.array([[1, 4]], dtype=np.int32)
        out = w.forward(np.ones((1, layer.K), np.float32), ids, np.full((1, 2), 0.5, np.float32),
                        out=poisoned_like(np.ones((1, layer.K), np.float32)))
        assert np.array_equal(out, np.zeros_like(out))


def test_new_output_and_zero_tokens_and_int64_ids():
    layer = Layer(seed=19)
    with layer.weights(backend="cpu") as w:
        _run(layer, w, "f16", use_out=False)
        empty = w.forward(np.zeros((0, layer.K), np.float32), np.zeros((0, 2), np.int32),
                          np.zeros((0, 2), np.float32))
        assert empty.shape == (0, layer.K)
        inp = layer.inputs(4, 2)
        a = w.forward(inp["x32"], inp["topk_ids"], inp["topk_weights"])
        b = w.forward(inp["x32"], inp["topk_ids"].astype(np.int64),
                      inp["topk_weights"].astype(np.float64))
        assert np.array_equal(a, b)


def test_inputs_not_modified():
    layer = Layer(seed=23, format="awq", asymmetric=True)
    t = {k: v.copy() for k, v in layer.tensors.items()}
    with layer.weights(backend="cpu") as w:
        inp = layer.inputs(6, 2)
        copies = {k: v.copy() for k, v in inp.items()}
        w.forward(inp["x32"], inp["topk_ids"], inp["topk_weights"])
        for k in inp:
            assert np.array_equal(inp[k], copies[k]), k
    for k in t:
        assert np.array_equal(layer.tensors[k], t[k]), k


@pytest.mark.parametrize("case", ["case1_gptq_sym_g128", "case3_awq_asym_g64"])
def test_vllm_vectors_end_to_end(case):
    p = vector_params(case)
    get = lambda name: load_vector(case, name)
    asym = p["asym"]
    args = [get("w13_qweight"), get("w13_scales"), get("w2_qweight"), get("w2_scales")]
    if p["fmt"] == "awq":
        w = moeint4.Weights.from_awq(*args, get("w13_qzeros"), get("w2_qzeros"), backend="cpu")
    else:
        w = moeint4.Weights.from_gptq(*args, get("w13_qzeros") if asym else None,
                                      get("w2_qzeros") if asym else None, backend="cpu")
    with w:
        assert w.group_size == p["G"] or (w.group_size == -1 and p["G"] >= p["N"])
        hidden = get("hidden")
        out = w.forward(hidden, get("topk_ids"), get("topk_weights"), dtype="bf16",
                        out=poisoned_like(hidden))
    got = ref.bf16_to_float32(out).astype(np.float64)
    assert rel_l2(got, get("ref_out_f32").astype(np.float64)) < 1e-2


def test_bf16_scales():
    layer = Layer(seed=29, format="gptq", asymmetric=True)
    t = layer.tensors
    s13 = ref.float32_to_bf16(t["w13_scales"].astype(np.float32))
    s2 = ref.float32_to_bf16(t["w2_scales"].astype(np.float32))
    # f16 scales in [0.5,1.5]/(4 sqrt(IN)) are not all bf16-exact: use the rounded ones.
    w13 = ref.dequantize(t["w13_qweight"], s13, t["w13_qzeros"], "gptq", 64, scales_are_bf16=True)
    w2 = ref.dequantize(t["w2_qweight"], s2, t["w2_qzeros"], "gptq", 64, scales_are_bf16=True)
    with moeint4.Weights.from_gptq(t["w13_qweight"], s13, t["w2_qweight"], s2, t["w13_qzeros"],
                                   t["w2_qzeros"], scales_dtype="bf16", backend="cpu") as w:
        inp = layer.inputs(5, 2)
        got = w.forward(inp["x32"], inp["topk_ids"], inp["topk_weights"])
    want = ref.moe(inp["x32"].astype(np.float64), w13, w2, inp["topk_ids"], inp["topk_weights"])
    assert rel_l2(got.astype(np.float64), want) <= tolerance("f32", layer.K, layer.N)


def test_concurrent_forward_on_shared_weights():
    """A prepared handle is immutable: threads sharing it get the serial results
    (ctypes drops the GIL during the call, so the calls really overlap)."""
    from concurrent.futures import ThreadPoolExecutor
    layer = Layer(seed=71, format="awq", asymmetric=True)
    with layer.weights(backend="cpu") as w:
        batches = [layer.inputs(16 + i, 2) for i in range(8)]
        run = lambda b: w.forward(b["x32"], b["topk_ids"], b["topk_weights"])
        serial = [run(b) for b in batches]
        with ThreadPoolExecutor(4) as pool:
            for _ in range(5):
                for got, want in zip(pool.map(run, batches), serial):
                    assert np.array_equal(got, want)


def test_async_flag_on_the_cpu_backend_behaves_as_the_default():
    """The CPU backend accepts the asynchronous flag and a workspace and does
    what it always does: same result, a bad id still fails at once."""
    if not moeint4.has_async_forward():
        pytest.skip("this libmoeint4 has no asynchronous forward")
    layer = Layer(seed=75, format="gptq", asymmetric=True)
    with layer.weights(backend="cpu") as w:
        inp = layer.inputs(9, 2)
        nbytes = w.workspace_size(9, 2, "f32")
        assert nbytes == 0  # the CPU backend keeps its own scratch: no caller workspace
        workspace = np.empty(max(nbytes, 1), dtype=np.uint8)
        want = w.forward(inp["x32"], inp["topk_ids"], inp["topk_weights"])
        got = w.forward(inp["x32"], inp["topk_ids"], inp["topk_weights"], asynchronous=True,
                        workspace=workspace)
        w.check()
        assert np.array_equal(got, want)
        bad = inp["topk_ids"].copy()
        bad[4, 1] = layer.E
        with pytest.raises(moeint4.MoeInt4Error, match=rf"topk_ids\[4\]\[1\] = {layer.E} is outside"):
            w.forward(inp["x32"], bad, inp["topk_weights"], asynchronous=True)
        w.check()  # the failure was reported by the call itself: nothing sticky left


def test_async_forward_needs_a_library_that_has_it(monkeypatch):
    """With the library's async functions: workspace_size checks its dtype.
    Without them (a library built before; simulated where this one has them):
    asking for an asynchronous forward is NotImplementedError."""
    layer = Layer(seed=76)
    with layer.weights(backend="cpu") as w:
        inp = layer.inputs(2, 1)
        if moeint4.has_async_forward():
            assert w.workspace_size(2, 1, "bf16") >= 0
            with pytest.raises(ValueError, match="dtype must be one of"):
                w.workspace_size(2, 1, "f64")
            monkeypatch.setattr(moeint4.weights, "has_async_forward", lambda: False)
        with pytest.raises(NotImplementedError, match="no asynchronous forward"):
            w.forward(inp["x32"], inp["topk_ids"], inp["topk_weights"], asynchronous=True)
        with pytest.raises(NotImplementedError, match="no asynchronous forward"):
            w.workspace_size(2, 1, "bf16")
