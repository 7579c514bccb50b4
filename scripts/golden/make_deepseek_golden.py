#!/usr/bin/env python3
"""Golden fixtures for the DeepSeek family (MLA + MoE) and YaRN rope, from PyTorch + transformers.

Runs on the GPU machine (torch 2.11, transformers 5.17); the compute is fp32 on the CPU, so the
references are exact and deterministic. Like make_golden.py, each fixture is a tiny random model of
a real architecture saved with save_pretrained (bf16 weights), plus reference.safetensors with
  input_ids            I64 [T]           fixed token ids
  logits               F32 [T, vocab]    teacher-forced logits (fp32 compute on the bf16-rounded weights)
  hidden_states.{i}    F32 [T, hidden]   output_hidden_states (0 = embeddings, L = after the final norm)
  greedy_input_ids     I64 [P]           prompt
  greedy_output_ids    I64 [P + 32]      prompt + 32 greedy tokens
  greedy_min_margin    F32 [1]           smallest top1-top2 logit gap while decoding
  router.{l}.topk_idx  I64 [T, k]        MoE layer l: the experts transformers chose per token (sorted)
  router.{l}.topk_weight F32 [T, k]      their weights, in the same order
  router_min_margin    F32 [1]           smallest gap between the k-th and (k+1)-th choice score
Fixtures:
  deepseek_v2  DeepseekV2ForCausalLM: softmax router, greedy top-k, q_lora_rank None, one dense
               first layer, YaRN rope with mscale == mscale_all_dim (V2-Lite's shape).
  deepseek_v3  DeepseekV3ForCausalLM: sigmoid router with e_score_correction_bias, noaux_tc with
               group-limited top-k, q_lora_rank set, two dense first layers, norm_topk_prob,
               routed_scaling_factor 2.5, YaRN rope (mscale 1.0, R1's shape).
  qwen2_yarn   Qwen2ForCausalLM with rope_scaling {rope_type: yarn} (Qwen2.5 long-context configs).
Seeds are retried until greedy decoding has no near-ties (margin >= 0.05) and every router choice
is separated from the next candidate by >= 1e-4, so fp32 paths must reproduce them exactly.

usage: python3 scripts/golden/make_deepseek_golden.py OUT_DIR     (e.g. tests/data/golden)
"""
import json
import os
import shutil
import sys

import torch
import transformers
from safetensors import safe_open
from safetensors.torch import save_file
from transformers import GenerationConfig, Qwen2Config, Qwen2ForCausalLM

VOCAB = 384
T = 40
P = 7
N_NEW = 32


def deepseek_classes():
    from transformers import DeepseekV2Config, DeepseekV2ForCausalLM, DeepseekV3Config, DeepseekV3ForCausalLM
    return DeepseekV2Config, DeepseekV2ForCausalLM, DeepseekV3Config, DeepseekV3ForCausalLM


def fixtures():
    V2C, V2M, V3C, V3M = deepseek_classes()
    mla = dict(vocab_size=VOCAB, hidden_size=128, intermediate_size=256, moe_intermediate_size=64,
               num_attention_heads=4, num_key_value_heads=4, kv_lora_rank=64, qk_nope_head_dim=32,
               qk_rope_head_dim=16, v_head_dim=32, max_position_embeddings=512, rms_norm_eps=1e-6,
               initializer_range=0.15, bos_token_id=1, eos_token_id=2, pad_token_id=None,
               tie_word_embeddings=False, attention_bias=False, hidden_act="silu")
    v2 = dict(mla, num_hidden_layers=3, q_lora_rank=None, n_routed_experts=8, num_experts_per_tok=2,
              n_shared_experts=1, first_k_dense_replace=1, moe_layer_freq=1, topk_method="greedy",
              n_group=1, topk_group=1, routed_scaling_factor=1.0, norm_topk_prob=False,
              scoring_func="softmax", rope_theta=10000.0,
              rope_scaling={"rope_type": "yarn", "type": "yarn", "factor": 4.0,
                            "original_max_position_embeddings": 32, "beta_fast": 32, "beta_slow": 1,
                            "mscale": 0.707, "mscale_all_dim": 0.707})
    v3 = dict(mla, num_hidden_layers=4, q_lora_rank=48, n_routed_experts=16, num_experts_per_tok=4,
              n_shared_experts=1, first_k_dense_replace=2, moe_layer_freq=1, topk_method="noaux_tc",
              n_group=4, topk_group=2, routed_scaling_factor=2.5, norm_topk_prob=True,
              scoring_func="sigmoid", rope_theta=10000.0,
              rope_scaling={"rope_type": "yarn", "type": "yarn", "factor": 4.0,
                            "original_max_position_embeddings": 32, "beta_fast": 32, "beta_slow": 1,
                            "mscale": 1.0, "mscale_all_dim": 1.0})
    qwen = dict(vocab_size=VOCAB, hidden_size=192, intermediate_size=320, num_hidden_layers=2,
                num_attention_heads=3, num_key_value_heads=1, head_dim=64, max_position_embeddings=128,
                rms_norm_eps=1e-6, initializer_range=0.15, bos_token_id=1, eos_token_id=2, pad_token_id=None,
                tie_word_embeddings=False, rope_theta=1000000.0,
                rope_scaling={"rope_type": "yarn", "type": "yarn", "factor": 4.0,
                              "original_max_position_embeddings": 32})
    return {"deepseek_v2": (V2M, V2C, v2), "deepseek_v3": (V3M, V3C, v3), "qwen2_yarn": (Qwen2ForCausalLM, Qwen2Config, qwen)}


