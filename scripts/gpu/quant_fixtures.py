#!/usr/bin/env python3
"""Builds the quantized-checkpoint fixtures for tests/data/quant/ (issue 16) with plain torch.

usage: python3 scripts/gpu/quant_fixtures.py --out DIR [--smoke] [--no-hf-fp8] [--keep-dirs] [--only A,B]

Runs on the GPU machine (torch 2.11, transformers 5.17, safetensors; no internet, nothing is
downloaded). It builds one tiny random Qwen2ForCausalLM from a config (hidden 256, 2 layers,
intermediate 512, 4 query heads / 2 KV heads, vocab 512, tied embeddings), rounds it to bf16 (the
"base" model), and writes one checkpoint directory per quantized format. Every packer here is plain
torch/numpy written from the published layouts (cited per format below), independent of frugal's
C++ packer; round-to-nearest quantization stands in for the AWQ/GPTQ search algorithms, since the
layout, not the calibration, is what a loader must get right.

Each directory holds what the real tool writes (model.safetensors, config.json with
`quantization_config`, generation_config.json) plus reference.safetensors:
  input_ids          I64 [T]          fixed token ids
  logits             F32 [T, vocab]   transformers (fp32, CPU) on the weights DEQUANTIZED from the
                                      tensors as stored in model.safetensors (re-read from disk)
  logits_base        F32 [T, vocab]   the same model before quantization (bf16 weights)
  dequant.<tensor>   F32 [16, in]     the dequantized weight of two linears (layer 0 k_proj
                                      rows 0..15, layer 1 down_proj rows 0..15), to pin down a converter
                                      without running the whole model
  logits_hf_fp8_dequant / logits_hf_fp8_native  (fp8_block only, when transformers' fine-grained
                                      FP8 path works here: see hf_fp8_logits)

The "_lmhead" fixtures (tarball c) start from the same config untied (tie_word_embeddings false,
lm_head its own random matrix) and quantize lm_head too, as GPTQModel does with "lm_head": true
and llm-compressor does when lm_head is not in "ignore"; their references dequantize it as well.

Output: DIR/quant_fixtures_a.tar.xz (4-bit formats), DIR/quant_fixtures_b.tar.xz (8-bit formats),
DIR/quant_fixtures_c.tar.xz (quantized lm_head), DIR/quant_fixtures.log. --only A,B builds the
named fixtures alone (their tarballs hold just them; manifest.json lists just them: merge it). Extract both into tests/data/quant/. --smoke builds a subset, skips the
tarballs and keeps the directories (a quick check that the script runs end to end).
"""
import argparse
import json
import logging
import os
import shutil
import sys
import tarfile
import time

import numpy as np
import torch

log = logging.getLogger("quant_fixtures")

VOCAB = 512
T = 24
HIDDEN = 256
INTER = 512
CFG = dict(vocab_size=VOCAB, hidden_size=HIDDEN, intermediate_size=INTER, num_hidden_layers=2,
           num_attention_heads=4, num_key_value_heads=2, head_dim=64,
           max_position_embeddings=512, rms_norm_eps=1e-6, rope_theta=1000000.0,
           tie_word_embeddings=True, bos_token_id=1, eos_token_id=2, pad_token_id=None,
           initializer_range=0.05)
LINEARS = ["self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj", "self_attn.o_proj",
           "mlp.gate_proj", "mlp.up_proj", "mlp.down_proj"]
DEQUANT_DUMPS = {"model.layers.0.self_attn.k_proj.weight": 16,     # first 16 rows
                 "model.layers.1.mlp.down_proj.weight": 16}         # first 16 rows

# bitsandbytes' NF4 code book (QLoRA appendix E: quantiles of N(0,1) normalised to [-1, 1], with
# an exact zero); cross-checked against bitsandbytes when it is installed (check_nf4_table).
NF4_TABLE = [-1.0, -0.6961928009986877, -0.5250730514526367, -0.39491748809814453,
             -0.28444138169288635, -0.18477343022823334, -0.09105003625154495, 0.0,
             0.07958029955625534, 0.16093020141124725, 0.24611230194568634, 0.33791524171829224,
             0.44070982933044434, 0.5626170039176941, 0.7229568362236023, 1.0]

# AutoAWQ GEMM packs 8 output columns per int32 in this nibble order: nibble i (bits 4i..4i+3)
# holds column 8c + AWQ_ORDER[i]. Unpacking uses the inverse: column j is in nibble AWQ_INV[j].
AWQ_ORDER = [0, 2, 4, 6, 1, 3, 5, 7]
AWQ_INV = [AWQ_ORDER.index(j) for j in range(8)]  # = [0, 4, 1, 5, 2, 6, 3, 7]


# ---------------------------------------------------------------------------------------------
# bit packing helpers (numpy, uint32 arithmetic; stored as int32 like the tools do)

