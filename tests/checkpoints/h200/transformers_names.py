#!/usr/bin/env python3
"""Run once on a machine with transformers, torch and safetensors (the H200
device): checks the checkpoint family table against the names transformers'
own model classes write, and that libmoeint4 reads files written by the
safetensors package.

    transformers_names.py LIBMOEINT4_SO GENERATED_DIR OUT_DIR

1. Tiny randomly initialised Qwen2-MoE, Qwen3-MoE, Mixtral and DeepSeek-V2
   models are saved with save_pretrained (safetensors). Their tensor names,
   with layer and expert numbers replaced by L and E, go to OUT_DIR/names.json,
   and libmoeint4 opens each one: a float checkpoint must be refused as "not
   a quantized MoE checkpoint" naming an expert tensor of the family table
   (proof that the table's block, expert and projection names are the ones
   transformers writes).
2. Every generated checkpoint (make_checkpoints.py) is read with
   safetensors.safe_open (the package reads our writer's files) and written
   again with safetensors.torch.save_file into OUT_DIR/resaved/, shards and
   index as they were, for the C conformance test to run on.
"""
import ctypes
import json
import os
import re
import shutil
import sys
import tempfile

import torch
import transformers
from safetensors import safe_open
from safetensors.torch import save_file

lib_path, generated, out_dir = sys.argv[1:4]
os.makedirs(out_dir, exist_ok=True)
lib = ctypes.CDLL(lib_path)
lib.moeint4_checkpoint_open.argtypes = [ctypes.c_char_p, ctypes.c_void_p, ctypes.POINTER(ctypes.c_void_p)]
lib.moeint4_checkpoint_close.argtypes = [ctypes.c_void_p]
lib.moeint4_last_error.restype = ctypes.c_char_p
lib.moeint4_status_string.restype = ctypes.c_char_p


def library_open(path):
    handle = ctypes.c_void_p()
    status = lib.moeint4_checkpoint_open(path.encode(), None, ctypes.byref(handle))
    text = lib.moeint4_last_error().decode()
    if status == 0:
        lib.moeint4_checkpoint_close(handle)
    return lib.moeint4_status_string(status).decode(), text


def pattern(name):
    return re.sub(r"\.experts\.\d+\.", ".experts.E.", re.sub(r"^model\.layers\.\d+\.", "model.layers.L.", name))


TINY = dict(vocab_size=64, hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
            num_key_value_heads=2, max_position_embeddings=128)
models = {
    "qwen2_moe": ("Qwen2MoeConfig", "Qwen2MoeForCausalLM",
                  dict(intermediate_size=64, moe_intermediate_size=32, shared_expert_intermediate_size=64,
                       num_experts=4, num_experts_per_tok=2)),
    "qwen3_moe": ("Qwen3MoeConfig", "Qwen3MoeForCausalLM",
                  dict(intermediate_size=64, moe_intermediate_size=32, num_experts=4, num_experts_per_tok=2,
                       head_dim=16)),
    "mixtral": ("MixtralConfig", "MixtralForCausalLM",
                dict(intermediate_size=32, num_local_experts=4, num_experts_per_tok=2)),
    "deepseek_v2": ("DeepseekV2Config", "DeepseekV2ForCausalLM",
                    dict(intermediate_size=64, moe_intermediate_size=32, n_routed_experts=4, n_shared_experts=1,
                         num_experts_per_tok=2, first_k_dense_replace=1, kv_lora_rank=16, q_lora_rank=None,
                         qk_nope_head_dim=16, qk_rope_head_dim=8, v_head_dim=16, n_group=1, topk_group=1)),
}
report = {"transformers": transformers.__version__, "torch": torch.__version__, "models": {}}
for family, (config_name, model_name, extra) in models.items():
    entry = {}
    try:
        config = getattr(transformers, config_name)(**TINY, **extra)
        model = getattr(transformers, model_name)(config)
        d = tempfile.mkdtemp()
        model.save_pretrained(d, safe_serialization=True)
        names = []
        for f in sorted(os.listdir(d)):
            if f.endswith(".safetensors"):
                with safe_open(os.path.join(d, f), "pt") as st:
                    for n in st.keys():
                        names.append((n, list(st.get_slice(n).get_shape()), str(st.get_slice(n).get_dtype())))
        with open(os.path.join(d, "config.json")) as f:
            cfg = json.load(f)
        entry["model_type"] = cfg.get("model_type")
        entry["architectures"] = cfg.get("architectures")
        entry["config_keys"] = sorted(k for k in cfg if any(w in k for w in ("expert", "moe", "dense", "intermediate", "tok")))
        entry["patterns"] = sorted({(pattern(n), len(s)) for n, s, _ in names if ".layers." in n})
        entry["fused_3d_experts"] = any(".experts." in n and ".experts.E." not in pattern(n) for n, _, _ in names)
        entry["library"] = library_open(d)
        shutil.rmtree(d)
    except Exception as e:  # report and go on: one family must not hide the others
        entry["error"] = f"{type(e).__name__}: {e}"
    report["models"][family] = entry
    print(family, json.dumps(entry)[:2000], flush=True)

resaved = os.path.join(out_dir, "resaved")
for name in sorted(os.listdir(generated)):
    src = os.path.join(generated, name)
    if not os.path.isdir(src) or name == "bad":
        continue
    dst = os.path.join(resaved, name)
    os.makedirs(dst, exist_ok=True)
    for f in os.listdir(src):
        if f.endswith(".safetensors"):
            with safe_open(os.path.join(src, f), "pt") as st:
                tensors = {k: st.get_tensor(k) for k in st.keys()}
            save_file(tensors, os.path.join(dst, f), metadata={"format": "pt"})
        else:
            shutil.copy(os.path.join(src, f), os.path.join(dst, f))
report["resaved"] = sorted(os.listdir(resaved))
with open(os.path.join(out_dir, "names.json"), "w") as f:
    json.dump(report, f, indent=1)
print("resaved:", report["resaved"])
