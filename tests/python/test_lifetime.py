"""Handles: context managers, close(), use after close, contexts that release
their weights, and no growth in memory over 10 000 create/close cycles."""
import gc

import pytest

import moeint4
from helpers import Layer


def _rss_bytes():
    with open("/proc/self/statm") as f:
        resident_pages = int(f.read().split()[1])
    import os
    return resident_pages * os.sysconf("SC_PAGE_SIZE")


@pytest.fixture(scope="module")
def layer():
    return Layer(seed=43, format="gptq", E=2, K=64, N=32, group_size=32)


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
    for _ in range(3):
        layer.weights(backend="cpu")  # dropped at once: __del__ releases
    gc.collect()


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
    _cycles(layer, 1000, make)  # warm up allocator pools and caches
    gc.collect()
    before = _rss_bytes()
    _cycles(layer, 10_000, make)
    gc.collect()
    growth = _rss_bytes() - before
    # One leaked prepared handle holds >= 4 KiB of int4 weights (2 experts x
    # 64 x 64 codes / 2): a leak per cycle would add >= 40 MiB. Allow 2 MiB of
    # allocator noise.
    assert growth < 2 * 1024 * 1024, f"RSS grew by {growth / 1024:.0f} KiB"