def pack_along_last(q, bits, order=None):
    """q: uint [R, C] with C % (32/bits) == 0 -> int32 [R, C*bits/32]; element j of each run of
    32/bits goes to field order[j] (field f = bits f*bits .. f*bits+bits-1)."""
    per = 32 // bits
    q = np.asarray(q, dtype=np.uint32)
    assert q.shape[1] % per == 0 and q.max(initial=0) < (1 << bits) and q.min(initial=0) >= 0
    q = q.reshape(q.shape[0], -1, per)
    out = np.zeros(q.shape[:2], dtype=np.uint32)
    for field in range(per):
        col = order[field] if order is not None else field
        out |= q[:, :, col] << np.uint32(field * bits)
    return out.view(np.int32)


def unpack_along_last(packed, bits, order=None):
    per = 32 // bits
    p = np.asarray(packed).view(np.uint32)
    out = np.zeros((p.shape[0], p.shape[1], per), dtype=np.uint32)
    for field in range(per):
        col = order[field] if order is not None else field
        out[:, :, col] = (p >> np.uint32(field * bits)) & np.uint32((1 << bits) - 1)
    return out.reshape(p.shape[0], -1)


def pack_along_first(q, bits):
    """GPTQ qweight: q uint [K, N] -> int32 [K*bits/32, N]; row r holds input rows
    r*per .. r*per+per-1, the first in the lowest bits."""
    return np.ascontiguousarray(pack_along_last(np.asarray(q).T, bits).T)


def unpack_along_first(packed, bits):
    return np.ascontiguousarray(unpack_along_last(np.ascontiguousarray(np.asarray(packed).T), bits).T)


def self_test_packing():
    """Hand-written cases from the published layouts, so a packer bug fails here, not later."""
    row = np.arange(8, dtype=np.uint32)[None, :]          # columns 0..7 hold values 0..7
    # AWQ: nibbles (low to high) hold columns 0,2,4,6,1,3,5,7 -> 0x75316420
    assert pack_along_last(row, 4, AWQ_ORDER).view(np.uint32)[0, 0] == 0x75316420
    # vLLM-style unpacking reads column j from nibble AWQ_INV[j]
    packed = int(pack_along_last(row, 4, AWQ_ORDER).view(np.uint32)[0, 0])
    assert [(packed >> (4 * AWQ_INV[j])) & 0xF for j in range(8)] == list(range(8))
    # plain (GPTQ qzeros) order: 0x76543210
    assert pack_along_last(row, 4).view(np.uint32)[0, 0] == 0x76543210
    # GPTQ qweight: input rows 0..7 of one output column -> 0x76543210
    assert pack_along_first(row.T, 4).view(np.uint32)[0, 0] == 0x76543210
    # 8-bit: bytes low first
    assert pack_along_first(np.array([[1], [2], [3], [4]]), 8).view(np.uint32)[0, 0] == 0x04030201
    rng = np.random.default_rng(0)
    q = rng.integers(0, 16, size=(64, 24), dtype=np.uint32)
    assert (unpack_along_first(pack_along_first(q, 4), 4) == q).all()
    assert (unpack_along_last(pack_along_last(q, 4, AWQ_ORDER), 4, AWQ_ORDER) == q).all()
    log.info("packing self-test passed (AWQ 0x75316420, GPTQ 0x76543210, 8-bit 0x04030201)")


# ---------------------------------------------------------------------------------------------
# formats. Each quantizer takes W f32 [out, in] (torch layout) and returns (tensors dict for
# "<prefix>.*", dequantizer reading those tensors back). Dequantizers only read stored tensors.

