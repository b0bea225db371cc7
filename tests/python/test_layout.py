"""Layout helpers against the numpy reference and vLLM's vectors."""
import numpy as np
import pytest

import moeint4
from helpers import load_vector
from moeint4 import reference as ref


def _matrix(seed, fmt, asym, E=3, IN=128, OUT=64, group_size=32, zero_offset=0):
    rng = np.random.default_rng(seed)
    groups = 1 if group_size == -1 else IN // group_size
    codes = rng.integers(0, 16, size=(E, IN, OUT), dtype=np.uint8)
    scales = rng.uniform(0.01, 0.2, size=(E, groups, OUT)).astype(np.float16)
    zeros = rng.integers(0, 15, size=(E, groups, OUT), dtype=np.uint8)
    if fmt == "awq":
        return ref.pack_awq(codes), scales, ref.pack_awq(zeros)
    return ref.pack_gptq(codes), scales, ref.pack_gptq_zeros(zeros) if asym else None


CASES = [("gptq", False, 0, 32), ("gptq", True, 0, 64), ("gptq", True, 1, 128),
         ("awq", True, 0, -1), ("awq", True, 0, 32)]


@pytest.mark.parametrize("fmt,asym,zero_offset,group_size", CASES)
def test_dequantize_f32_and_bf16_match_numpy(fmt, asym, zero_offset, group_size):
    qweight, scales, qzeros = _matrix(5, fmt, asym, group_size=group_size)
    want = ref.dequantize(qweight, scales, qzeros, fmt, group_size, zero_offset)
    f32 = moeint4.dequantize_f32(qweight, scales, qzeros, format=fmt, zero_offset=zero_offset)
    assert f32.dtype == np.float32 and f32.shape == want.shape
    assert np.array_equal(f32, want.astype(np.float32))  # exact: (q - z) * s fits f32
    bf16 = moeint4.dequantize_bf16(qweight, scales, qzeros, format=fmt, zero_offset=zero_offset)
    assert bf16.dtype == np.uint16
    assert np.array_equal(bf16, ref.float32_to_bf16(want.astype(np.float32)))
    moeint4.validate(qweight, scales, qzeros, format=fmt, zero_offset=zero_offset)


def test_gptq_to_xpu_matches_numpy_and_vllm():
    qweight, scales, _ = _matrix(7, "gptq", False, E=2, IN=64, OUT=40)
    packed, scales_t = moeint4.gptq_to_xpu(qweight, scales)
    codes = ref.unpack_gptq(qweight).transpose(0, 2, 1)  # [E, OUT, IN]
    assert np.array_equal(packed, (codes[..., 0::2] | (codes[..., 1::2] << 4)).astype(np.uint8))
    assert scales_t.dtype == np.float16
    assert np.array_equal(scales_t, scales.transpose(0, 2, 1))
    case = "case1_gptq_sym_g128"
    for proj in ("w13", "w2"):
        packed, scales_t = moeint4.gptq_to_xpu(load_vector(case, f"{proj}_qweight"),
                                               load_vector(case, f"{proj}_scales"),
                                               group_size=128)
        assert np.array_equal(packed, load_vector(case, f"xpu_{proj}_u8"))
        assert np.array_equal(scales_t, load_vector(case, f"xpu_{proj}_scales"))


@pytest.mark.parametrize("fmt,asym,zero_offset,group_size", CASES)
def test_to_xpu_decodes_to_the_dequantized_weights(fmt, asym, zero_offset, group_size):
    qweight, scales, qzeros = _matrix(13, fmt, asym, group_size=group_size)
    packed, scales_t, zeros = moeint4.to_xpu(qweight, scales, qzeros, format=fmt,
                                             zero_offset=zero_offset)
    codes = np.empty(packed.shape[:2] + (2 * packed.shape[2],), dtype=np.float32)
    codes[..., 0::2], codes[..., 1::2] = packed & 15, packed >> 4
    per_group = codes.shape[2] // zeros.shape[2]  # [E, OUT, IN]: zeros and scales per group
    value = ((codes - np.repeat(zeros, per_group, axis=2).astype(np.float32))
             * np.repeat(scales_t.astype(np.float32), per_group, axis=2))
    want = moeint4.dequantize_f32(qweight, scales, qzeros, format=fmt, zero_offset=zero_offset)
    assert np.array_equal(value, want)  # exact
    if not asym:  # the symmetric call's layout, zero points 8
        assert np.all(zeros == 8)
        assert np.array_equal(packed, moeint4.gptq_to_xpu(qweight, scales)[0])


def test_bf16_scales_round_trip_as_uint16():
    qweight, scales, _ = _matrix(9, "gptq", False)
    bits = ref.float32_to_bf16(scales.astype(np.float32))
    f32 = moeint4.dequantize_f32(qweight, bits, scales_dtype="bf16")
    want = ref.dequantize(qweight, bits, None, "gptq", 32, scales_are_bf16=True)
    assert np.array_equal(f32, want.astype(np.float32))
    _, scales_t = moeint4.gptq_to_xpu(qweight, bits, scales_dtype="bf16")
    assert scales_t.dtype == np.uint16 and np.array_equal(scales_t, bits.transpose(0, 2, 1))


def test_layout_errors():
    qweight, scales, qzeros = _matrix(11, "awq", True)
    with pytest.raises(moeint4.MoeInt4Error) as info:
        moeint4.gptq_to_xpu(*_matrix(11, "gptq", True)[:2],
                            g_idx=np.tile(np.roll(np.arange(128, dtype=np.int32) // 32, 1), (3, 1)))
    assert info.value.status_name == "MOEINT4_UNSUPPORTED"  # act-order: the XPU layout has none
    with pytest.raises(ValueError, match="qzeros is required"):
        moeint4.dequantize_f32(qweight, scales, format="awq")
    bad = scales.copy()
    bad[0, 0, 0] = -1.0
    with pytest.raises(moeint4.MoeInt4Error, match="scales"):
        moeint4.validate(qweight, bad, qzeros, format="awq")
    with pytest.raises(ValueError, match="format must be 'gptq' or 'awq'"):
        moeint4.dequantize_f32(qweight, scales, qzeros, format="exl2")
