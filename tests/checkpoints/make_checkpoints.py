#!/usr/bin/python3
"""Writes small quantized MoE checkpoints in exactly the formats real tools
write (safetensors written here by hand: the safetensors package is not a
dependency), plus what the tests expect of them.

    make_checkpoints.py OUT_DIR

OUT_DIR/<name>/            the checkpoint (config.json, shards, index, ...)
OUT_DIR/<name>.expected/   expect.json (layers, shapes, conventions) and per
                           MoE layer the dense f32 weights every quantized
                           expert stands for: L<l>.w13.f32 [E][2N][K] (gate
                           rows then up rows), L<l>.w2.f32 [E][K][N], and
                           L<l>.shared_w13.f32 / shared_w2.f32 when quantized
OUT_DIR/bad/<case>/        one defect each; bad/cases.json says what the
                           library must answer (status, words in the message)

Packing, from the formats' definitions:
  GPTQ qweight [IN/8, OUT] int32: code of input k in word k // 8, nibble k % 8.
       qzeros [G, OUT/8]: nibble o % 8 of word o // 8 holds the stored zero:
       zero - 1 for checkpoint_format "gptq" (v1), the zero for "gptq_v2".
       g_idx [IN]: the group of input k (act-order: a permutation's order).
  AWQ  qweight [IN, OUT/8]: nibble i of word w holds column 8w + [0,2,4,6,1,3,5,7][i];
       qzeros [G, OUT/8] the same way; no g_idx.
  value = (code - zero) * scale, scales [G, OUT] f16.
"""
import json
import os
import shutil
import struct
import sys

import numpy as np

AWQ_ORDER = [0, 2, 4, 6, 1, 3, 5, 7]


# ---------------------------------------------------------------- safetensors
def bf16_bits(a):
    a = np.ascontiguousarray(a, dtype=np.float32)
    bits = a.view(np.uint32).astype(np.uint64)
    rounded = (bits + 0x7FFF + ((bits >> 16) & 1)) >> 16
    return rounded.astype(np.uint16)


DTYPES = {np.dtype(np.int32): "I32", np.dtype(np.float16): "F16", np.dtype(np.float32): "F32"}


def encode(tensors):
    """{name: ndarray or ("BF16", uint16 array)} -> safetensors bytes, laid out as the
    safetensors package does: header padded with spaces to 8 bytes, data in order."""
    header, blobs, offset = {}, [], 0
    for name in sorted(tensors):
        value = tensors[name]
        if isinstance(value, tuple):
            dtype, array = value
        else:
            array = np.ascontiguousarray(value)
            dtype = DTYPES[array.dtype]
        raw = np.ascontiguousarray(array).tobytes()
        header[name] = {"dtype": dtype, "shape": list(array.shape),
                        "data_offsets": [offset, offset + len(raw)]}
        blobs.append(raw)
        offset += len(raw)
    header["__metadata__"] = {"format": "pt"}
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * ((8 - len(text) % 8) % 8)
    return struct.pack("<Q", len(text)) + text + b"".join(blobs)


def write_sharded(directory, tensors, shards=2):
    """Splits tensors over `shards` files by layer (as save_pretrained fills shards
    in order) and writes model.safetensors.index.json."""
    names = sorted(tensors, key=lambda n: (layer_of(n), n))
    per = (len(names) + shards - 1) // shards
    weight_map, total = {}, 0
    for s in range(shards):
        file = f"model-{s + 1:05d}-of-{shards:05d}.safetensors"
        part = {n: tensors[n] for n in names[s * per:(s + 1) * per]}
        data = encode(part)
        total += len(data)
        with open(os.path.join(directory, file), "wb") as f:
            f.write(data)
        for n in part:
            weight_map[n] = file
    index = {"metadata": {"total_size": total}, "weight_map": dict(sorted(weight_map.items()))}
    with open(os.path.join(directory, "model.safetensors.index.json"), "w") as f:
        json.dump(index, f, indent=2)


def layer_of(name):
    parts = name.split(".")
    return int(parts[2]) if len(parts) > 2 and parts[1] == "layers" else 10 ** 6


