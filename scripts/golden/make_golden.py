#!/usr/bin/env python3
"""Builds the golden fixtures in tests/data/golden/ with PyTorch + transformers.

Runs on the GPU machine (torch 2.11, transformers 5.17); the compute itself is fp32 on the
CPU so the references are exact and deterministic. For each fixture: a tiny random-weight
model of a real architecture family saved with save_pretrained (safetensors + config.json +
generation_config.json), and reference.safetensors with
  input_ids           I64 [T]            fixed token ids
  logits              F32 [T, vocab]     teacher-forced logits of the whole sequence
  hidden_states.{i}   F32 [T, hidden]    transformers' output_hidden_states (0 = embeddings,
                                         n_layers = after the final norm)
  greedy_input_ids    I64 [P]            prompt for greedy decoding
  greedy_output_ids   I64 [P + 32]       prompt + 32 greedy tokens (model.generate)
  greedy_min_margin   F32 [1]            smallest top1-top2 logit gap seen while decoding
Weights are initialised with a larger std than HF's default so logits are spread out and
greedy decoding has no near-ties (the script retries seeds until the margin is >= 0.05).

usage: python3 scripts/golden/make_golden.py OUT_DIR [--profile fp32|bf16]

Profiles: `fp32` (tests/data/golden) initialises every weight with std 0.15 so the fp32 engine is
checked on large activations and sharp attention; `bf16` (tests/data/golden_bf16) is shaped like a
trained model for checking bf16 backends: small layer weights (std 0.05) with a confident output
distribution (embedding and lm_head std 0.5), since bf16 activations round at ~0.4% per op and a
random model's near-tied logits would make argmax agreement meaningless.
"""
import json
import os
import shutil
import sys

import torch
import transformers
from safetensors.torch import save_file
from transformers import (GenerationConfig, LlamaConfig, LlamaForCausalLM, Qwen2Config,
                          Qwen2ForCausalLM)

VOCAB = 384
T = 40          # teacher-forced length
P = 7           # greedy prompt length
N_NEW = 32


def common(**kw):
    base = dict(vocab_size=VOCAB, hidden_size=192, intermediate_size=320, num_hidden_layers=2,
                num_attention_heads=3, num_key_value_heads=1, head_dim=64,
                max_position_embeddings=512, rms_norm_eps=1e-6, initializer_range=0.15,
                bos_token_id=1, eos_token_id=2, pad_token_id=None)
    base.update(kw)
    return base


FIXTURES = {
    # R1-Distill-Llama style: llama3 rope scaling, GQA, untied, bf16 weights.
    "llama3_rope": (LlamaForCausalLM, LlamaConfig, common(
        rope_theta=500000.0, tie_word_embeddings=False,
        rope_scaling={"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
                      "high_freq_factor": 4.0, "original_max_position_embeddings": 64}),
        torch.bfloat16),
    # R1-Distill-Qwen style: q/k/v biases, theta 1e6, untied, f32 weights.
    "qwen2": (Qwen2ForCausalLM, Qwen2Config, common(
        rope_theta=1000000.0, tie_word_embeddings=False, num_key_value_heads=1), torch.float32),
    # Qwen2.5-0.5B style: tied embeddings, theta 1e4, bf16 weights.
    "qwen2_tied": (Qwen2ForCausalLM, Qwen2Config, common(
        rope_theta=10000.0, tie_word_embeddings=True, num_attention_heads=4,
        num_key_value_heads=2, hidden_size=256), torch.bfloat16),
    # Linear rope scaling, f16 weights, MHA (no GQA).
    "llama_linear_rope": (LlamaForCausalLM, LlamaConfig, common(
        rope_theta=10000.0, tie_word_embeddings=False, num_key_value_heads=3,
        rope_scaling={"rope_type": "linear", "factor": 4.0}), torch.float16),
    # Dynamic NTK scaling: max_position_embeddings below the sequence length so it kicks in.
    "llama_dynamic_rope": (LlamaForCausalLM, LlamaConfig, common(
        rope_theta=10000.0, tie_word_embeddings=False, max_position_embeddings=24,
        rope_scaling={"rope_type": "dynamic", "factor": 2.0}), torch.bfloat16),
}


