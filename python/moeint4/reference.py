"""A numpy reference for int4 MoE, independent of the library: checkpoint
packing/unpacking (GPTQ, AWQ), dequantization, bfloat16 bit conversions and
the MoE layer in float64. Used by the tests and the example; handy for
checking a checkpoint by hand.

Natural order everywhere: codes[E, IN, OUT] (a checkpoint's [in, out]
orientation), dequantized weights W[E, OUT, IN] (the library's orientation).
"""
from __future__ import annotations

import math
from typing import Dict, Optional

import numpy as np

AWQ_ORDER = (0, 2, 4, 6, 1, 3, 5, 7)  # nibble i of a word holds column 8w + AWQ_ORDER[i]


# ---- bfloat16 as uint16 bit patterns ----
def bf16_to_float32(bits: np.ndarray) -> np.ndarray:
    """uint16 bf16 bit patterns -> float32 (exact)."""
    return (np.asarray(bits, dtype=np.uint16).astype(np.uint32) << 16).view(np.float32)


def float32_to_bf16(values: np.ndarray) -> np.ndarray:
    """float32 -> uint16 bf16 bit patterns, rounded to nearest even (NaN stays NaN)."""
    f = np.ascontiguousarray(values, dtype=np.float32)
    u = f.view(np.uint32).astype(np.uint64)
    rounded = ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)
    nan = np.isnan(f)
    return np.where(nan, ((u >> 16) | 0x40).astype(np.uint16), rounded)


