"""moeint4.Checkpoint and Weights.from_checkpoint on the checkpoints that
tests/checkpoints/make_checkpoints.py writes in the real formats: layer
info, arrays, and forward() against a float64 reference built from the
generator's dense weights."""
import json
import subprocess
import sys

import numpy as np
import pytest

import moeint4
from helpers import REPO

NAMES = ["qwen3_moe_gptq_v1_act_order", "qwen2_moe_gptq_sym_shared", "mixtral_awq_gemm_g64",
         "deepseek_v2_gptq_v2", "qwen3_moe_gptq_fused"]


@pytest.fixture(scope="module")
def generated(tmp_path_factory):
    out = tmp_path_factory.mktemp("checkpoints")
    subprocess.run([sys.executable, str(REPO / "tests" / "checkpoints" / "make_checkpoints.py"),
                    str(out)], check=True, capture_output=True)
    return out


def silu_moe(w13, w2, x, ids, weights):
    n = w13.shape[1] // 2
    out = np.zeros((x.shape[0], w2.shape[1]))
    for m in range(x.shape[0]):
        for j in range(ids.shape[1]):
            h = w13[ids[m, j]].astype(np.float64) @ x[m].astype(np.float64)
            a = h[:n] / (1.0 + np.exp(-h[:n])) * h[n:]
            out[m] += weights[m, j] * (w2[ids[m, j]].astype(np.float64) @ a)
    return out


def dense(generated, name, key, e, rows, cols):
    return np.fromfile(generated / f"{name}.expected" / f"{key}.f32", np.float32).reshape(e, rows, cols)


@pytest.mark.parametrize("name", NAMES)
def test_every_layer_forward(generated, name):
    expect = json.loads((generated / f"{name}.expected" / "expect.json").read_text())
    rng = np.random.default_rng(5)
    with moeint4.Checkpoint(generated / name) as ck:
        assert ck.layers == expect["moe_layers"]
        assert ck.info["model_type"] == expect["family"]
        assert ck.warnings == []
        for layer in ck.layers:
            info = ck.layer(layer).info
            assert (info.num_experts, info.hidden_size, info.intermediate_size, info.top_k) == (
                expect["num_experts"], expect["hidden_size"], expect["intermediate_size"],
                expect["top_k"])
            assert (info.format, info.group_size, info.act_order) == (
                expect["format"], expect["group_size"], expect["act_order"])
            E, K, N, k = info.num_experts, info.hidden_size, info.intermediate_size, info.top_k
            w = moeint4.Weights.from_checkpoint(ck, layer=layer, backend="cpu")
            x = rng.standard_normal((6, K)).astype(np.float32)
            ids = np.stack([rng.choice(E, k, replace=False) for _ in range(6)]).astype(np.int32)
            tw = rng.uniform(0.1, 1.0, (6, k)).astype(np.float32)
            out = w.forward(x, ids, tw)
            ref = silu_moe(dense(generated, name, f"L{layer}.w13", E, 2 * N, K),
                           dense(generated, name, f"L{layer}.w2", E, K, N), x, ids, tw)
            assert np.linalg.norm(out - ref) <= 1e-5 * np.linalg.norm(ref)
            w.close()
            if info.shared_quantized:
                s = moeint4.Weights.from_checkpoint(ck, layer=layer, shared=True, backend="cpu")
                SN = info.shared_intermediate_size
                out = s.forward(x, np.zeros((6, 1), np.int32), np.ones((6, 1), np.float32))
                ref = silu_moe(dense(generated, name, f"L{layer}.shared_w13", 1, 2 * SN, K),
                               dense(generated, name, f"L{layer}.shared_w2", 1, K, SN), x,
                               np.zeros((6, 1), np.int32), np.ones((6, 1), np.float32))
                assert np.linalg.norm(out - ref) <= 1e-5 * np.linalg.norm(ref)
                s.close()


def test_from_path_arrays_and_tensors(generated):
    path = generated / "deepseek_v2_gptq_v2"
    w = moeint4.Weights.from_checkpoint(str(path), layer=2, backend="cpu")
    assert (w.num_experts, w.format) == (8, "gptq_asym")
    w.close()
    with moeint4.Checkpoint(path) as ck:
        assert ck.layers == [1, 2]  # layer 0 is DeepSeek's dense first layer
        layer = ck.layer(1)
        assert layer.info.shared_experts == 2 and layer.info.shared_prefix.endswith("shared_experts")
        a = layer.arrays()
        assert a["w13_qweight"].shape == (8, 256 // 8, 2 * 128) and a["zero_offset"] == 0
        router = ck.tensor(layer.info.router_name)
        assert router.shape == (8, 256) and router.dtype == np.uint16  # BF16 bits
        assert "model.layers.0.mlp.gate_proj.qweight" in ck.tensor_names()
    with pytest.raises(moeint4.MoeInt4Error) as info:
        moeint4.Weights.from_checkpoint(path, layer=0)
    assert "layer 0 is not a MoE layer of this checkpoint (MoE layers: 1, 2)" in str(info.value)


def test_bad_files_raise_with_file_and_tensor(generated):
    with pytest.raises(moeint4.MoeInt4Error) as info:
        moeint4.Checkpoint(generated / "bad" / "expert_qweight_other_shape")
    text = str(info.value)
    assert "model.layers.0.block_sparse_moe.experts.1.w1.qweight" in text and ".safetensors" in text
    with moeint4.Checkpoint(generated / "bad" / "sym_labeled_v1_stored_v2") as ck:
        ck.layer(0).arrays()
        assert any("mislabeled" in line for line in ck.warnings)
