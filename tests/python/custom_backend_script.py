"""Run by test_custom_backend.py in its own process (a registered backend stays
registered): a backend written in Python through the ABI's plugin table, so
every callback signature and struct of _abi is exercised end to end."""
import ctypes
import json
import sys

import numpy as np

import moeint4
from moeint4 import _abi, _loader
from moeint4 import reference as ref

seen = {"prepare": [], "forward": [], "release": 0, "destroy": 0}


def write_error(err, cap, text):
    data = text.encode()[: cap - 1] + b"\0"
    ctypes.memmove(err, data, len(data))


@_abi.ProbeFn
def probe(user, device, reason, cap):
    return 1


@_abi.SupportsFn
def supports(user, problem, reason, cap):
    if problem.contents.group_size == 32:
        write_error(reason, cap, "pybackend: no group size 32")
        return 0
    return 1


@_abi.ContextCreateFn
def context_create(user, options, backend_context, err, cap):
    backend_context[0] = 0x1234
    return 0


@_abi.ContextDestroyFn
def context_destroy(user, backend_context):
    seen["destroy"] += 1


@_abi.PrepareFn
def prepare(backend_context, desc, backend_weights, err, cap):
    d = desc.contents
    seen["prepare"].append([backend_context, d.num_experts, d.num_local_experts, d.hidden_size,
                            d.intermediate_size, d.group_size, d.format])
    backend_weights[0] = 0x5678
    return 0


@_abi.ReleaseFn
def release(backend_context, backend_weights):
    seen["release"] += 1


@_abi.ForwardFn
def forward(backend_context, backend_weights, args, err, cap):
    a = args.contents
    seen["forward"].append([backend_weights, a.dtype, a.num_tokens, a.topk, a.activation,
                            a.swiglu_limit, a.apply_router_weight_on_input])
    if a.activation == _abi.ACTIVATION_GELU:
        write_error(err, cap, "pybackend: gelu is not here")
        return 2  # MOEINT4_UNSUPPORTED
    m, k = a.num_tokens, seen["prepare"][-1][3]
    out = np.ctypeslib.as_array(ctypes.cast(a.output, ctypes.POINTER(ctypes.c_float)), (m, k))
    x = np.ctypeslib.as_array(ctypes.cast(a.hidden_states, ctypes.POINTER(ctypes.c_float)), (m, k))
    out[:] = 2.0 * x + a.topk_ids[0]
    return 0


iface = _abi.new_struct(_abi.BackendIface)
iface.api_version = _abi.BACKEND_API_VERSION
iface.name = b"pybackend"
iface.platform_priority = 5000  # after the CPU backend: AUTO never picks it
iface.probe, iface.supports = probe, supports
iface.context_create, iface.context_destroy = context_create, context_destroy
iface.prepare, iface.release, iface.forward = prepare, release, forward
ident = ctypes.c_int()
_loader.lib().moeint4_register_backend(ctypes.byref(iface), ctypes.byref(ident))

rng = np.random.default_rng(3)
ckpt = ref.random_checkpoint(rng, "gptq", 4, 128, 64, 64, asymmetric=False)
result = {"id": ident.value, "names": [b.name for b in moeint4.backends()]}
with moeint4.Context("pybackend") as ctx:
    with moeint4.Weights.from_gptq(ckpt["w13_qweight"], ckpt["w13_scales"], ckpt["w2_qweight"],
                                   ckpt["w2_scales"], context=ctx) as w:
        result["backend"] = w.backend
        x = rng.standard_normal((3, 128)).astype(np.float32)
        ids = np.array([[2, 1], [0, 3], [1, 2]], dtype=np.int32)
        out = w.forward(x, ids, np.full((3, 2), 0.5, np.float32), activation="swiglu_clamp",
                        swiglu_limit=5.0, apply_router_weight_on_input=True)
        result["out_ok"] = bool(np.array_equal(out, 2.0 * x + 2))
        try:
            w.forward(x, ids, np.full((3, 2), 0.5, np.float32), activation="gelu")
        except moeint4.MoeInt4Error as e:
            result["error"] = [e.status_name, e.message]
    small = ref.random_checkpoint(rng, "gptq", 4, 64, 64, 32, asymmetric=False)
    try:
        moeint4.Weights.from_gptq(small["w13_qweight"], small["w13_scales"], small["w2_qweight"],
                                  small["w2_scales"], context=ctx)
    except moeint4.MoeInt4Error as e:
        result["refusal"] = [e.status_name, e.message]
result["seen"] = seen
json.dump(result, sys.stdout)
