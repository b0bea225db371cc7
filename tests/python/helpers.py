"""Shared pieces of the Python tests: random layers, poisoned outputs and the
error bounds the arithmetic allows."""
from __future__ import annotations

import math
import os
import shutil
from pathlib import Path
from typing import Any, Dict, Optional

import numpy as np

from moeint4 import reference as ref

REPO = Path(__file__).resolve().parents[2]
PACKAGE = REPO / "python" / "moeint4"
VECTORS = Path(os.environ.get("MOEINT4_VECTORS_DIR", REPO / "tests" / "data" / "vllm"))



def package_copy(site: Path) -> Path:
    """Copies the source package to site/moeint4 with no library beside it
    (the loader tests place one where they want it); returns site."""
    shutil.copytree(PACKAGE, site / "moeint4", ignore=shutil.ignore_patterns("__pycache__", "*.so*"))
    return site


# Unit roundoff of each activation dtype.
UNIT_ROUNDOFF = {"f32": 2.0 ** -24, "f16": 2.0 ** -11, "bf16": 2.0 ** -8}


def tolerance(dtype: str, k: int, n: int, bf16_weights: bool = False) -> float:
    """Relative L2 error bound of forward() against the float64 reference fed
    the same (already rounded) x and the exact dequantized weights.
    - f32 accumulation over K then N terms: random-walk error about
      sqrt(K + N) * 2^-24 relative; 8x that is a safe bound.
    - The result is rounded once to dtype (the ABI's rule): every element
      within u relative, so at most u in relative L2.
    - Backends that round to BF16 on the way (HIP: inputs and intermediate,
      and the weights in its BF16 mode) add one bf16 rounding per term; over
      a dot product of random-sign errors that is about u_bf16 / sqrt(3) per
      GEMM: 2 * 2^-8 covers both GEMMs."""
    accumulate = 8.0 * math.sqrt(k + n) * 2.0 ** -24
    weights = 2.0 * UNIT_ROUNDOFF["bf16"] if bf16_weights else 0.0
    return accumulate + UNIT_ROUNDOFF[dtype] + weights


rel_l2 = ref.relative_l2  # ||got - want|| / ||want|| (NaN for a non-finite result)


def to_dtype(x32: np.ndarray, dtype: str) -> np.ndarray:
    """float32 array -> what forward() takes for `dtype` (bf16: uint16 bits)."""
    if dtype == "f32":
        return x32.astype(np.float32)
    if dtype == "f16":
        return x32.astype(np.float16)
    return ref.float32_to_bf16(x32)


def to_float64(x: np.ndarray, dtype: str) -> np.ndarray:
    return (ref.bf16_to_float32(x) if dtype == "bf16" else x).astype(np.float64)


def poisoned_like(x: np.ndarray) -> np.ndarray:
    """An output buffer filled with NaN bit patterns, so an unwritten element fails."""
    out = np.empty_like(x)
    out.view(np.uint8).fill(0xFF)  # all-ones: NaN in f32, f16 and bf16
    return out


class Layer:
    """A random checkpoint plus its dequantized float64 weights."""

    def __init__(self, seed: int, format: str = "gptq", asymmetric: bool = False, E: int = 6,
                 K: int = 128, N: int = 64, group_size: int = 64, zero_offset: int = 0,
                 expert_map: Optional[np.ndarray] = None) -> None:
        self.rng = np.random.default_rng(seed)
        self.format, self.E, self.K, self.N = format, E, K, N
        self.group_size, self.zero_offset = group_size, zero_offset
        self.expert_map = expert_map
        self.num_experts = E if expert_map is None else len(expert_map)
        self.tensors = ref.random_checkpoint(self.rng, format, E, K, N, group_size,
                                             asymmetric, zero_offset)
        t = self.tensors
        self.w13 = ref.dequantize(t["w13_qweight"], t["w13_scales"], t.get("w13_qzeros"),
                                  format, group_size, zero_offset)
        self.w2 = ref.dequantize(t["w2_qweight"], t["w2_scales"], t.get("w2_qzeros"),
                                 format, group_size, zero_offset)

    def weights(self, **kwargs: Any):
        import moeint4
        t = self.tensors
        common: Dict[str, Any] = dict(group_size=self.group_size, expert_map=self.expert_map,
                                      num_experts=self.num_experts)
        common.update(kwargs)
        if self.format == "awq":
            return moeint4.Weights.from_awq(t["w13_qweight"], t["w13_scales"], t["w2_qweight"],
                                            t["w2_scales"], t["w13_qzeros"], t["w2_qzeros"],
                                            **common)
        return moeint4.Weights.from_gptq(t["w13_qweight"], t["w13_scales"], t["w2_qweight"],
                                         t["w2_scales"], t.get("w13_qzeros"), t.get("w2_qzeros"),
                                         zero_offset=self.zero_offset, **common)

    def inputs(self, M: int, topk: int) -> Dict[str, np.ndarray]:
        logits = self.rng.standard_normal((M, self.num_experts))
        routed = ref.route(logits, topk)
        routed["x32"] = self.rng.standard_normal((M, self.K)).astype(np.float32)
        return routed

    def reference(self, x64: np.ndarray, ids: np.ndarray, tw: np.ndarray,
                  **kwargs: Any) -> np.ndarray:
        return ref.moe(x64, self.w13, self.w2, ids, tw, expert_map=self.expert_map, **kwargs)


def load_vector(case: str, name: str) -> np.ndarray:
    import json
    manifest = json.loads((VECTORS / "manifest.json").read_text())
    for c in manifest["cases"]:
        if c["params"]["name"] != case:
            continue
        for a in c["arrays"]:
            if a["name"] == name:
                data = np.fromfile(VECTORS / a["file"], dtype=np.dtype(a["stored_as"]))
                return data.reshape(a["shape"])
    raise KeyError(f"{case}/{name} not in {VECTORS}/manifest.json")


def vector_params(case: str) -> Dict[str, Any]:
    import json
    manifest = json.loads((VECTORS / "manifest.json").read_text())
    return next(c["params"] for c in manifest["cases"] if c["params"]["name"] == case)