def moe_modules(model):
    return [(name, m) for name, m in model.named_modules()
            if hasattr(m, "gate") and hasattr(m, "experts") and hasattr(m, "shared_experts")]


def layer_of(name):
    parts = name.split(".")
    return int(parts[parts.index("layers") + 1])


class RouterCapture:
    """Records the (indices, weights) each MoE block routes with: the inputs of its experts module
    (transformers 5: experts(hidden_states, top_k_index, top_k_weights)), else the return value of
    route_tokens_to_experts. Refuses float "indices" (a 5.17 run of the first version of this
    script recorded two float tensors and truncated one to zeros)."""

    def __init__(self, model):
        self.calls = {}
        self.handles = []
        for name, m in moe_modules(model):
            li = layer_of(name)
            def pre_hook(mod, args, kwargs, _li=li):
                vals = list(args[1:]) + [kwargs[k] for k in ("top_k_index", "top_k_weights") if k in kwargs]
                ints = [v for v in vals if torch.is_tensor(v) and not torch.is_floating_point(v)]
                floats = [v for v in vals if torch.is_tensor(v) and torch.is_floating_point(v)]
                if ints and floats:
                    self.record(_li, (ints[0], floats[0]))
            self.handles.append(m.experts.register_forward_pre_hook(pre_hook, with_kwargs=True))
            if hasattr(m, "route_tokens_to_experts"):
                orig = m.route_tokens_to_experts

                def wrapped(*a, _orig=orig, _li=li, **kw):
                    out = _orig(*a, **kw)
                    ints = [v for v in out if torch.is_tensor(v) and not torch.is_floating_point(v)]
                    if ints and _li not in self.calls:
                        self.record(_li, out)
                    return out
                m.route_tokens_to_experts = wrapped

    def record(self, li, out):
        a, b = out[0], out[1]
        idx, w = (a, b) if not torch.is_floating_point(a) else (b, a)
        if torch.is_floating_point(idx):
            raise RuntimeError(f"layer {li}: router capture got float tensors, not expert indices")
        self.calls.setdefault(li, []).append((idx.detach().reshape(-1, idx.shape[-1]).clone(),
                                              w.detach().float().reshape(-1, w.shape[-1]).clone()))

    def clear(self):
        self.calls = {}


def router_scores(model, name, m, x):
    """Scores the router ranks by (for the margin check only): softmax (V2) or sigmoid + bias (V3)."""
    cfg = model.config
    w = m.gate.weight.float()
    logits = x.reshape(-1, x.shape[-1]).float() @ w.t()
    if getattr(cfg, "topk_method", "greedy") == "noaux_tc" or getattr(cfg, "scoring_func", "") == "sigmoid":
        s = logits.sigmoid()
        bias = getattr(m.gate, "e_score_correction_bias", None)
        if bias is None:
            bias = getattr(m, "e_score_correction_bias", None)
        return s + (bias.float() if bias is not None else 0)
    return logits.softmax(-1)


def greedy_with_margin(model, prompt):
    out = model.generate(prompt[None, :], max_new_tokens=N_NEW, do_sample=False, output_scores=True,
                         return_dict_in_generate=True, min_new_tokens=N_NEW, pad_token_id=0)
    margin = float("inf")
    for s in out.scores:
        top = torch.topk(s[0].float(), 2).values
        margin = min(margin, float(top[0] - top[1]))
    return out.sequences[0], margin


