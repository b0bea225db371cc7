"""Error mapping: argument problems the binding can see are reported before
the library is called, naming the tensor; failures inside the library become
MoeInt4Error with the status name and the library's message."""
import numpy as np
import pytest

import moeint4
from moeint4 import _loader
from helpers import Layer


@pytest.fixture
def abi_untouched(monkeypatch):
    """Makes weights_prepare/forward fail loudly if reached."""
    lib = _loader.lib()

    def forbidden(*args):
        raise AssertionError("the ABI was called despite a bad argument")

    for name in ("moeint4_weights_prepare", "moeint4_forward"):
        monkeypatch.setattr(lib, name, forbidden)
    return lib


@pytest.fixture(scope="module")
def layer():
    return Layer(seed=31, format="gptq", asymmetric=True)


def _gptq(t, **over):
    args = dict(w13_qweight=t["w13_qweight"], w13_scales=t["w13_scales"],
                w2_qweight=t["w2_qweight"], w2_scales=t["w2_scales"],
                w13_qzeros=t["w13_qzeros"], w2_qzeros=t["w2_qzeros"])
    args.update(over)
    return moeint4.Weights.from_gptq(**args, backend="cpu")


@pytest.mark.parametrize("name,bad,exc,words", [
    ("w13_qweight", lambda a: a.astype(np.int64), TypeError, "w13_qweight must be int32"),
    ("w13_scales", lambda a: a.astype(np.float32), TypeError, "w13_scales must be float16"),
    ("w2_scales", lambda a: a[:, :, :-8], ValueError, "w2_scales has shape"),
    ("w2_qweight", lambda a: a[1:], ValueError, r"w2_scales has shape .* from w2_qweight"),
    ("w13_qzeros", lambda a: a[:, :, :-1], ValueError, "w13_qzeros has shape"),
    ("w2_qweight", lambda a: np.asfortranarray(a), ValueError, "w2_qweight must be C-contiguous"),
    ("w13_scales", lambda a: a[:, ::-1, :], ValueError, "w13_scales must be C-contiguous"),
    ("w13_scales", lambda a: a.view(np.uint16), TypeError, "w13_scales is uint16"),
    ("w13_qweight", lambda a: a.tolist(), TypeError, "w13_qweight must be a numpy array"),
    ("w13_qweight", lambda a: a[0], ValueError, "w13_qweight has shape"),
])
def test_bad_checkpoint_tensor_named_before_abi(abi_untouched, layer, name, bad, exc, words):
    with pytest.raises(exc, match=words):
        _gptq(layer.tensors, **{name: bad(layer.tensors[name])})


def test_mismatched_layer_sizes_named(abi_untouched, layer):
    other = Layer(seed=32, format="gptq", asymmetric=True, K=256)
    with pytest.raises(ValueError, match="w2_qweight's output size"):
        _gptq(layer.tensors, w2_qweight=other.tensors["w2_qweight"],
              w2_scales=other.tensors["w2_scales"], w2_qzeros=other.tensors["w2_qzeros"])
    with pytest.raises(ValueError, match="group_size = 32 needs 4"):
        moeint4.Weights.from_gptq(layer.tensors["w13_qweight"], layer.tensors["w13_scales"],
                                  layer.tensors["w2_qweight"], layer.tensors["w2_scales"],
                                  group_size=32)
    with pytest.raises(ValueError, match="expert_map has 3 entries but num_experts = 6"):
        layer.weights(expert_map=[0, 1, 2], num_experts=6)


@pytest.mark.parametrize("arg,bad,exc,words", [
    ("x", lambda a: a.astype(np.float64), TypeError, "x must be float32"),
    ("x", lambda a: a[:, :-1], ValueError, r"x has shape \(5, 127\), expected \[M, K\]"),
    ("x", lambda a: a.view(np.uint16)[:, ::2].copy(), TypeError, "x is uint16: pass dtype='bf16'"),
    ("x", lambda a: np.asfortranarray(a), ValueError, "x must be C-contiguous"),
    ("topk_ids", lambda a: a.astype(np.float32), TypeError, "topk_ids must be int32"),
    ("topk_ids", lambda a: a[:-1], ValueError, "topk_ids has shape"),
    ("topk_weights", lambda a: a[:, :1].copy(), ValueError, "topk_weights has shape"),
    ("topk_weights", lambda a: a.astype(np.int32), TypeError, "topk_weights must be float32"),
    ("out", lambda a: np.empty((5, 128), np.float16), TypeError, "out must be float32"),
    ("out", lambda a: np.empty((4, 128), np.float32), ValueError, "out has shape"),
])
def test_bad_forward_argument_named_before_abi(layer, arg, bad, exc, words, monkeypatch):
    with layer.weights(backend="cpu") as w:
        inp = layer.inputs(5, 2)
        args = dict(x=inp["x32"], topk_ids=inp["topk_ids"], topk_weights=inp["topk_weights"],
                    out=np.empty((5, 128), np.float32))
        args[arg] = bad(args[arg])
        monkeypatch.setattr(_loader.lib(), "moeint4_forward",
                            lambda *a: pytest.fail("ABI called despite a bad argument"))
        with pytest.raises(exc, match=words):
            w.forward(**args)
        with pytest.raises(ValueError, match="activation must be one of"):
            w.forward(inp["x32"], inp["topk_ids"], inp["topk_weights"], activation="relu")


