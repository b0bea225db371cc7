"""Handles: context managers, close(), use after close, contexts that release
their weights, and no leak over 10 000 create/close cycles. Leaks are counted
by the library itself (moeint4_debug_live_allocations: host blocks allocated
and not freed), which no allocator (glibc, ASan's) can blur the way it blurs
RSS."""
import ctypes
import gc
import weakref

import pytest

import moeint4
from helpers import Layer
from moeint4 import _loader


def _live_allocations():
    count = ctypes.c_int64()
    _loader.lib().moeint4_debug_live_allocations(ctypes.byref(count))
    return count.value


@pytest.fixture(scope="module")
def layer():
    return Layer(seed=43, format="gptq", E=2, K=64, N=32, group_size=32)


def test_context_weights_mode_option(layer):
    """The weights mode is checked, naming the argument; the CPU keeps its int4
    layout in every mode and gives the same bits (the HIP backend's answer to
    each mode: test_torch.py's test_weights_modes_on_hip_backend)."""
    inp = layer.inputs(3, 2)
    outs = []
    for mode in ("auto", "INT4", "bf16"):
        with moeint4.Context("cpu", gpu_weights=mode) as ctx:
            assert ctx.gpu_weights == mode.lower()
            w = layer.weights(backend="cpu", context=ctx)
            outs.append(w.forward(inp["x32"], inp["topk_ids"], inp["topk_weights"]).copy())
    assert all((o == outs[0]).all() for o in outs)
    for bad in ("fp8", "", 2, None):
        with pytest.raises(ValueError, match="gpu_weights"):
            moeint4.Context("cpu", gpu_weights=bad)


def test_use_after_close_raises(layer):
    w = layer.weights(backend="cpu")
    inp = layer.inputs(3, 2)
    w.forward(inp["x32"], inp["topk_ids"], inp["topk_weights"])
    w.close()
    assert w.closed
    with pytest.raises(ValueError, match="closed"):
        w.forward(inp["x32"], inp["topk_ids"], inp["topk_weights"])
    with pytest.raises(ValueError, match="closed"):
        w.memory()
    w.close()  # idempotent


def test_context_manager_and_context_close_releases_weights(layer):
    with moeint4.Context("cpu", num_threads=1) as ctx:
        assert ctx.backend == "cpu"
        with layer.weights(context=ctx) as w:
            assert not w.closed
            host, device = w.memory()
            assert host > 0 and device == 0
            assert "chosen: cpu" in w.explain()
            assert "backend=cpu" in repr(w) and "backend=cpu" in repr(ctx)
        assert w.closed
        kept = layer.weights(context=ctx)
    assert ctx.closed and kept.closed
    inp = layer.inputs(2, 1)
    with pytest.raises(ValueError, match="Weights are closed"):
        kept.forward(inp["x32"], inp["topk_ids"], inp["topk_weights"])
    with pytest.raises(ValueError, match="Context is closed"):
        layer.weights(context=ctx)
    kept.close()  # after its context: nothing left to release, no crash


def test_backend_argument_must_agree_with_context(layer):
    with moeint4.Context("cpu") as ctx:
        with pytest.raises(ValueError, match="differs from the given context"):
            layer.weights(context=ctx, backend="hip")


def test_garbage_collected_handles_are_released(layer):
    layer.weights(backend="cpu").close()  # the shared CPU context exists from here on
    gc.collect()
    before = _live_allocations()
    refs = []
    for _ in range(3):
        w = layer.weights(backend="cpu")
        assert _live_allocations() > before  # a prepared handle holds host blocks
        refs.append(weakref.ref(w))
        del w  # dropped without close(): the finalizer must release it
    gc.collect()
    assert all(ref() is None for ref in refs)
    assert _live_allocations() == before


def test_live_allocation_query_rejects_null():
    with pytest.raises(moeint4.MoeInt4Error, match="count is NULL"):
        _loader.lib().moeint4_debug_live_allocations(None)


def _cycles(layer, count, make):
    for _ in range(count):
        make(layer).close()


@pytest.mark.parametrize("what", ["weights", "context+weights"])
def test_no_leak_over_10000_create_close_cycles(layer, what):
    if what == "weights":
        make = lambda lay: lay.weights(backend="cpu")
    else:
        def make(lay):
            ctx = moeint4.Context("cpu", num_threads=1)
            lay.weights(context=ctx).close()
            return ctx
    _cycles(layer, 10, make)  # the shared CPU context is created once, outside the count
    gc.collect()
    before = _live_allocations()
    _cycles(layer, 10_000, make)
    gc.collect()
    leaked = _live_allocations() - before
    assert leaked == 0, f"{leaked} library allocations still live after 10 000 cycles"