def build(name, model_cls, cfg_cls, kw, out_dir):
    dtype = torch.bfloat16
    for seed in range(200):
        torch.manual_seed(4321 + seed)
        cfg = cfg_cls(**kw)
        model = model_cls(cfg).eval()
        with torch.no_grad():
            for n, p in model.named_parameters():
                if "norm" in n:
                    p.copy_(1.0 + 0.2 * torch.randn_like(p))
                elif n.endswith("bias"):
                    p.copy_(0.5 * torch.randn_like(p))
                elif "embed_tokens" in n or "lm_head" in n:
                    p.copy_(0.5 * torch.randn_like(p))
                elif p.dim() >= 2:
                    p.copy_(0.08 * torch.randn_like(p))
            for n, b in model.named_buffers():
                if n.endswith("e_score_correction_bias"):
                    b.copy_(0.05 * torch.randn_like(b))
            for p in model.parameters():
                p.copy_(p.to(dtype).to(torch.float32))
            for n, b in model.named_buffers():
                if n.endswith("e_score_correction_bias"):
                    b.copy_(b.to(dtype).to(torch.float32))
        g = torch.Generator().manual_seed(99)
        ids = torch.randint(3, VOCAB, (T,), generator=g)
        prompt = torch.cat([torch.tensor([1]), torch.randint(3, VOCAB, (P - 1,), generator=g)])
        cap = RouterCapture(model)
        # The MoE blocks' inputs, for the router margin check.
        moe_inputs = {}
        hooks = [m.register_forward_pre_hook(lambda mod, inp, _li=layer_of(nm): moe_inputs.__setitem__(_li, inp[0].detach().clone()))
                 for nm, m in moe_modules(model)]
        with torch.no_grad():
            fw = model(ids[None, :], output_hidden_states=True)
        for h in hooks:
            h.remove()
        routes = {li: calls[0] for li, calls in cap.calls.items()}
        cap.clear()
        rmargin = float("inf")
        for nm, m in moe_modules(model):
            li = layer_of(nm)
            if li not in moe_inputs:
                continue
            s = router_scores(model, nm, m, moe_inputs[li])
            k = model.config.num_experts_per_tok
            top = torch.topk(s, k + 1, dim=-1).values
            rmargin = min(rmargin, float((top[:, k - 1] - top[:, k]).min()))
        with torch.no_grad():
            seq, margin = greedy_with_margin(model, prompt)
        n_moe = len(moe_modules(model))
        print(f"{name}: seed {4321 + seed} greedy margin {margin:.4f} router margin {rmargin:.2e} "
              f"moe layers {n_moe} routes captured {sorted(routes)}", flush=True)
        if margin >= 0.05 and (n_moe == 0 or rmargin >= 1e-4) and len(routes) == n_moe:
            break
    d = os.path.join(out_dir, name)
    shutil.rmtree(d, ignore_errors=True)
    model.generation_config = GenerationConfig(bos_token_id=1, eos_token_id=2, do_sample=False)
    model.to(dtype).save_pretrained(d, safe_serialization=True)
    model.to(torch.float32)
    tensors = {"input_ids": ids.to(torch.int64), "logits": fw.logits[0].float().contiguous(),
               "greedy_input_ids": prompt.to(torch.int64), "greedy_output_ids": seq.to(torch.int64),
               "greedy_min_margin": torch.tensor([margin], dtype=torch.float32)}
    for i, h in enumerate(fw.hidden_states):
        tensors[f"hidden_states.{i}"] = h[0].float().contiguous()
    for li, (idx, w) in routes.items():
        order = torch.argsort(idx, dim=-1)
        tensors[f"router.{li}.topk_idx"] = torch.gather(idx, 1, order).to(torch.int64).contiguous()
        tensors[f"router.{li}.topk_weight"] = torch.gather(w, 1, order).float().contiguous()
    if routes:
        tensors["router_min_margin"] = torch.tensor([rmargin], dtype=torch.float32)
    save_file(tensors, os.path.join(d, "reference.safetensors"))
    names = []
    for f in sorted(os.listdir(d)):
        if f.endswith(".safetensors") and f != "reference.safetensors":
            with safe_open(os.path.join(d, f), "pt") as sf:
                names += [f"{k} {list(sf.get_slice(k).get_shape())} {sf.get_slice(k).get_dtype()}" for k in sf.keys()]
    with open(os.path.join(d, "weight_names.txt"), "w") as fh:
        fh.write("\n".join(sorted(names)) + "\n")
    print(f"{name}: files {sorted(os.listdir(d))}; {len(names)} tensors, e.g. {sorted(names)[:3]}", flush=True)


def main():
    out_dir = sys.argv[1]
    os.makedirs(out_dir, exist_ok=True)
    print(f"torch {torch.__version__} transformers {transformers.__version__}", flush=True)
    ok = True
    for name, (mc, cc, kw) in fixtures().items():
        try:
            build(name, mc, cc, kw, out_dir)
        except Exception as e:  # keep going: one failing family must not cost the others
            import traceback
            traceback.print_exc()
            print(f"{name}: FAILED: {e}", flush=True)
            ok = False
    with open(os.path.join(out_dir, "PROVENANCE-deepseek.md"), "w") as f:
        f.write("# DeepSeek / YaRN golden fixtures\n\nMade by `scripts/golden/make_deepseek_golden.py` with torch "
                f"{torch.__version__} and transformers {transformers.__version__} (fp32 CPU compute on bf16-rounded "
                "weights). Regenerate on the GPU machine with `python3 scripts/golden/make_deepseek_golden.py tests/data/golden`.\n")
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
