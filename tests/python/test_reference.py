"""The numpy reference itself, against vLLM's vectors and round trips: if this
fails, every comparison built on it means nothing."""
import numpy as np
import pytest

from helpers import load_vector, rel_l2, vector_params
from moeint4 import reference as ref

CASES = ["case1_gptq_sym_g128", "case3_awq_asym_g64"]


def _case(case):
    p = vector_params(case)
    fmt = "awq" if p["fmt"] == "awq" else "gptq"
    get = lambda name: load_vector(case, name)
    qz13 = get("w13_qzeros") if p["asym"] else None
    qz2 = get("w2_qzeros") if p["asym"] else None
    w13 = ref.dequantize(get("w13_qweight"), get("w13_scales"), qz13, fmt, p["G"])
    w2 = ref.dequantize(get("w2_qweight"), get("w2_scales"), qz2, fmt, p["G"])
    return p, get, w13, w2


@pytest.mark.parametrize("case", CASES)
def test_unpacking_matches_vllm_natural_codes(case):
    p, get, _, _ = _case(case)
    unpack = ref.unpack_awq if p["fmt"] == "awq" else ref.unpack_gptq
    assert np.array_equal(unpack(get("w13_qweight")), get("debug_w13_q_natural"))
    assert np.array_equal(unpack(get("w2_qweight")), get("debug_w2_q_natural"))
    if p["asym"]:
        assert np.array_equal(ref.unpack_awq(get("w13_qzeros")), get("debug_w13_zero_natural"))


@pytest.mark.parametrize("case", CASES)
def test_dequantize_matches_vllm_exactly(case):
    _, get, w13, w2 = _case(case)
    assert np.array_equal(w13.astype(np.float32), get("deq_w13_f32"))
    assert np.array_equal(w2.astype(np.float32), get("deq_w2_f32"))


@pytest.mark.parametrize("case", CASES)
def test_reference_moe_matches_vllm_output(case):
    _, get, w13, w2 = _case(case)
    x = ref.bf16_to_float32(get("hidden")).astype(np.float64)
    out = ref.moe(x, w13, w2, get("topk_ids"), get("topk_weights"))
    assert rel_l2(out, get("ref_out_f32").astype(np.float64)) < 1e-5


def test_packers_round_trip_and_differ():
    rng = np.random.default_rng(1)
    codes = rng.integers(0, 16, size=(3, 32, 24), dtype=np.uint8)
    assert np.array_equal(ref.unpack_gptq(ref.pack_gptq(codes)), codes)
    assert np.array_equal(ref.unpack_awq(ref.pack_awq(codes)), codes)
    assert np.array_equal(ref.unpack_gptq_zeros(ref.pack_gptq_zeros(codes)), codes)
    assert not np.array_equal(ref.pack_awq(codes), ref.pack_gptq_zeros(codes))


def test_bf16_round_to_nearest_even():
    values = np.array([1.0, 1.0 + 2.0 ** -8, 1.0 + 3 * 2.0 ** -8, -2.5, np.inf, np.nan],
                      dtype=np.float32)
    bits = ref.float32_to_bf16(values)
    # 1 + 2^-8 is halfway between 1 and 1 + 2^-7: ties to even (1.0);
    # 1 + 3*2^-8 is halfway between 1 + 2^-7 and 1 + 2^-6: ties to 1 + 2^-6.
    assert list(bits[:5]) == [0x3F80, 0x3F80, 0x3F82, 0xC020, 0x7F80]
    assert np.isnan(ref.bf16_to_float32(bits[5:]))[0]


def test_activations_known_values():
    h = np.array([[1.0, -2.0, 3.0, 0.5]])
    silu = ref.activate(h, "silu")
    assert np.allclose(silu, [[1.0 / (1 + np.exp(-1.0)) * 3.0, -2.0 / (1 + np.exp(2.0)) * 0.5]])
    gelu = ref.activate(h, "gelu")
    assert np.allclose(gelu[0, 0], 0.8413447460685429 * 3.0)
    clamp = ref.activate(np.array([[10.0, 9.0]]), "swiglu_clamp", limit=7.0, alpha=1.0, beta=1.0)
    assert np.allclose(clamp, [[(7.0 + 1.0) * 7.0 / (1 + np.exp(-7.0))]])