def awq_quantize(W, group):
    """AutoAWQ "GEMM" (WQLinear_GEMM), w4 with zero points:
    qweight I32 [in, out/8]  8 nibbles per int32 along OUT in AWQ_ORDER
    qzeros  I32 [in/group, out/8] same packing, zero points stored as is (0..15)
    scales  F16 [in/group, out]
    w[o, i] = (q[i, o] - z[i/group, o]) * s[i/group, o]. Zero-point RTN as AutoAWQ's
    pseudo_quantize_tensor: s = (max-min)/15, z = clamp(-round(min/s), 0, 15)."""
    out_f, in_f = W.shape
    Wt = W.T.reshape(in_f // group, group, out_f)           # [groups, group, out]
    mx, mn = Wt.amax(dim=1), Wt.amin(dim=1)
    s = ((mx - mn).clamp(min=1e-5) / 15).to(torch.float16)
    sf = s.float()
    z = (-torch.round(mn / sf)).clamp(0, 15)
    q = (torch.round(Wt / sf[:, None, :]) + z[:, None, :]).clamp(0, 15).reshape(in_f, out_f)
    t = {"qweight": torch.from_numpy(pack_along_last(q.to(torch.int64).numpy(), 4, AWQ_ORDER)),
         "qzeros": torch.from_numpy(pack_along_last(z.to(torch.int64).numpy(), 4, AWQ_ORDER)),
         "scales": s.contiguous()}
    return t


def awq_dequant(t, group):
    q = torch.from_numpy(unpack_along_last(t["qweight"].numpy(), 4, AWQ_ORDER).astype(np.float32))
    z = torch.from_numpy(unpack_along_last(t["qzeros"].numpy(), 4, AWQ_ORDER).astype(np.float32))
    s = t["scales"].float()
    in_f = q.shape[0]
    gi = torch.arange(in_f) // group
    return ((q - z[gi]) * s[gi]).T.contiguous()             # [out, in]


def gptq_quantize(W, group, bits, sym, perm=None, v2=False):
    """GPTQ (AutoGPTQ / GPTQModel QuantLinear), packed along the input axis:
    qweight I32 [in*bits/32, out]   32/bits values per int32 along IN, lowest bits first
    qzeros  I32 [in/group, out*bits/32] along OUT, lowest bits first
    scales  F16 [in/group, out]
    g_idx   I32 [in]                group of each input row; with desc_act (act order) groups are
                                    formed over a permutation perm of the input rows:
                                    g_idx[perm[j]] = j // group; rows stay in original order
    w[o, i] = (q[i, o] - zero[g_idx[i], o]) * s[g_idx[i], o].
    checkpoint_format "gptq" (v1) stores zero - 1 (so sym 4-bit zero 8 is stored 7, 0x77777777);
    "gptq_v2" stores zero itself. GPTQ's quantizer: sym -> s = 2*amax/maxq, zero = (maxq+1)/2;
    asym -> s = (max(x,0) - min(x,0))/maxq, zero = round(-min/s). v1 cannot store zero 0 (it
    would be -1), so asym zeros are kept >= 1 here (real v1 checkpoints have the same limit)."""
    out_f, in_f = W.shape
    maxq = (1 << bits) - 1
    n_groups = in_f // group
    if perm is None:
        perm = torch.arange(in_f)
    g_idx = torch.empty(in_f, dtype=torch.int32)
    g_idx[perm] = (torch.arange(in_f) // group).to(torch.int32)
    Wp = W[:, perm].reshape(out_f, n_groups, group)         # groups over the permuted order
    if sym:
        amax = Wp.abs().amax(dim=2).clamp(min=1e-8)
        s = (2 * amax / maxq).to(torch.float16)
        zero = torch.full_like(amax, (maxq + 1) // 2)
    else:
        mn, mx = Wp.amin(dim=2).clamp(max=0), Wp.amax(dim=2).clamp(min=0)
        s = ((mx - mn).clamp(min=1e-8) / maxq).to(torch.float16)
        zero = torch.round(-mn / s.float()).clamp(1, maxq)
    s_gn = s.T.contiguous()                                  # [groups, out]
    z_gn = zero.T.contiguous()
    gi = g_idx.long()
    q = (torch.round(W.T / s_gn.float()[gi]) + z_gn[gi]).clamp(0, maxq)   # [in, out]
    stored_z = z_gn - (0 if v2 else 1)
    t = {"qweight": torch.from_numpy(pack_along_first(q.to(torch.int64).numpy(), bits)),
         "qzeros": torch.from_numpy(pack_along_last(stored_z.to(torch.int64).numpy(), bits)),
         "scales": s_gn.contiguous(),
         "g_idx": g_idx}
    return t


def gptq_dequant(t, bits, v2=False):
    q = torch.from_numpy(unpack_along_first(t["qweight"].numpy(), bits).astype(np.float32))
    z = torch.from_numpy(unpack_along_last(t["qzeros"].numpy(), bits).astype(np.float32))
    z = z + (0 if v2 else 1)
    s = t["scales"].float()
    gi = t["g_idx"].long()
    return ((q - z[gi]) * s[gi]).T.contiguous()


FP8_MAX = 448.0


def to_fp8(x):
    # .to(float8_e4m3fn) rounds to nearest even but does not saturate: clamp first.
    return x.clamp(-FP8_MAX, FP8_MAX).to(torch.float8_e4m3fn)


def fp8_ct_quantize(W, strategy):
    """compressed-tensors "float-quantized" (llm-compressor FP8 / FP8-dynamic):
    weight F8_E4M3 [out, in], weight_scale BF16 [out, 1] (strategy channel) or [1] (tensor);
    w = weight * weight_scale, scale = amax / 448."""
    if strategy == "channel":
        scale = (W.abs().amax(dim=1, keepdim=True).clamp(min=1e-12) / FP8_MAX).to(torch.bfloat16)
    else:
        scale = (W.abs().amax().clamp(min=1e-12) / FP8_MAX).reshape(1).to(torch.bfloat16)
    return {"weight": to_fp8(W / scale.float()), "weight_scale": scale}


def fp8_ct_dequant(t):
    return t["weight"].float() * t["weight_scale"].float()


def fp8_block_quantize(W, block=128):
    """DeepSeek-V3 / transformers fine-grained FP8: weight F8_E4M3 [out, in], weight_scale_inv
    F32 [ceil(out/128), ceil(in/128)]; despite the name it MULTIPLIES: w = weight * scale_inv of
    the weight's 128x128 block, scale_inv = block amax / 448."""
    out_f, in_f = W.shape
    nb_o, nb_i = -(-out_f // block), -(-in_f // block)
    s = torch.empty(nb_o, nb_i)
    q = torch.empty_like(W)
    for bo in range(nb_o):
        for bi in range(nb_i):
            blk = W[bo * block:(bo + 1) * block, bi * block:(bi + 1) * block]
            s[bo, bi] = blk.abs().amax().clamp(min=1e-12) / FP8_MAX
            q[bo * block:(bo + 1) * block, bi * block:(bi + 1) * block] = blk / s[bo, bi]
    return {"weight": to_fp8(q), "weight_scale_inv": s}


def fp8_block_dequant(t, block=128):
    w = t["weight"].float()
    s = t["weight_scale_inv"]
    s_full = s.repeat_interleave(block, 0)[:w.shape[0]].repeat_interleave(block, 1)[:, :w.shape[1]]
    return w * s_full


def int8_ct_quantize(W):
    """compressed-tensors "int-quantized", W8A16 (weights int8 symmetric per output channel,
    activations unquantized): weight I8 [out, in], weight_scale BF16 [out, 1]; w = weight * scale,
    scale = amax / 127, q = clamp(round(w / scale), -128, 127)."""
    scale = (W.abs().amax(dim=1, keepdim=True).clamp(min=1e-12) / 127).to(torch.bfloat16)
    q = torch.round(W / scale.float()).clamp(-128, 127).to(torch.int8)
    return {"weight": q, "weight_scale": scale}


def int8_ct_dequant(t):
    return t["weight"].float() * t["weight_scale"].float()


def nf4_quantize(W, blocksize=64):
    """bitsandbytes 4-bit NF4 as transformers serializes Linear4bit (no double quant,
    quant_storage uint8):
    weight                                  U8  [(out*in+1)/2, 1]  the row-major flattened
                                            [out, in] weight, two codes per byte, the EARLIER
                                            element in the HIGH nibble
    weight.absmax                           F32 [out*in/64]   absmax of each run of 64 elements
    weight.quant_map                        F32 [16]          the NF4 code book
    weight.quant_state.bitsandbytes__nf4    U8  [n]           JSON {quant_type, blocksize,
                                            dtype, shape} as bytes
    w = quant_map[code] * absmax[flat_index / 64]."""
    flat = W.reshape(-1, blocksize)
    absmax = flat.abs().amax(dim=1).clamp(min=1e-12)
    code = torch.tensor(NF4_TABLE)
    scaled = flat / absmax[:, None]
    idx = torch.argmin((scaled.reshape(-1, 1) - code[None, :]).abs(), dim=1).to(torch.uint8)
    packed = (idx[0::2] << 4) | idx[1::2]
    state = {"quant_type": "nf4", "blocksize": blocksize, "dtype": "bfloat16",
             "shape": list(W.shape)}
    state_bytes = torch.tensor(list(json.dumps(state).encode()), dtype=torch.uint8)
    return {"weight": packed.reshape(-1, 1).contiguous(), "weight.absmax": absmax.float(),
            "weight.quant_map": code.float(),
            "weight.quant_state.bitsandbytes__nf4": state_bytes}


def nf4_dequant(t):
    state = json.loads(bytes(t["weight.quant_state.bitsandbytes__nf4"].tolist()).decode())
    packed = t["weight"].reshape(-1)
    idx = torch.stack([packed >> 4, packed & 0xF], dim=1).reshape(-1).long()
    vals = t["weight.quant_map"][idx].reshape(-1, state["blocksize"]) * \
        t["weight.absmax"][:, None]
    return vals.reshape(state["shape"])


def check_nf4_table():
    try:
        import bitsandbytes.functional as bnbf  # noqa: optional cross-check only
        ref = bnbf.get_4bit_type("nf4", device="cpu").float()
        ok = torch.allclose(ref, torch.tensor(NF4_TABLE), atol=0, rtol=0)
        log.info("bitsandbytes NF4 table %s ours", "equals" if ok else "DIFFERS FROM")
        if not ok:
            raise SystemExit("NF4 table mismatch: " + str(ref.tolist()))
    except ImportError:
        log.info("bitsandbytes not installed: NF4 table not cross-checked (values from QLoRA)")
    except SystemExit:
        raise
    except Exception as e:  # a broken bitsandbytes install must not stop the fixtures
        log.warning("bitsandbytes NF4 cross-check failed to run: %r", e)


# ---------------------------------------------------------------------------------------------
# fixture table: name -> (quantizer, dequantizer, config-writer, non-quantized storage dtype)

def awq_cfg(group):
    # As AutoAWQ / transformers' AwqConfig write it.
    return {"quant_method": "awq", "bits": 4, "group_size": group, "zero_point": True,
            "version": "gemm", "modules_to_not_convert": None}


def gptq_cfg(group, bits, sym, desc_act, fmt, lm_head=False):
    # As GPTQModel writes it (AutoGPTQ writes the same keys, plus quantize_config.json).
    return {"quant_method": "gptq", "bits": bits, "group_size": group, "desc_act": desc_act,
            "sym": sym, "lm_head": lm_head, "damp_percent": 0.01, "true_sequential": True,
            "static_groups": False, "checkpoint_format": fmt, "pack_dtype": "int32",
            "meta": {"quantizer": ["frugal quant_fixtures.py (round-to-nearest)"]}}


def ct_cfg(num_bits, typ, strategy, fmt, dynamic_act, ignore=("lm_head",)):
    scheme = {"num_bits": num_bits, "type": typ, "symmetric": True, "strategy": strategy,
              "group_size": None, "block_structure": None, "dynamic": False, "actorder": None,
              "observer": "minmax", "observer_kwargs": {}}
    act = None
    if dynamic_act:
        act = {"num_bits": 8, "type": typ, "symmetric": True, "strategy": "token",
               "group_size": None, "block_structure": None, "dynamic": True, "actorder": None,
               "observer": None, "observer_kwargs": {}}
    return {"quant_method": "compressed-tensors", "format": fmt, "quantization_status": "compressed",
            "config_groups": {"group_0": {"targets": ["Linear"], "weights": scheme,
                                          "input_activations": act, "output_activations": None}},
            "ignore": list(ignore), "kv_cache_scheme": None, "global_compression_ratio": None}


FP8_BLOCK_CFG = {"quant_method": "fp8", "fmt": "e4m3", "activation_scheme": "dynamic",
                 "weight_block_size": [128, 128]}

NF4_CFG = {"quant_method": "bitsandbytes", "load_in_4bit": True, "load_in_8bit": False,
           "_load_in_4bit": True, "_load_in_8bit": False, "bnb_4bit_quant_type": "nf4",
           "bnb_4bit_use_double_quant": False, "bnb_4bit_compute_dtype": "bfloat16",
           "bnb_4bit_quant_storage": "uint8", "llm_int8_threshold": 6.0,
           "llm_int8_skip_modules": None, "llm_int8_enable_fp32_cpu_offload": False,
           "llm_int8_has_fp16_weight": False}


def perm_for(name, in_f):
    # A fixed shuffled act order per tensor (seeded by name) for the desc_act fixture.
    g = torch.Generator().manual_seed(sum(ord(c) for c in name) * 7919)
    return torch.randperm(in_f, generator=g)


def make_fixtures():
    F = {}
    for g in (128, 64):
        F[f"awq_w4g{g}"] = dict(
            group="a", dtype=torch.float16, cfg=awq_cfg(g),
            quant=lambda W, n, g=g: awq_quantize(W, g), deq=lambda t, g=g: awq_dequant(t, g))
    for sym in (True, False):
        F[f"gptq_w4g128_{'sym' if sym else 'asym'}"] = dict(
            group="a", dtype=torch.float16, cfg=gptq_cfg(128, 4, sym, False, "gptq"),
            quant=lambda W, n, sym=sym: gptq_quantize(W, 128, 4, sym),
            deq=lambda t: gptq_dequant(t, 4))
    F["gptq_w4g64_asym_descact"] = dict(
        group="a", dtype=torch.float16, cfg=gptq_cfg(64, 4, False, True, "gptq"),
        quant=lambda W, n: gptq_quantize(W, 64, 4, False, perm=perm_for(n, W.shape[1])),
        deq=lambda t: gptq_dequant(t, 4))
    F["gptq_w4g128_asym_v2"] = dict(
        group="a", dtype=torch.float16, cfg=gptq_cfg(128, 4, False, False, "gptq_v2"),
        quant=lambda W, n: gptq_quantize(W, 128, 4, False, v2=True),
        deq=lambda t: gptq_dequant(t, 4, v2=True))
    F["nf4"] = dict(group="a", dtype=torch.bfloat16, cfg=NF4_CFG, quant=lambda W, n: nf4_quantize(W),
                    deq=nf4_dequant)
    F["gptq_w8g128_sym"] = dict(
        group="b", dtype=torch.float16, cfg=gptq_cfg(128, 8, True, False, "gptq"),
        quant=lambda W, n: gptq_quantize(W, 128, 8, True), deq=lambda t: gptq_dequant(t, 8))
    F["fp8_channel"] = dict(group="b", dtype=torch.bfloat16,
                            cfg=ct_cfg(8, "float", "channel", "float-quantized", True),
                            quant=lambda W, n: fp8_ct_quantize(W, "channel"), deq=fp8_ct_dequant)
    F["fp8_tensor"] = dict(group="b", dtype=torch.bfloat16,
                           cfg=ct_cfg(8, "float", "tensor", "float-quantized", True),
                           quant=lambda W, n: fp8_ct_quantize(W, "tensor"), deq=fp8_ct_dequant)
    F["fp8_block"] = dict(group="b", dtype=torch.bfloat16, cfg=FP8_BLOCK_CFG,
                          quant=lambda W, n: fp8_block_quantize(W), deq=fp8_block_dequant)
    F["int8_channel"] = dict(group="b", dtype=torch.bfloat16,
                             cfg=ct_cfg(8, "int", "channel", "int-quantized", False),
                             quant=lambda W, n: int8_ct_quantize(W), deq=int8_ct_dequant)
    # lm_head quantized too, on the untied base.
    F["gptq_w4g128_lmhead"] = dict(
        group="c", untied=True, lm_head=True, dtype=torch.float16, limit=0.2,
        cfg=gptq_cfg(128, 4, False, False, "gptq", lm_head=True),
        quant=lambda W, n: gptq_quantize(W, 128, 4, False), deq=lambda t: gptq_dequant(t, 4))
    F["int8_channel_lmhead"] = dict(
        group="c", untied=True, lm_head=True, dtype=torch.bfloat16,
        cfg=ct_cfg(8, "int", "channel", "int-quantized", False, ignore=()),
        quant=lambda W, n: int8_ct_quantize(W), deq=int8_ct_dequant)
    return F


SMOKE = ["awq_w4g128", "gptq_w4g64_asym_descact", "fp8_block", "nf4", "int8_channel"]


# ---------------------------------------------------------------------------------------------

def build_base(tied=True):
    from transformers import Qwen2Config, Qwen2ForCausalLM
    torch.manual_seed(1234)
    cfg = Qwen2Config(**dict(CFG, tie_word_embeddings=tied))
    model = Qwen2ForCausalLM(cfg).eval()
    with torch.no_grad():
        for n, p in model.named_parameters():
            if "embed_tokens" in n or n == "lm_head.weight":
                p.copy_(0.5 * torch.randn_like(p))       # confident output distribution
            elif "norm" in n:
                p.copy_(1.0 + 0.2 * torch.randn_like(p))
            elif n.endswith("bias"):
                p.copy_(0.5 * torch.randn_like(p))
            # Round to bf16: the "original" checkpoint every format quantizes.
            p.copy_(p.to(torch.bfloat16).float())
    g = torch.Generator().manual_seed(99)
    ids = torch.cat([torch.tensor([1]), torch.randint(3, VOCAB, (T - 1,), generator=g)])
    return cfg, model, ids


def forward_logits(model, ids):
    with torch.no_grad():
        return model(ids[None, :]).logits[0].float().contiguous()


def quantized_names():
    return [f"model.layers.{l}.{m}" for l in range(CFG["num_hidden_layers"]) for m in LINEARS]


def write_fixture(name, spec, cfg, base_model, ids, base_logits, root):
    from safetensors.torch import load_file, save_file
    from transformers import Qwen2ForCausalLM
    t0 = time.time()
    d = os.path.join(root, name)
    shutil.rmtree(d, ignore_errors=True)
    os.makedirs(d)
    sd = {k: v.detach().clone() for k, v in base_model.state_dict().items()}
    tied = cfg.tie_word_embeddings
    if tied:
        sd.pop("lm_head.weight", None)      # tied: real tied checkpoints store only embed_tokens
    qnames = quantized_names() + (["lm_head"] if spec.get("lm_head") else [])
    tensors = {}
    for k, v in sd.items():
        prefix = k[:-len(".weight")]
        if k.endswith(".weight") and prefix in qnames:
            # Quantizers return names relative to the linear, e.g. "qweight", "weight_scale".
            for rel, tv in spec["quant"](v.float(), prefix).items():
                tensors[f"{prefix}.{rel}"] = tv.contiguous()
        else:
            tensors[k] = v.to(spec["dtype"]).contiguous()   # embeddings, norms, biases
    path = os.path.join(d, "model.safetensors")
    save_file(tensors, path, metadata={"format": "pt"})
    cfg_dict = json.loads(cfg.to_json_string(use_diff=False))
    cfg_dict["architectures"] = ["Qwen2ForCausalLM"]
    cfg_dict["dtype"] = {torch.float16: "float16", torch.bfloat16: "bfloat16"}[spec["dtype"]]
    cfg_dict["quantization_config"] = spec["cfg"]
    with open(os.path.join(d, "config.json"), "w") as f:
        json.dump(cfg_dict, f, indent=2, sort_keys=True)
    with open(os.path.join(d, "generation_config.json"), "w") as f:
        json.dump({"bos_token_id": 1, "eos_token_id": 2, "do_sample": False}, f, indent=2)

    # Re-read from disk and dequantize only from what is stored.
    stored = load_file(path)
    deq_sd = {}
    consumed = set()
    for prefix in qnames:
        part = {k[len(prefix) + 1:]: v for k, v in stored.items()
                if k.startswith(prefix + ".") and k != prefix + ".bias"}
        consumed.update(prefix + "." + r for r in part)
        deq_sd[prefix + ".weight"] = spec["deq"](part).float()
    for k, v in stored.items():
        if k not in consumed:
            deq_sd[k] = v.float()
    # Quantization error sanity: dequantized vs base weights.
    worst = 0.0
    for q in qnames:
        w0 = sd[q + ".weight"].float()
        w1 = deq_sd[q + ".weight"]
        assert w1.shape == w0.shape, (name, q, w1.shape, w0.shape)
        rel = float((w1 - w0).norm() / w0.norm())
        worst = max(worst, rel)
    limit = spec.get("limit", 0.2 if spec["group"] == "a" else 0.08)  # 4-bit vs 8-bit round-to-nearest
    if worst > limit:
        raise SystemExit(f"{name}: dequantized weights too far from base (rel {worst:.3f} > {limit})")

    ref_model = Qwen2ForCausalLM(cfg).eval().float()
    missing, unexpected = ref_model.load_state_dict(deq_sd, strict=False)
    missing = [m for m in missing if not (tied and m == "lm_head.weight")]
    if missing or unexpected:
        raise SystemExit(f"{name}: state dict mismatch missing={missing} unexpected={unexpected}")
    if tied and ref_model.lm_head.weight.data_ptr() != ref_model.model.embed_tokens.weight.data_ptr():
        with torch.no_grad():
            ref_model.lm_head.weight.copy_(ref_model.model.embed_tokens.weight)
    logits = forward_logits(ref_model, ids)
    assert torch.isfinite(logits).all(), name
    ref = {"input_ids": ids.to(torch.int64), "logits": logits, "logits_base": base_logits}
    for k, rows in DEQUANT_DUMPS.items():
        w = deq_sd[k]
        ref["dequant." + k] = (w if rows is None else w[:rows]).clone().contiguous()
    extra = {}
    if name == "fp8_block" and spec.get("hf_fp8", True):
        extra = hf_fp8_logits(d, ids, logits)
        ref.update(extra)
    save_file(ref, os.path.join(d, "reference.safetensors"))

    diff = float((logits - base_logits).abs().max())
    agree = float((logits.argmax(-1) == base_logits.argmax(-1)).float().mean())
    size = os.path.getsize(path)
    log.info("%-26s weights rel err <= %.4f  logits max|deq-base| %.4f  argmax agree %.2f  "
             "model.safetensors %d KB  %.1fs  %s", name, worst, diff, agree, size // 1024,
             time.time() - t0, sorted(extra))
    return {"name": name, "tar": spec["group"], "quantization_config": spec["cfg"],
            "weights_rel_err_max": worst, "logits_max_abs_diff_vs_base": diff,
            "argmax_agree_vs_base": agree, "model_bytes": size, "extra_references": sorted(extra)}


def hf_fp8_logits(d, ids, our_logits):
    """transformers 5.17's own fine-grained FP8 loader on the DeepSeek-style directory:
    (1) dequantize=True on the CPU (its Fp8Dequantize conversion: weight * scale_inv per block)
        -> logits_hf_fp8_dequant, which should equal our `logits` up to bf16 rounding of the
        dequantized weights;
    (2) the native W8A8 path on CUDA (dynamic per-token-group fp8 activations)
        -> logits_hf_fp8_native (differs by the activation quantization error).
    Each is optional: a failure is logged with its traceback and skipped."""
    import traceback
    from transformers import AutoModelForCausalLM
    out = {}
    devices = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])
    for dev in devices:
        try:
            from transformers import FineGrainedFP8Config
            qc = FineGrainedFP8Config(weight_block_size=(128, 128), dequantize=True)
            m = AutoModelForCausalLM.from_pretrained(d, quantization_config=qc,
                                                     dtype=torch.float32, device_map=dev).eval()
            w = m.model.layers[0].self_attn.q_proj.weight
            log.info("hf fp8 dequantize on %s: q_proj is %s, weight %s", dev,
                     type(m.model.layers[0].self_attn.q_proj).__name__, w.dtype)
            m = m.float().cpu()
            lg = forward_logits(m, ids)
            out["logits_hf_fp8_dequant"] = lg
            log.info("hf fp8 dequantize: max|hf - ours| = %.5f (argmax agree %.2f)",
                     float((lg - our_logits).abs().max()),
                     float((lg.argmax(-1) == our_logits.argmax(-1)).float().mean()))
            break
        except Exception:
            log.warning("hf fp8 dequantize path on %s failed:\n%s", dev, traceback.format_exc())
    if torch.cuda.is_available():
        try:
            m = AutoModelForCausalLM.from_pretrained(d, dtype=torch.bfloat16,
                                                     device_map="cuda").eval()
            log.info("hf fp8 native: q_proj is %s, weight %s",
                     type(m.model.layers[0].self_attn.q_proj).__name__,
                     m.model.layers[0].self_attn.q_proj.weight.dtype)
            with torch.no_grad():
                lg = m(ids[None, :].cuda()).logits[0].float().cpu().contiguous()
            out["logits_hf_fp8_native"] = lg
            log.info("hf fp8 native (W8A8): max|hf - ours| = %.5f (argmax agree %.2f)",
                     float((lg - our_logits).abs().max()),
                     float((lg.argmax(-1) == our_logits.argmax(-1)).float().mean()))
        except Exception:
            log.warning("hf fp8 native path failed:\n%s", traceback.format_exc())
    else:
        log.info("no CUDA: hf fp8 native path skipped")
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--smoke", action="store_true", help="subset, no tarballs")
    ap.add_argument("--no-hf-fp8", action="store_true", help="skip transformers' FP8 loader")
    ap.add_argument("--keep-dirs", action="store_true", help="keep the directories after tarring")
    ap.add_argument("--only", default="", help="comma-separated fixture names (default: all)")
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s",
                        handlers=[logging.StreamHandler(sys.stdout),
                                  logging.FileHandler(os.path.join(a.out, "quant_fixtures.log"),
                                                      mode="w")])
    import safetensors
    import transformers
    log.info("torch %s transformers %s safetensors %s numpy %s cuda %s", torch.__version__,
             transformers.__version__, safetensors.__version__, np.__version__,
             torch.cuda.get_device_name(0) if torch.cuda.is_available() else "none")
    torch.set_num_threads(min(8, os.cpu_count() or 1))
    self_test_packing()
    check_nf4_table()
    bases = {}
    for tied in (True, False):
        cfg, base, ids = build_base(tied)
        base_logits = forward_logits(base, ids)
        log.info("base model (%s): %d params, logits std %.3f", "tied" if tied else "untied",
                 sum(p.numel() for p in base.parameters()), float(base_logits.std()))
        bases[tied] = (cfg, base, ids, base_logits)
    work = os.path.join(a.out, "dirs")
    os.makedirs(work, exist_ok=True)
    fixtures = make_fixtures()
    names = SMOKE if a.smoke else list(fixtures)
    if a.only:
        names = [n for n in a.only.split(",") if n]
        unknown = [n for n in names if n not in fixtures]
        if unknown:
            raise SystemExit(f"--only: unknown fixtures {unknown} (known: {sorted(fixtures)})")
    manifest = []
    for n in names:
        spec = fixtures[n]
        spec["hf_fp8"] = not a.no_hf_fp8
        cfg, base, ids, base_logits = bases[not spec.get("untied", False)]
        manifest.append(write_fixture(n, spec, cfg, base, ids, base_logits, work))
    prov = ("# Quantized checkpoint fixtures (issue 16)\n\n"
            f"Made by `scripts/gpu/quant_fixtures.py --out DIR` with torch {torch.__version__}, "
            f"transformers {transformers.__version__}, safetensors {safetensors.__version__} "
            "(packing in plain torch/numpy from the published AutoAWQ, GPTQ, compressed-tensors, "
            "DeepSeek-V3 and bitsandbytes layouts; references are fp32 CPU transformers logits on "
            "the weights dequantized from the stored tensors). Extract quant_fixtures_a.tar.xz, "
            "quant_fixtures_b.tar.xz and quant_fixtures_c.tar.xz into tests/data/quant/. "
            "manifest.json lists each fixture.\n")
    with open(os.path.join(work, "PROVENANCE.md"), "w") as f:
        f.write(prov)
    with open(os.path.join(work, "manifest.json"), "w") as f:
        json.dump(manifest, f, indent=2)
    if a.smoke:
        log.info("smoke run done: directories in %s", work)
        return
    for grp in sorted({m["tar"] for m in manifest}):
        tar_path = os.path.join(a.out, f"quant_fixtures_{grp}.tar.xz")
        with tarfile.open(tar_path, "w:xz", preset=9) as tf:
            if grp == min(m["tar"] for m in manifest):
                tf.add(os.path.join(work, "PROVENANCE.md"), arcname="PROVENANCE.md")
                tf.add(os.path.join(work, "manifest.json"), arcname="manifest.json")
            for m in manifest:
                if m["tar"] == grp:
                    tf.add(os.path.join(work, m["name"]), arcname=m["name"])
        mb = os.path.getsize(tar_path) / 2**20
        log.info("%s: %.2f MiB", tar_path, mb)
        if mb > 15:
            raise SystemExit(f"{tar_path} is {mb:.1f} MiB > 15 MiB")
    if not a.keep_dirs:
        shutil.rmtree(work)
    log.info("done")


if __name__ == "__main__":
    main()