def greedy_with_margin(model, prompt):
    out = model.generate(prompt[None, :], max_new_tokens=N_NEW, do_sample=False,
                         output_scores=True, return_dict_in_generate=True,
                         min_new_tokens=N_NEW, pad_token_id=0)
    margin = float("inf")
    for s in out.scores:
        top = torch.topk(s[0].float(), 2).values
        margin = min(margin, float(top[0] - top[1]))
    return out.sequences[0], margin


PROFILE = "fp32"


def build(name, model_cls, cfg_cls, cfg_kw, dtype, out_dir):
    if PROFILE == "bf16":
        cfg_kw = dict(cfg_kw, initializer_range=0.05)
    for seed in range(100):
        torch.manual_seed(1234 + seed)
        cfg = cfg_cls(**cfg_kw)
        model = model_cls(cfg).eval()
        if PROFILE == "bf16":
            with torch.no_grad():
                for n, p in model.named_parameters():
                    if "embed_tokens" in n or "lm_head" in n:
                        p.copy_(0.5 * torch.randn_like(p))
        # Norm weights away from 1.0 so a missing/misapplied norm weight is caught.
        with torch.no_grad():
            for n, p in model.named_parameters():
                if "norm" in n:
                    p.copy_(1.0 + 0.2 * torch.randn_like(p))
                elif n.endswith("bias"):
                    p.copy_(0.5 * torch.randn_like(p))
        # Round the weights (parameters only: model.to(dtype) would also round the rotary
        # inv_freq buffer, which real checkpoints never store) to the storage dtype, then
        # compute the reference in fp32.
        with torch.no_grad():
            for p in model.parameters():
                p.copy_(p.to(dtype).to(torch.float32))
        g = torch.Generator().manual_seed(99)
        ids = torch.randint(3, VOCAB, (T,), generator=g)
        prompt = torch.cat([torch.tensor([1]), torch.randint(3, VOCAB, (P - 1,), generator=g)])
        with torch.no_grad():
            fw = model(ids[None, :], output_hidden_states=True)
            seq, margin = greedy_with_margin(model, prompt)
        if margin >= 0.05:
            break
    d = os.path.join(out_dir, name)
    shutil.rmtree(d, ignore_errors=True)
    model.generation_config = GenerationConfig(bos_token_id=1, eos_token_id=2, do_sample=False)
    model.to(dtype).save_pretrained(d, safe_serialization=True)
    model.to(torch.float32)
    tensors = {"input_ids": ids.to(torch.int64), "logits": fw.logits[0].float().contiguous(),
               "greedy_input_ids": prompt.to(torch.int64),
               "greedy_output_ids": seq.to(torch.int64),
               "greedy_min_margin": torch.tensor([margin], dtype=torch.float32)}
    for i, h in enumerate(fw.hidden_states):
        tensors[f"hidden_states.{i}"] = h[0].float().contiguous()
    save_file(tensors, os.path.join(d, "reference.safetensors"))
    print(f"{name}: seed {1234 + seed} margin {margin:.4f} dtype {dtype} files {sorted(os.listdir(d))}")
    return model


def main():
    global PROFILE
    out_dir = sys.argv[1]
    if len(sys.argv) > 3 and sys.argv[2] == "--profile":
        PROFILE = sys.argv[3]
    os.makedirs(out_dir, exist_ok=True)
    models = {}
    for name, (mc, cc, kw, dt) in FIXTURES.items():
        if PROFILE == "bf16" and dt != torch.bfloat16:
            continue
        models[name] = build(name, mc, cc, kw, dt, out_dir)
    if PROFILE == "bf16":
        return
    # The qwen2 model re-saved in shards: same weights, so it reuses qwen2's references.
    d = os.path.join(out_dir, "qwen2_sharded")
    shutil.rmtree(d, ignore_errors=True)
    models["qwen2"].to(torch.float32).save_pretrained(d, safe_serialization=True, max_shard_size="300KB")
    shutil.copy(os.path.join(out_dir, "qwen2", "reference.safetensors"), d)
    print("qwen2_sharded:", sorted(os.listdir(d)))
    with open(os.path.join(out_dir, "PROVENANCE.md"), "w") as f:
        f.write("# Golden fixtures\n\nMade by `scripts/golden/make_golden.py` with torch "
                f"{torch.__version__} and transformers {transformers.__version__} (fp32 CPU "
                "compute). Regenerate on the GPU machine with `python3 scripts/golden/make_golden.py tests/data/golden`.\n")


if __name__ == "__main__":
    main()