def _expect(status_name, words, fn, *args, **kwargs):
    with pytest.raises(moeint4.MoeInt4Error) as info:
        fn(*args, **kwargs)
    err = info.value
    assert err.status_name == status_name, str(err)
    assert words in err.message, err.message
    assert status_name in str(err) and words in str(err)
    return err


def test_library_errors_become_moeint4_error(layer):
    t = dict(layer.tensors)
    nan_scales = t["w13_scales"].copy()
    nan_scales[2, 1, 17] = np.nan
    err = _expect("MOEINT4_INVALID_ARGUMENT", "w13_scales", _gptq, t, w13_scales=nan_scales)
    assert err.status == 1 and err.function == "moeint4_weights_prepare"

    with layer.weights(backend="cpu") as w:
        inp = layer.inputs(4, 2)
        ids = inp["topk_ids"].copy()
        ids[3, 1] = 130
        out = np.full((4, layer.K), 7.0, np.float32)
        _expect("MOEINT4_INVALID_ARGUMENT", "topk_ids", w.forward, inp["x32"], ids,
                inp["topk_weights"], out=out)
        assert (out == 7.0).all(), "output touched by a failing call"
        tw = inp["topk_weights"].copy()
        tw[0, 0] = np.inf
        _expect("MOEINT4_INVALID_ARGUMENT", "topk_weights", w.forward, inp["x32"],
                inp["topk_ids"], tw)
        _expect("MOEINT4_INVALID_ARGUMENT", "swiglu", w.forward, inp["x32"], inp["topk_ids"],
                inp["topk_weights"], activation="swiglu_clamp", swiglu_limit=-1.0)


@pytest.mark.parametrize("bad", [2 ** 32 + 1, -(2 ** 32), 2 ** 31, -1])
def test_int64_ids_are_range_checked_before_narrowing(layer, bad):
    """2**32 + 1 narrowed to int32 is 1, a valid id: the check must come first."""
    with layer.weights(backend="cpu") as w:
        inp = layer.inputs(4, 2)
        ids = inp["topk_ids"].astype(np.int64)
        ids[3, 1] = bad
        out = np.full((4, layer.K), 7.0, np.float32)
        err = _expect("MOEINT4_INVALID_ARGUMENT", f"topk_ids[3][1] = {bad} is outside [0, {layer.E})",
                      w.forward, inp["x32"], ids, inp["topk_weights"], out=out)
        assert err.function == "moeint4_forward"
        assert (out == 7.0).all(), "output touched by a failing call"
        assert ids[3, 1] == bad, "input modified"


def test_unsupported_and_unknown_names(layer):
    t = layer.tensors
    g_idx13 = np.tile(np.arange(layer.K, dtype=np.int32) % 2, (layer.E, 1))  # act-order: not k // g
    g_idx13[:, 0] = 1  # ... with one group a row too large: malformed
    g_idx2 = np.tile(np.arange(layer.N, dtype=np.int32) // 64, (layer.E, 1))
    _expect("MOEINT4_INVALID_ARGUMENT", "g_idx", _gptq, t, w13_g_idx=g_idx13, w2_g_idx=g_idx2)
    _expect("MOEINT4_INVALID_ARGUMENT", "", moeint4.Context, "no-such-backend")
    bad_group = Layer(seed=33, format="gptq", K=96, N=48, group_size=48)
    _expect("MOEINT4_INVALID_ARGUMENT", "group_size", bad_group.weights, backend="cpu")


def test_expert_map_checked_by_library():
    layer = Layer(seed=37, E=4, expert_map=np.array([0, 1, 1, 2, 3], dtype=np.int32))
    _expect("MOEINT4_INVALID_ARGUMENT", "expert_map", layer.weights, backend="cpu")


def test_forced_unavailable_backend_says_why():
    names = {b.name: b for b in moeint4.backends()}
    absent = [b for b in names.values() if not b.available]
    if not absent:
        pytest.skip("every backend is available here")
    with pytest.raises(moeint4.MoeInt4Error) as info:
        layer = Layer(seed=41)
        with moeint4.Context(absent[0].name) as ctx:
            layer.weights(context=ctx)
    assert info.value.status_name in ("MOEINT4_BACKEND_UNAVAILABLE", "MOEINT4_UNSUPPORTED")
    assert info.value.message
