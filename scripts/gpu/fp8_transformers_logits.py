#!/usr/bin/env python3
"""Loads a frugal-written DeepSeek-style FP8 block directory (`frugal quantize --format fp8`,
quant_method fp8 with weight_block_size [128, 128]) in transformers with its own fine-grained
FP8 loader and writes the teacher-forced logits, as the oracle for
tests/quantize/fp8_transformers_test.cpp (acceptance 3 of issue 17).

usage: fp8_transformers_logits.py MODEL_DIR OUT.safetensors [--tokens N]

Writes into OUT.safetensors:
  input_ids                 I64 [N]         (i * 37 + 11) % vocab_size, i < N (default 24)
  logits_hf_fp8_dequant     F32 [N, vocab]  FineGrainedFP8Config(dequantize=True), fp32 on the CPU:
                                            transformers' Fp8Dequantize (weight * weight_scale_inv
                                            per 128x128 block), then its fp32 Qwen2 forward
  logits_hf_fp8_native      F32 [N, vocab]  (when it runs) the native FP8Linear path on CUDA, bf16,
                                            with dynamic fp8 activations: a W8A8 result, logged only
and the versions, the q_proj module types and sha256 of the weight files in the metadata and on
stdout."""
import argparse
import glob
import hashlib
import json
import os
import sys
import traceback

import torch
from safetensors.torch import save_file


def sha256(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("model")
    ap.add_argument("out")
    ap.add_argument("--tokens", type=int, default=24)
    a = ap.parse_args()
    import transformers
    from transformers import AutoModelForCausalLM, FineGrainedFP8Config

    cfg = json.load(open(os.path.join(a.model, "config.json")))
    qc = cfg.get("quantization_config", {})
    if qc.get("quant_method") != "fp8" or qc.get("weight_block_size") != [128, 128]:
        sys.exit(f"{a.model}: not an fp8 [128, 128] block directory: {qc}")
    vocab = cfg["vocab_size"]
    ids = torch.tensor([(i * 37 + 11) % vocab for i in range(a.tokens)], dtype=torch.int64)
    meta = {"torch": torch.__version__, "transformers": transformers.__version__,
            "quantization_config": json.dumps(qc)}
    for f in sorted(glob.glob(os.path.join(a.model, "*.safetensors"))):
        meta["sha256:" + os.path.basename(f)] = sha256(f)
    print("torch", torch.__version__, "transformers", transformers.__version__,
          "cuda", torch.cuda.get_device_name(0) if torch.cuda.is_available() else "none")

    out = {"input_ids": ids}
    m = AutoModelForCausalLM.from_pretrained(
        a.model, quantization_config=FineGrainedFP8Config(weight_block_size=(128, 128), dequantize=True),
        dtype=torch.float32, device_map="cpu").eval()
    q = m.model.layers[0].self_attn.q_proj
    meta["dequant_q_proj"] = f"{type(q).__name__} {q.weight.dtype}"
    print("dequantize=True: q_proj is", meta["dequant_q_proj"])
    with torch.no_grad():
        out["logits_hf_fp8_dequant"] = m(ids[None, :]).logits[0].float().contiguous()
    ref = out["logits_hf_fp8_dequant"]
    print("dequant logits: std %.4f, finite %s" % (float(ref.std()), bool(torch.isfinite(ref).all())))
    del m
    if torch.cuda.is_available():
        try:
            m = AutoModelForCausalLM.from_pretrained(a.model, dtype=torch.bfloat16, device_map="cuda").eval()
            q = m.model.layers[0].self_attn.q_proj
            meta["native_q_proj"] = f"{type(q).__name__} {q.weight.dtype}"
            with torch.no_grad():
                lg = m(ids[None, :].cuda()).logits[0].float().cpu().contiguous()
            out["logits_hf_fp8_native"] = lg
            rel = float((lg - ref).abs().max() / ref.abs().max())
            agree = float((lg.argmax(-1) == ref.argmax(-1)).float().mean())
            meta["native_vs_dequant"] = f"max|d|/max|ref| {rel:.4f} argmax agree {agree:.3f}"
            print("native FP8 (W8A8, bf16) on CUDA: q_proj is", meta["native_q_proj"], "|", meta["native_vs_dequant"])
        except Exception:
            meta["native_error"] = traceback.format_exc()[-2000:]
            print("native FP8 path failed:\n" + meta["native_error"])
    save_file(out, a.out, metadata=meta)
    print("wrote", a.out, {k: list(v.shape) for k, v in out.items()})


if __name__ == "__main__":
    main()