# ---------------------------------------------------------------- quantizers
class Quant:
    def __init__(self, method, group, sym=False, v2=False, act_order=False):
        self.method, self.group, self.sym, self.v2, self.act_order = method, group, sym, v2, act_order


def random_projection(rng, q, n_in, n_out, g_idx=None):
    """Codes [OUT][IN], zeros [G][OUT] (the value subtracted), scales [G][OUT] f16, g_idx [IN]."""
    group = q.group if q.group > 0 else n_in
    groups = n_in // group
    if g_idx is None:
        if q.act_order:
            order = rng.permutation(n_in)            # desc_act: quantization order
            g_idx = np.empty(n_in, np.int32)
            g_idx[order] = np.arange(n_in) // group
        else:
            g_idx = (np.arange(n_in) // group).astype(np.int32)
    codes = rng.integers(0, 16, size=(n_out, n_in), dtype=np.uint8)
    if q.sym:
        zeros = np.full((groups, n_out), 8, np.uint8)
    else:
        zeros = rng.integers(1, 16, size=(groups, n_out), dtype=np.uint8)  # v1 stores zero - 1 >= 0
    scale = 1.0 / (8.0 * np.sqrt(n_in))
    scales = (rng.uniform(0.5, 1.5, size=(groups, n_out)) * scale).astype(np.float16)
    return codes, zeros, scales, g_idx


def dense(codes, zeros, scales, g_idx):
    """[OUT][IN] f32: (code - zero[g_idx[k]]) * scale[g_idx[k]], exact in f32."""
    z = zeros[g_idx, :].T.astype(np.float32)                 # [OUT][IN]
    s = scales[g_idx, :].T.astype(np.float32)
    return (codes.astype(np.float32) - z) * s


def pack_gptq(q, codes, zeros, scales, g_idx, with_g_idx=True):
    n_out, n_in = codes.shape
    c = codes.T.reshape(n_in // 8, 8, n_out).astype(np.uint32)   # [IN/8][8][OUT]
    qweight = np.zeros((n_in // 8, n_out), np.uint32)
    for i in range(8):
        qweight |= c[:, i, :] << (4 * i)
    stored = zeros.astype(np.int64) - (0 if q.v2 else 1)
    assert stored.min() >= 0
    z = stored.reshape(zeros.shape[0], n_out // 8, 8).astype(np.uint32)
    qzeros = np.zeros((zeros.shape[0], n_out // 8), np.uint32)
    for i in range(8):
        qzeros |= z[:, :, i] << (4 * i)
    out = {"qweight": qweight.view(np.int32), "qzeros": qzeros.view(np.int32), "scales": scales}
    if with_g_idx:
        out["g_idx"] = g_idx.astype(np.int32)
    return out


def pack_awq(codes, zeros, scales):
    n_out, n_in = codes.shape
    c = codes.T.reshape(n_in, n_out // 8, 8).astype(np.uint32)   # [IN][OUT/8][8 columns]
    qweight = np.zeros((n_in, n_out // 8), np.uint32)
    z = zeros.reshape(zeros.shape[0], n_out // 8, 8).astype(np.uint32)
    qzeros = np.zeros((zeros.shape[0], n_out // 8), np.uint32)
    for i, column in enumerate(AWQ_ORDER):
        qweight |= c[:, :, column] << (4 * i)
        qzeros |= z[:, :, column] << (4 * i)
    return {"qweight": qweight.view(np.int32), "qzeros": qzeros.view(np.int32), "scales": scales}


def quantized_linear(rng, q, tensors, base, n_in, n_out, g_idx=None):
    """Writes base.{qweight,qzeros,scales[,g_idx]}; returns (dense [OUT][IN], g_idx)."""
    codes, zeros, scales, g_idx = random_projection(rng, q, n_in, n_out, g_idx)
    if q.method == "awq":
        parts = pack_awq(codes, zeros, scales)
    else:
        parts = pack_gptq(q, codes, zeros, scales, g_idx)
    for k, v in parts.items():
        tensors[f"{base}.{k}"] = v
    return dense(codes, zeros, scales, g_idx), g_idx


def float_weight(rng, shape, scale=0.02):
    return ("BF16", bf16_bits(rng.standard_normal(shape) * scale))


# ---------------------------------------------------------------- models
def mlp(rng, q, tensors, base, names, hidden, inter):
    """gate, up, down of one expert; gate and up share their g_idx (same input)."""
    gate, g_idx = quantized_linear(rng, q, tensors, f"{base}.{names[0]}", hidden, inter)
    up, _ = quantized_linear(rng, q, tensors, f"{base}.{names[1]}", hidden, inter, g_idx)
    down, _ = quantized_linear(rng, q, tensors, f"{base}.{names[2]}", inter, hidden)
    return np.concatenate([gate, up]), down


def attention(rng, q, tensors, base, hidden, heads, kv_heads, head_dim, deepseek=False):
    if deepseek:  # DeepSeek-V2 MLA without q_lora (V2-Lite): q_proj, kv_a_proj_with_mqa, kv_b_proj
        quantized_linear(rng, q, tensors, f"{base}.q_proj", hidden, heads * 48)
        quantized_linear(rng, q, tensors, f"{base}.kv_a_proj_with_mqa", hidden, 128 + 16)
        tensors[f"{base}.kv_a_layernorm.weight"] = float_weight(rng, (128,), 1.0)
        quantized_linear(rng, q, tensors, f"{base}.kv_b_proj", 128, heads * (32 + 32))
        quantized_linear(rng, q, tensors, f"{base}.o_proj", heads * 32, hidden)
        return
    for name, n_out in (("q_proj", heads * head_dim), ("k_proj", kv_heads * head_dim),
                        ("v_proj", kv_heads * head_dim)):
        quantized_linear(rng, q, tensors, f"{base}.{name}", hidden, n_out)
    quantized_linear(rng, q, tensors, f"{base}.o_proj", heads * head_dim, hidden)


def fuse_experts(tensors, layers, block, names, experts):
    """3-D expert tensors as newer transformers versions store them:
    <block>.experts.gate_up_proj.* [E, ...] (gate then up along OUT) and
    <block>.experts.down_proj.* [E, ...]."""
    for layer in layers:
        p = f"model.layers.{layer}.{block}.experts"
        for part in ("qweight", "qzeros", "scales", "g_idx"):
            gate = [tensors.pop(f"{p}.{e}.{names[0]}.{part}") for e in range(experts)]
            up = [tensors.pop(f"{p}.{e}.{names[1]}.{part}") for e in range(experts)]
            down = [tensors.pop(f"{p}.{e}.{names[2]}.{part}") for e in range(experts)]
            if part == "g_idx":
                tensors[f"{p}.gate_up_proj.{part}"] = np.stack(gate)
            else:
                tensors[f"{p}.gate_up_proj.{part}"] = np.stack(
                    [np.concatenate([g, u], axis=1) for g, u in zip(gate, up)])
            tensors[f"{p}.down_proj.{part}"] = np.stack(down)


def write_expected(out_dir, name, expect, dense_layers):
    exp_dir = os.path.join(out_dir, name + ".expected")
    os.makedirs(exp_dir, exist_ok=True)
    for key, array in dense_layers.items():
        np.ascontiguousarray(array, dtype=np.float32).tofile(os.path.join(exp_dir, key + ".f32"))
    with open(os.path.join(exp_dir, "expect.json"), "w") as f:
        json.dump(expect, f, indent=2)


def build(spec, rng):
    """Returns (tensors, config dict, side files {name: dict}, expect, dense arrays)."""
    fam, q = spec["family"], spec["quant"]
    H, E, N, L = spec["hidden"], spec["experts"], spec["inter"], spec["layers"]
    names = ["w1", "w3", "w2"] if fam == "mixtral" else ["gate_proj", "up_proj", "down_proj"]
    block = "block_sparse_moe" if fam == "mixtral" else "mlp"
    tensors, dense_layers, moe_layers = {}, {}, []
    tensors["model.embed_tokens.weight"] = float_weight(rng, (spec["vocab"], H))
    tensors["model.norm.weight"] = float_weight(rng, (H,), 1.0)
    tensors["lm_head.weight"] = float_weight(rng, (spec["vocab"], H))
    first_dense = spec.get("first_dense", 0)
    for layer in range(L):
        p = f"model.layers.{layer}"
        tensors[f"{p}.input_layernorm.weight"] = float_weight(rng, (H,), 1.0)
        tensors[f"{p}.post_attention_layernorm.weight"] = float_weight(rng, (H,), 1.0)
        attention(rng, q, tensors, f"{p}.self_attn", H, 4, 2, 16, deepseek=fam == "deepseek_v2")
        if fam == "qwen3_moe":
            tensors[f"{p}.self_attn.q_norm.weight"] = float_weight(rng, (16,), 1.0)
            tensors[f"{p}.self_attn.k_norm.weight"] = float_weight(rng, (16,), 1.0)
        if layer < first_dense:  # DeepSeek's dense first layers: a plain quantized MLP
            mlp(rng, q, tensors, f"{p}.mlp", names, H, spec["dense_inter"])
            continue
        moe_layers.append(layer)
        tensors[f"{p}.{block}.gate.weight"] = float_weight(rng, (E, H))
        w13 = np.zeros((E, 2 * N, H), np.float32)
        w2 = np.zeros((E, H, N), np.float32)
        for e in range(E):
            w13[e], w2[e] = mlp(rng, q, tensors, f"{p}.{block}.experts.{e}", names, H, N)
        dense_layers[f"L{layer}.w13"], dense_layers[f"L{layer}.w2"] = w13, w2
        if spec.get("shared"):
            sb, sn = spec["shared"], spec["shared_inter"]
            s13, s2 = mlp(rng, q, tensors, f"{p}.{block}.{sb}", names, H, sn)
            dense_layers[f"L{layer}.shared_w13"], dense_layers[f"L{layer}.shared_w2"] = s13, s2
            if fam == "qwen2_moe":
                tensors[f"{p}.{block}.shared_expert_gate.weight"] = float_weight(rng, (1, H))
    if spec.get("fused"):
        fuse_experts(tensors, moe_layers, block, names, E)
    expect = {
        "family": fam, "fused": bool(spec.get("fused")), "moe_layers": moe_layers, "num_experts": E, "hidden_size": H,
        "intermediate_size": N, "top_k": spec["top_k"], "group_size": q.group,
        "format": "awq" if q.method == "awq" else ("gptq_sym" if q.sym else "gptq_asym"),
        "zeros": "awq" if q.method == "awq" else ("gptq_v2" if q.v2 else "gptq_v1"),
        "act_order": q.act_order, "shared_intermediate_size": spec.get("shared_inter", 0),
        "router_dtype": "BF16", "files": 2,
    }
    return tensors, expect, dense_layers


def common_config(spec):
    return {"hidden_size": spec["hidden"], "num_hidden_layers": spec["layers"],
            "vocab_size": spec["vocab"], "rms_norm_eps": 1e-06, "tie_word_embeddings": False,
            "torch_dtype": "bfloat16", "transformers_version": "4.51.0", "use_cache": True,
            "max_position_embeddings": 4096, "initializer_range": 0.02, "hidden_act": "silu"}


def gptq_config(q, method_in_config=True, label_v2=None):
    v2 = q.v2 if label_v2 is None else label_v2
    c = {"bits": 4, "group_size": q.group, "desc_act": q.act_order, "sym": q.sym,
         "damp_percent": 0.01, "static_groups": False, "true_sequential": True,
         "checkpoint_format": "gptq_v2" if v2 else "gptq", "model_name_or_path": None,
         "model_file_base_name": None}
    if method_in_config:
        c["quant_method"] = "gptq"
    return c


SPECS = {
    # Qwen3-MoE GPTQ (AutoGPTQ v1) asymmetric, group 32, act-order
    "qwen3_moe_gptq_v1_act_order": dict(
        family="qwen3_moe", quant=Quant("gptq", 32, sym=False, act_order=True), hidden=128,
        experts=8, inter=64, layers=2, vocab=64, top_k=2),
    # Qwen2-MoE GPTQ symmetric (AutoGPTQ quantize_config.json), shared expert + its gate
    "qwen2_moe_gptq_sym_shared": dict(
        family="qwen2_moe", quant=Quant("gptq", 64, sym=True), hidden=128, experts=8, inter=64,
        layers=2, vocab=64, top_k=4, shared="shared_expert", shared_inter=128),
    # Mixtral AWQ GEMM, group 64 (AutoAWQ)
    "mixtral_awq_gemm_g64": dict(
        family="mixtral", quant=Quant("awq", 64), hidden=128, experts=4, inter=128, layers=2,
        vocab=64, top_k=2),
    # Qwen3-MoE with fused 3-D expert tensors (used in place, no copy), symmetric act-order
    "qwen3_moe_gptq_fused": dict(
        family="qwen3_moe", quant=Quant("gptq", 32, sym=True, act_order=True), hidden=128,
        experts=8, inter=64, layers=1, vocab=64, top_k=2, fused=True),
    # DeepSeek-V2 GPTQ v2 (GPTQModel) asymmetric, group 128, dense first layer, 2 shared experts
    "deepseek_v2_gptq_v2": dict(
        family="deepseek_v2", quant=Quant("gptq", 128, sym=False, v2=True), hidden=256,
        experts=8, inter=128, layers=3, vocab=64, top_k=2, first_dense=1, dense_inter=256,
        shared="shared_experts", shared_inter=256),
}


def write_checkpoint(out_dir, name, spec, rng):
    d = os.path.join(out_dir, name)
    os.makedirs(d, exist_ok=True)
    tensors, expect, dense_layers = build(spec, rng)
    q, fam = spec["quant"], spec["family"]
    config = common_config(spec)
    side = {}
    if fam == "qwen3_moe":
        config.update(architectures=["Qwen3MoeForCausalLM"], model_type="qwen3_moe",
                      num_experts=spec["experts"], num_experts_per_tok=spec["top_k"],
                      moe_intermediate_size=spec["inter"], intermediate_size=3 * spec["inter"],
                      decoder_sparse_step=1, mlp_only_layers=[], norm_topk_prob=True,
                      num_attention_heads=4, num_key_value_heads=2, head_dim=16,
                      rope_theta=1000000.0, output_router_logits=False, router_aux_loss_coef=0.001,
                      quantization_config=gptq_config(q))
        if spec.get("fused"):  # as transformers 5 writes Qwen3-MoE configs
            config["num_local_experts"] = config.pop("num_experts")
    elif fam == "qwen2_moe":
        config.update(architectures=["Qwen2MoeForCausalLM"], model_type="qwen2_moe",
                      num_experts=spec["experts"], num_experts_per_tok=spec["top_k"],
                      moe_intermediate_size=spec["inter"],
                      shared_expert_intermediate_size=spec["shared_inter"],
                      intermediate_size=spec["shared_inter"], decoder_sparse_step=1,
                      mlp_only_layers=[], norm_topk_prob=False, num_attention_heads=4,
                      num_key_value_heads=2, rope_theta=1000000.0)
        side["quantize_config.json"] = gptq_config(q, method_in_config=False,
                                                   label_v2=spec.get("label_v2"))
    elif fam == "mixtral":
        config.update(architectures=["MixtralForCausalLM"], model_type="mixtral",
                      num_local_experts=spec["experts"], num_experts_per_tok=spec["top_k"],
                      intermediate_size=spec["inter"], num_attention_heads=4,
                      num_key_value_heads=2, head_dim=16, rope_theta=1000000.0,
                      router_aux_loss_coef=0.02, sliding_window=None,
                      quantization_config={"quant_method": "awq", "bits": 4,
                                           "group_size": q.group, "zero_point": True,
                                           "version": "gemm",
                                           "modules_to_not_convert": ["gate"]})
    elif fam == "deepseek_v2":
        config.update(architectures=["DeepseekV2ForCausalLM"], model_type="deepseek_v2",
                      n_routed_experts=spec["experts"], n_shared_experts=2,
                      num_experts_per_tok=spec["top_k"], moe_intermediate_size=spec["inter"],
                      intermediate_size=spec["dense_inter"], first_k_dense_replace=1,
                      moe_layer_freq=1, kv_lora_rank=128, q_lora_rank=None, qk_nope_head_dim=32,
                      qk_rope_head_dim=16, v_head_dim=32, num_attention_heads=4,
                      num_key_value_heads=4, topk_method="greedy", n_group=1, topk_group=1,
                      routed_scaling_factor=1.0, scoring_func="softmax", norm_topk_prob=False,
                      aux_loss_alpha=0.001, seq_aux=True,
                      quantization_config=gptq_config(q))
    with open(os.path.join(d, "config.json"), "w") as f:
        json.dump(config, f, indent=2)
    for file, content in side.items():
        with open(os.path.join(d, file), "w") as f:
            json.dump(content, f, indent=2)
    write_sharded(d, tensors)
    expect["quant_source"] = "quantize_config.json" if side else "config.json quantization_config"
    write_expected(out_dir, name, expect, dense_layers)
    return tensors, config


# ---------------------------------------------------------------- bad files
def bad_cases(out_dir, rng):
    """Each case: a copy of a small good checkpoint with one defect."""
    spec = dict(family="mixtral", quant=Quant("awq", 64), hidden=128, experts=4, inter=64,
                layers=1, vocab=16, top_k=2)
    good = os.path.join(out_dir, "bad", "_good")
    tensors, config = write_checkpoint(os.path.join(out_dir, "bad"), "_good", spec, rng)
    shard1 = "model-00001-of-00002.safetensors"
    shard2 = "model-00002-of-00002.safetensors"
    expert1 = "model.layers.0.block_sparse_moe.experts.1.w1.qweight"
    cases = []

    def case(name, status, words, edit):
        d = os.path.join(out_dir, "bad", name)
        shutil.copytree(good, d)
        edit(d)
        cases.append({"name": name, "status": status, "words": words})

    def which_shard(d, tensor):
        with open(os.path.join(d, "model.safetensors.index.json")) as f:
            return json.load(f)["weight_map"][tensor]

    def rewrite(d, file, data):
        with open(os.path.join(d, file), "wb") as f:
            f.write(data)

    def raw(d, file):
        with open(os.path.join(d, file), "rb") as f:
            return f.read()

    def with_header(d, file, mutate):
        data = raw(d, file)
        n = struct.unpack("<Q", data[:8])[0]
        header = json.loads(data[8:8 + n])
        mutate(header)
        text = json.dumps(header).encode()
        rewrite(d, file, struct.pack("<Q", len(text)) + text + data[8 + n:])

    def edit_config(d, mutate):
        with open(os.path.join(d, "config.json")) as f:
            cfg = json.load(f)
        mutate(cfg)
        with open(os.path.join(d, "config.json"), "w") as f:
            json.dump(cfg, f)

    def replace_tensors(d, mutate):
        """Writes the shards again from a mutated copy of the good tensors."""
        part = dict(tensors)
        mutate(part)
        for x in os.listdir(d):
            if x.endswith(".safetensors") or x.endswith(".index.json"):
                os.remove(os.path.join(d, x))
        write_sharded(d, part)

    case("truncated_file", "MOEINT4_INVALID_ARGUMENT", [shard2, "run past the end"],
         lambda d: rewrite(d, shard2, raw(d, shard2)[:-100]))
    case("shorter_than_header_length", "MOEINT4_INVALID_ARGUMENT", [shard1, "shorter than the 8-byte"],
         lambda d: rewrite(d, shard1, b"\x10\x00"))
    case("header_length_past_end", "MOEINT4_INVALID_ARGUMENT", [shard1, "runs past the end of the file"],
         lambda d: rewrite(d, shard1, struct.pack("<Q", 1 << 20) + raw(d, shard1)[8:]))
    case("header_over_100MB", "MOEINT4_INVALID_ARGUMENT", [shard1, "100 MB"],
         lambda d: rewrite(d, shard1, struct.pack("<Q", 200 * 1000 * 1000) + raw(d, shard1)[8:]))
    case("header_not_json", "MOEINT4_INVALID_ARGUMENT", [shard1, "not valid JSON"],
         lambda d: rewrite(d, shard1, struct.pack("<Q", 12) + b"{not json!!}" + b"\0" * 8))

    def past_end(h):
        name = sorted(k for k in h if k != "__metadata__")[0]
        h[name]["data_offsets"][1] += 10 ** 9
    case("offsets_past_end", "MOEINT4_INVALID_ARGUMENT", [shard1, "run past the end"],
         lambda d: with_header(d, shard1, past_end))

    def overlap(h):
        names = sorted((k for k in h if k != "__metadata__"), key=lambda k: h[k]["data_offsets"][0])
        a, b = names[0], names[1]  # b moved onto a's bytes
        size = h[b]["data_offsets"][1] - h[b]["data_offsets"][0]
        start = h[a]["data_offsets"][0]
        h[b]["data_offsets"] = [start, start + size]
    case("offsets_overlap", "MOEINT4_INVALID_ARGUMENT", [shard1, "overlap"],
         lambda d: with_header(d, shard1, overlap))

    def dtype_contradicts(h):
        h[expert1]["dtype"] = "F16"
    case("dtype_contradicts_bytes", "MOEINT4_INVALID_ARGUMENT", [expert1, "F16"],
         lambda d: with_header(d, which_shard(d, expert1), dtype_contradicts))

    def shape_contradicts(h):
        h[expert1]["shape"][0] += 1
    case("shape_contradicts_bytes", "MOEINT4_INVALID_ARGUMENT", [expert1, "needs"],
         lambda d: with_header(d, which_shard(d, expert1), shape_contradicts))

    def drop_expert(part):
        for n in [n for n in part if ".experts.1.w3." in n]:
            del part[n]
    case("expert_missing", "MOEINT4_INVALID_ARGUMENT",
         ["model.layers.0.block_sparse_moe.experts.1.w3.qweight", "missing",
          "expert 1 of layer 0: w1 is int4, w3 is not"],
         lambda d: replace_tensors(d, drop_expert))

    def drop_last_expert(part):
        for n in [n for n in part if ".experts.3." in n]:
            del part[n]
    case("fewer_experts_than_config", "MOEINT4_INVALID_ARGUMENT",
         ["expert 3 of layer 0 is missing", "num_local_experts says 4", "has 3"],
         lambda d: replace_tensors(d, drop_last_expert))

    def other_shape(part):
        part[expert1] = part[expert1][:, :4].copy()
    case("expert_qweight_other_shape", "MOEINT4_INVALID_ARGUMENT", [expert1, "has shape [128, 4]",
                                                                    "expected [128, 8]"],
         lambda d: replace_tensors(d, other_shape))

    def not_quantized(d):  # every expert dense, the config without quantization_config
        edit_config(d, lambda cfg: cfg.pop("quantization_config"))
        files = sorted(x for x in os.listdir(d) if x.endswith(".safetensors"))
        all_tensors = {}
        for n, v in tensors.items():
            if ".experts." in n:
                base = n.rsplit(".", 1)[0]
                proj = base.rsplit(".", 1)[1]
                shape = (64, 128) if proj in ("w1", "w3") else (128, 64)
                all_tensors[base + ".weight"] = float_weight(rng, shape)
            else:
                all_tensors[n] = v
        for x in files:
            os.remove(os.path.join(d, x))
        os.remove(os.path.join(d, "model.safetensors.index.json"))
        rewrite(d, "model.safetensors", encode(all_tensors))
    case("not_quantized", "MOEINT4_UNSUPPORTED",
         ["model.layers.0.block_sparse_moe.experts.0.w1.weight", "not a quantized"], not_quantized)

    case("shard_missing", "MOEINT4_INVALID_ARGUMENT", [shard2, "is missing"],
         lambda d: os.remove(os.path.join(d, shard2)))

    def unknown_arch(cfg):
        cfg["model_type"], cfg["architectures"] = "grok-1", ["Grok1ModelForCausalLM"]
    case("unknown_architecture", "MOEINT4_UNSUPPORTED",
         ["Grok1ModelForCausalLM", "not a known",
          "known: qwen2_moe, qwen3_moe, mixtral, deepseek_v2, deepseek_v3"],
         lambda d: edit_config(d, unknown_arch))

    def eight_bit(cfg):
        cfg["quantization_config"]["bits"] = 8
    case("bits_8", "MOEINT4_UNSUPPORTED", ["bits = 8", "only 4-bit"],
         lambda d: edit_config(d, eight_bit))

    def duplicate(d):
        data = raw(d, shard1)
        n = struct.unpack("<Q", data[:8])[0]
        text = data[8:8 + n].decode().rstrip()
        first = text.index('"', 2)
        key = text[2:first]
        entry = json.loads(text)[key]
        dup = text[:-1] + "," + json.dumps(key) + ":" + json.dumps(entry) + "}"
        rewrite(d, shard1, struct.pack("<Q", len(dup)) + dup.encode() + data[8 + n:])
    case("duplicate_name", "MOEINT4_INVALID_ARGUMENT", [shard1, "appears twice"], duplicate)

    def skip_w1(cfg):  # a config that says w1 is not quantized, while the tensors are int4
        cfg["quantization_config"]["modules_to_not_convert"] = ["gate", "w1"]
    case("config_skips_quantized_module", "MOEINT4_SUCCESS",
         ["modules_to_not_convert lists \"w1\"", "experts.0.w1.qweight", "going by the tensors"],
         lambda d: edit_config(d, skip_w1))
    cases[-1]["stage"] = "warning"

    # Symmetric GPTQ zeros, checked when a layer's arrays are built (stage "desc")
    sym = dict(family="qwen2_moe", quant=Quant("gptq", 64, sym=True, v2=True), hidden=128,
               experts=4, inter=64, layers=1, vocab=16, top_k=2, shared="shared_expert",
               shared_inter=64, label_v2=False)
    write_checkpoint(os.path.join(out_dir, "bad"), "sym_labeled_v1_stored_v2", sym, rng)
    cases.append({"name": "sym_labeled_v1_stored_v2", "stage": "warning", "status": "MOEINT4_SUCCESS",
                  "words": ["mislabeled", "stored zeros are 8", "gptq_v2"]})
    sym["label_v2"] = True
    sym_tensors, _ = write_checkpoint(os.path.join(out_dir, "bad"), "sym_zero_not_7_or_8", sym, rng)
    d = os.path.join(out_dir, "bad", "sym_zero_not_7_or_8")
    zeros = "model.layers.0.mlp.experts.2.up_proj.qzeros"
    with open(os.path.join(d, "model.safetensors.index.json")) as f:
        index = json.load(f)
    file = index["weight_map"][zeros]
    part = {n: v for n, v in sym_tensors.items() if index["weight_map"][n] == file}
    part[zeros] = part[zeros].copy()
    part[zeros][0, 1] = np.int32(0x88888388 - (1 << 32))  # nibble 2 holds 3
    rewrite(d, file, encode(part))
    cases.append({"name": "sym_zero_not_7_or_8", "stage": "desc", "status": "MOEINT4_INVALID_ARGUMENT",
                  "words": [file, zeros, "stored zero 3", "symmetric GPTQ"]})

    with open(os.path.join(out_dir, "bad", "cases.json"), "w") as f:
        json.dump(cases, f, indent=2)


def main():
    out_dir = sys.argv[1]
    if os.path.isdir(out_dir):
        shutil.rmtree(out_dir)
    os.makedirs(out_dir)
    rng = np.random.default_rng(20261201)
    for name, spec in SPECS.items():
        write_checkpoint(out_dir, name, spec, rng)
    bad_cases(out_dir, rng)
    print(f"wrote {len(SPECS)} checkpoints and the bad-file cases to {out_dir}")


if __name__ == "__main__":
    main()