# ---- packing along a dimension: 8 nibbles per int32 word ----
def _pack(codes: np.ndarray, axis: int, order=tuple(range(8))) -> np.ndarray:
    codes = np.moveaxis(np.asarray(codes, dtype=np.uint32), axis, -1)
    shape = codes.shape[:-1] + (codes.shape[-1] // 8, 8)
    grouped = codes.reshape(shape)
    words = np.zeros(shape[:-1], dtype=np.uint32)
    for nibble, column in enumerate(order):
        words |= (grouped[..., column] & 0xF) << np.uint32(4 * nibble)
    return np.ascontiguousarray(np.moveaxis(words.view(np.int32), -1, axis))


def _unpack(words: np.ndarray, axis: int, order=tuple(range(8))) -> np.ndarray:
    words = np.moveaxis(np.asarray(words, dtype=np.int32).view(np.uint32), axis, -1)
    codes = np.zeros(words.shape + (8,), dtype=np.uint8)
    for nibble, column in enumerate(order):
        codes[..., column] = (words >> np.uint32(4 * nibble)) & 0xF
    codes = codes.reshape(words.shape[:-1] + (words.shape[-1] * 8,))
    return np.ascontiguousarray(np.moveaxis(codes, -1, axis))


def pack_gptq(codes: np.ndarray) -> np.ndarray:
    """codes [E, IN, OUT] 0..15 -> GPTQ qweight int32 [E, IN/8, OUT] (along IN, low nibble first)."""
    return _pack(codes, 1)


def unpack_gptq(qweight: np.ndarray) -> np.ndarray:
    return _unpack(qweight, 1)


def pack_gptq_zeros(zeros: np.ndarray) -> np.ndarray:
    """zeros [E, G, OUT] 0..15 -> GPTQ qzeros int32 [E, G, OUT/8] (along OUT, low nibble first)."""
    return _pack(zeros, 2)


def unpack_gptq_zeros(qzeros: np.ndarray) -> np.ndarray:
    return _unpack(qzeros, 2)


def pack_awq(codes: np.ndarray) -> np.ndarray:
    """codes [E, IN, OUT] (or zeros [E, G, OUT]) -> AWQ int32 [E, IN, OUT/8] in AWQ's nibble order."""
    return _pack(codes, 2, AWQ_ORDER)


def unpack_awq(words: np.ndarray) -> np.ndarray:
    return _unpack(words, 2, AWQ_ORDER)


def dequantize(qweight: np.ndarray, scales: np.ndarray, qzeros: Optional[np.ndarray] = None,
               format: str = "gptq", group_size: int = -1, zero_offset: int = 0,
               scales_are_bf16: bool = False) -> np.ndarray:
    """Checkpoint tensors -> float64 W[E, OUT, IN] = (q - zero) * scale.
    GPTQ without qzeros: zero = 8; GPTQ with: stored + zero_offset; AWQ: stored."""
    if format == "awq":
        codes, zeros = unpack_awq(qweight), unpack_awq(qzeros)
    elif format == "gptq":
        codes = unpack_gptq(qweight)
        zeros = None if qzeros is None else unpack_gptq_zeros(qzeros).astype(np.int64) + zero_offset
    else:
        raise ValueError(f"format must be 'gptq' or 'awq', got {format!r}")
    in_features = codes.shape[1]
    size = in_features if group_size == -1 else group_size
    group_of_k = np.arange(in_features) // size
    scale = bf16_to_float32(scales) if scales_are_bf16 else np.asarray(scales)
    scale = scale.astype(np.float64)[:, group_of_k, :]             # [E, IN, OUT]
    zero = 8.0 if zeros is None else zeros.astype(np.float64)[:, group_of_k, :]
    values = (codes.astype(np.float64) - zero) * scale
    return np.ascontiguousarray(values.transpose(0, 2, 1))


# ---- the MoE layer ----
_erf = np.vectorize(math.erf, otypes=[np.float64])


def activate(h: np.ndarray, activation: str = "silu", limit: float = 7.0, alpha: float = 1.702,
             beta: float = 1.0) -> np.ndarray:
    """h [..., 2N] (gate first) -> [..., N]."""
    n = h.shape[-1] // 2
    gate, up = h[..., :n], h[..., n:]
    if activation == "silu":
        return gate / (1.0 + np.exp(-gate)) * up
    if activation == "gelu":
        return 0.5 * gate * (1.0 + _erf(gate / math.sqrt(2.0))) * up
    if activation == "swiglu_clamp":
        g = np.minimum(gate, limit)
        u = np.clip(up, -limit, limit)
        return (u + beta) * g / (1.0 + np.exp(-alpha * g))
    raise ValueError(f"unknown activation {activation!r}")


def moe(x: np.ndarray, w13: np.ndarray, w2: np.ndarray, topk_ids: np.ndarray,
        topk_weights: np.ndarray, activation: str = "silu", limit: float = 7.0,
        alpha: float = 1.702, beta: float = 1.0, expert_map: Optional[np.ndarray] = None,
        apply_router_weight_on_input: bool = False) -> np.ndarray:
    """float64 reference. x [M, K]; w13 [E_l, 2N, K]; w2 [E_l, K, N];
    topk_ids/topk_weights [M, topk]; expert_map [E] global -> local or -1."""
    x = np.asarray(x, dtype=np.float64)
    out = np.zeros_like(x)
    for m in range(x.shape[0]):
        for j in range(topk_ids.shape[1]):
            e = int(topk_ids[m, j])
            local = e if expert_map is None else int(expert_map[e])
            if local < 0:
                continue
            weight = float(topk_weights[m, j])
            inp = x[m] * weight if apply_router_weight_on_input else x[m]
            y = w2[local] @ activate(w13[local] @ inp, activation, limit, alpha, beta)
            out[m] += y if apply_router_weight_on_input else weight * y
    return out


def checkpoint_moe(x: np.ndarray, checkpoint: Dict[str, np.ndarray], format: str,
                   group_size: int, topk_ids: np.ndarray, topk_weights: np.ndarray,
                   zero_offset: int = 0, **options) -> np.ndarray:
    """moe() straight from checkpoint tensors (the keys random_checkpoint
    writes); `options` as moe()."""
    w13, w2 = (dequantize(checkpoint[f"{p}_qweight"], checkpoint[f"{p}_scales"],
                          checkpoint.get(f"{p}_qzeros"), format, group_size, zero_offset)
               for p in ("w13", "w2"))
    return moe(x, w13, w2, topk_ids, topk_weights, **options)


def relative_l2(got: np.ndarray, want: np.ndarray) -> float:
    """||got - want|| / ||want|| in float64 (NaN when got has a non-finite value)."""
    got = np.asarray(got, dtype=np.float64)
    if not np.isfinite(got).all():
        return float("nan")
    want = np.asarray(want, dtype=np.float64)
    return float(np.linalg.norm(got - want) / max(float(np.linalg.norm(want)), 1e-300))


def route(logits: np.ndarray, topk: int) -> Dict[str, np.ndarray]:
    """Softmax over experts, then the top-k (renormalized), as Mixtral routes."""
    z = logits - logits.max(axis=-1, keepdims=True)
    probs = np.exp(z) / np.exp(z).sum(axis=-1, keepdims=True)
    ids = np.argsort(-probs, axis=-1, kind="stable")[:, :topk]
    weights = np.take_along_axis(probs, ids, axis=-1)
    weights = weights / weights.sum(axis=-1, keepdims=True)
    return {"topk_ids": ids.astype(np.int32), "topk_weights": weights.astype(np.float32)}


def random_checkpoint(rng: np.random.Generator, format: str, num_experts: int, hidden_size: int,
                      intermediate_size: int, group_size: int, asymmetric: bool = True,
                      zero_offset: int = 0) -> Dict[str, np.ndarray]:
    """Random w13/w2 tensors as a checkpoint stores them (float16 scales sized
    so activations stay O(1) through the layer). Keys: w13_qweight,
    w13_scales, w13_qzeros (asym only), w2_*. format "gptq" or "awq"."""
    result: Dict[str, np.ndarray] = {}
    for name, n_in, n_out in (("w13", hidden_size, 2 * intermediate_size),
                              ("w2", intermediate_size, hidden_size)):
        groups = 1 if group_size == -1 else n_in // group_size
        codes = rng.integers(0, 16, size=(num_experts, n_in, n_out), dtype=np.uint8)
        scale = rng.uniform(0.5, 1.5, size=(num_experts, groups, n_out)) / (4.0 * math.sqrt(n_in))
        result[f"{name}_scales"] = scale.astype(np.float16)
        if format == "awq":
            result[f"{name}_qweight"] = pack_awq(codes)
        else:
            result[f"{name}_qweight"] = pack_gptq(codes)
        if format == "awq" or asymmetric:
            # Stored zeros; GPTQ v1 stores zero - zero_offset, so keep room for the offset.
            zeros = rng.integers(0, 16 - zero_offset, size=(num_experts, groups, n_out),
                                 dtype=np.uint8)
            result[f"{name}_qzeros"] = pack_awq(zeros) if format == "awq" else pack_gptq_zeros(zeros)
    return result
