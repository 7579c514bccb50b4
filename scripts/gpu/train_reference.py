#!/usr/bin/env python3
"""Trains frugal's reference model: a ~19M-parameter Qwen2ForCausalLM with its own byte-level BPE.

Runs on the GPU machine (torch 2.11, transformers 5.x, tokenizers 0.2x; no network: everything it
reads is in the repository, under data/corpus/, see data/corpus/README.md).

    python3 scripts/gpu/train_reference.py --out DIR [--minutes 4] [--smoke] [--seed 1234]

Writes a complete Hugging Face model directory DIR:
  config.json, generation_config.json        Qwen2 config (tied embeddings, GQA 8/2, head_dim 64)
  model-0000k-of-0000n.safetensors + model.safetensors.index.json   bf16, every shard <= 15 MiB
  tokenizer.json, tokenizer_config.json      byte-level BPE built like Qwen2's (NFC, Split with the
                                             Qwen2 regex, ByteLevel(use_regex=False)), ChatML template
  train_log.txt                              every log line of the run
  provenance.json                            hashes, seeds, versions, losses, wall time, GPU
  samples.txt, samples.json                  greedy continuations of fixed prompts, computed after
                                             saving by reloading the saved bf16 weights in fp32 on the
                                             CPU (ids, text, and the top1-top2 logit margin per step)
  README.md                                  what it is and how it was made

--smoke: a tiny model, a small vocabulary and a few steps, exercising every code path in seconds.
"""
import argparse
import contextlib
import csv
import hashlib
import io
import json
import lzma
import math
import os
import platform
import random
import re
import sys
import tarfile
import time

T0 = time.time()
REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CORPUS = os.path.join(REPO, "data", "corpus")
CORPUS_FILES = ["war-and-peace.txt.xz", "mmlu.tar.xz", "cmmlu-dev.tar.xz",
                "gsm8k-test-first1000.jsonl.xz"]

# Qwen2's pre-tokenizer regex, verbatim from Qwen2's tokenizer.json.
QWEN2_REGEX = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*"
               r"|\s*[\r\n]+|\s+(?!\S)|\s+")
SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]  # ids 0, 1, 2
# Qwen2-style ChatML template, without Qwen's default system prompt or tool support.
CHAT_TEMPLATE = (
    "{%- for message in messages %}"
    "{{- '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n' }}"
    "{%- endfor %}"
    "{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}{%- endif %}")
GSM8K_SUFFIX = "\nPlease reason step by step, and put your final answer within \\boxed{}."
MC_HEADER = "The following are multiple choice questions (with answers) about {}.\n\n"

SAMPLE_PROMPTS = [
    "\"Well, Prince, so Genoa and Lucca are now",
    "Pierre looked at Natasha and",
    "The war of 1812 began when",
    MC_HEADER.format("world religions") + "What is the sign of the covenant for Jewish males?\n"
    "A. Fasting on Yom Kippur\nB. Lighting Shabbat candles\nC. The rainbow\nD. Circumcision\nAnswer:",
    "<|im_start|>user\nTom has 3 apples and buys 5 more. How many apples does he have?" + GSM8K_SUFFIX
    + "<|im_end|>\n<|im_start|>assistant\n",
]

LOG = None


def log(msg):
    line = f"[{time.time() - T0:7.1f}s] {msg}"
    print(line, flush=True)
    if LOG is not None:
        LOG.write(line + "\n")
        LOG.flush()


def sha256_file(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for b in iter(lambda: f.read(1 << 20), b""):
            h.update(b)
    return h.hexdigest()


def die(msg):
    log("ERROR: " + msg)
    sys.exit(1)


# ----------------------------------------------------------------------------------------------
# Corpus
def read_xz(name):
    path = os.path.join(CORPUS, name)
    if not os.path.exists(path):
        die(f"{path} is missing (run scripts/eval/make_corpus.py on the dev machine)")
    with lzma.open(path, "rb") as f:
        return f.read()


def read_tar_xz(name):
    out = {}
    with tarfile.open(os.path.join(CORPUS, name), "r:xz") as tar:
        for m in tar.getmembers():
            if m.isfile():
                out[m.name] = tar.extractfile(m).read().decode("utf-8")
    return out


def mc_block(q, a, b, c, d, ans):
    return f"{q}\nA. {a}\nB. {b}\nC. {c}\nD. {d}\nAnswer: {ans}\n\n"


def mc_docs(rows, subject, per_doc=5):
    """Rows rendered exactly as the eval's few-shot prompt, per_doc questions under one header."""
    docs = []
    for i in range(0, len(rows), per_doc):
        docs.append(MC_HEADER.format(subject.replace("_", " ")) +
                    "".join(mc_block(*r) for r in rows[i:i + per_doc]))
    return docs


def load_corpus(smoke):
    """Returns (train_docs, val_text, stats). Val = the 2% of War and Peace at 49%..51%."""
    wp = read_xz("war-and-peace.txt.xz").decode("utf-8")
    n = len(wp)
    a = wp.rfind("\n", 0, int(n * 0.49)) + 1
    b = wp.rfind("\n", 0, int(n * 0.51)) + 1
    val_text = wp[a:b]
    train_wp = [wp[:a], wp[b:]]
    docs = []
    for part in train_wp:  # ~16 KB pieces cut at paragraph ends, so encode_batch runs in parallel
        i = 0
        while i < len(part):
            j = part.find("\n\n", i + 16000)
            j = len(part) if j < 0 else j + 2
            docs.append(part[i:j])
            i = j
    n_wp = len(docs)

    mmlu = read_tar_xz("mmlu.tar.xz")
    n_mmlu_rows = 0
    for name in sorted(mmlu):
        subject = os.path.basename(name).rsplit("_", 1)[0]
        rows = list(csv.reader(io.StringIO(mmlu[name])))
        for r in rows:
            if len(r) != 6 or r[5] not in ("A", "B", "C", "D"):
                die(f"data/corpus/mmlu.tar.xz:{name}: bad row {r[:1]}")
        n_mmlu_rows += len(rows)
        docs += mc_docs(rows, subject)
    cmmlu = read_tar_xz("cmmlu-dev.tar.xz")
    n_cmmlu_rows = 0
    for name in sorted(cmmlu):
        subject = os.path.basename(name)[:-4]
        rows = list(csv.reader(io.StringIO(cmmlu[name])))
        if not rows or rows[0] != ["", "Question", "A", "B", "C", "D", "Answer"]:
            die(f"data/corpus/cmmlu-dev.tar.xz:{name}: unexpected header {rows[:1]}")
        rows = [r[1:] for r in rows[1:]]
        n_cmmlu_rows += len(rows)
        docs += mc_docs(rows, subject)
    gsm = read_xz("gsm8k-test-first1000.jsonl.xz").decode("utf-8").splitlines()
    for line in gsm:
        j = json.loads(line)
        rationale, _, final = j["answer"].rpartition("####")
        rationale = re.sub(r"<<[^>]*>>", "", rationale).strip()
        final = final.strip()
        docs.append("<|im_start|>user\n" + j["question"] + GSM8K_SUFFIX + "<|im_end|>\n"
                    "<|im_start|>assistant\n" + rationale + "\nThe final answer is \\boxed{" + final
                    + "}.<|im_end|>\n")
    stats = dict(war_and_peace_chars=n, val_chars=len(val_text), val_char_range=[a, b],
                 war_and_peace_docs=n_wp, mmlu_rows=n_mmlu_rows, cmmlu_rows=n_cmmlu_rows,
                 gsm8k_problems=len(gsm), docs=len(docs),
                 train_chars=sum(len(d) for d in docs))
    if smoke:
        rnd = random.Random(0)
        docs = rnd.sample(docs, min(len(docs), 300))
        val_text = val_text[:20000]
    return docs, val_text, stats


# ----------------------------------------------------------------------------------------------
# Tokenizer
def train_tokenizer(docs, vocab_size, out_dir):
    from tokenizers import Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers
    from tokenizers import processors, trainers
    tok = Tokenizer(models.BPE())
    tok.normalizer = normalizers.NFC()
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(QWEN2_REGEX), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
    ])
    tok.decoder = decoders.ByteLevel()
    tok.post_processor = processors.ByteLevel(trim_offsets=False)
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, min_frequency=2, show_progress=False,
                                  special_tokens=SPECIALS,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    t = time.time()
    tok.train_from_iterator(docs, trainer=trainer)
    log(f"tokenizer: trained vocab {tok.get_vocab_size()} in {time.time() - t:.1f}s")
    for i, s in enumerate(SPECIALS):
        if tok.token_to_id(s) != i:
            die(f"special token {s} got id {tok.token_to_id(s)}, expected {i}")
    tok.save(os.path.join(out_dir, "tokenizer.json"))
    added = {str(i): {"content": s, "lstrip": False, "normalized": False, "rstrip": False,
                      "single_word": False, "special": True} for i, s in enumerate(SPECIALS)}
    cfg = {
        "add_bos_token": False, "add_eos_token": False, "add_prefix_space": False,
        "added_tokens_decoder": added, "additional_special_tokens": ["<|im_start|>", "<|im_end|>"],
        "bos_token": None, "eos_token": "<|endoftext|>", "pad_token": "<|endoftext|>",
        "unk_token": None, "chat_template": CHAT_TEMPLATE, "clean_up_tokenization_spaces": False,
        "errors": "replace", "model_max_length": 4096, "split_special_tokens": False,
        "tokenizer_class": "PreTrainedTokenizerFast",
    }
    with open(os.path.join(out_dir, "tokenizer_config.json"), "w", encoding="utf-8") as f:
        json.dump(cfg, f, indent=2, ensure_ascii=False)
    # Round trip through the saved file: what frugal will read.
    tok = Tokenizer.from_file(os.path.join(out_dir, "tokenizer.json"))
    probe = "Hello, Prince Andrew! 1812 — «Натáша» 你好 <|im_end|>\n\n  x"
    ids = tok.encode(probe, add_special_tokens=False).ids
    back = tok.decode(ids, skip_special_tokens=False)
    log(f"tokenizer: probe {len(probe)} chars -> {len(ids)} ids, round trip "
        f"{'OK' if back == probe else 'DIFFERS: ' + repr(back)}")
    if ids.count(2) != 1:
        die("tokenizer: <|im_end|> in text was not matched as one special token")
    return tok


def encode_docs(tok, docs):
    eot = tok.token_to_id("<|endoftext|>")
    out = []
    for enc in tok.encode_batch(docs, add_special_tokens=False):
        out.extend(enc.ids)
        out.append(eot)
    return out


# ----------------------------------------------------------------------------------------------
def main():
    global LOG
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True)
    ap.add_argument("--minutes", type=float, default=4.0, help="wall budget of the training loop")
    ap.add_argument("--smoke", action="store_true")
    ap.add_argument("--seed", type=int, default=1234)
    ap.add_argument("--vocab", type=int, default=8192)
    ap.add_argument("--hidden", type=int, default=512)
    ap.add_argument("--layers", type=int, default=6)
    ap.add_argument("--intermediate", type=int, default=1152)
    ap.add_argument("--heads", type=int, default=8)
    ap.add_argument("--kv-heads", type=int, default=2)
    ap.add_argument("--batch", type=int, default=32, help="sequences per step")
    ap.add_argument("--seq", type=int, default=1024)
    ap.add_argument("--lr", type=float, default=1.5e-3)
    ap.add_argument("--warmup", type=int, default=100)
    ap.add_argument("--eval-every", type=int, default=100)
    ap.add_argument("--log-every", type=int, default=20)
    ap.add_argument("--patience", type=int, default=4, help="evals without val improvement before stopping")
    ap.add_argument("--max-shard-mb", type=float, default=14.0, help="shard size limit, 1e6 bytes")
    ap.add_argument("--sample-tokens", type=int, default=48)
    ap.add_argument("--max-steps", type=int, default=0, help="stop after this many steps (0: no limit)")
    a = ap.parse_args()
    if a.smoke:
        a.vocab, a.hidden, a.layers, a.intermediate, a.heads, a.kv_heads = 600, 128, 2, 256, 2, 1
        a.batch, a.seq, a.warmup, a.eval_every, a.log_every = 4, 128, 5, 10, 5
        a.minutes = min(a.minutes, 0.2)
        a.max_steps = a.max_steps or 40
        a.sample_tokens = 8
        a.max_shard_mb = 0.3  # forces several shards so the resharding check runs
    if a.hidden % 128 or a.intermediate % 128:
        if not a.smoke:
            sys.exit("hidden and intermediate sizes must be multiples of 128 (group-128 quantization)")
    os.makedirs(a.out, exist_ok=True)
    LOG = open(os.path.join(a.out, "train_log.txt"), "w", encoding="utf-8")
    log(f"train_reference.py {' '.join(sys.argv[1:])}")

    import numpy as np
    import torch
    import torch.nn.functional as F
    import transformers
    from transformers import GenerationConfig, Qwen2Config, Qwen2ForCausalLM
    log(f"python {platform.python_version()} torch {torch.__version__} transformers "
        f"{transformers.__version__} numpy {np.__version__}")
    random.seed(a.seed)
    np.random.seed(a.seed)
    torch.manual_seed(a.seed)
    dev = "cuda" if torch.cuda.is_available() else "cpu"
    gpu = torch.cuda.get_device_name(0) if dev == "cuda" else "none"
    log(f"device {dev} ({gpu})")
    if dev == "cuda":
        torch.backends.cuda.matmul.allow_tf32 = True
        torch.backends.cudnn.allow_tf32 = True

    # ---- data + tokenizer
    docs, val_text, cstats = load_corpus(a.smoke)
    log(f"corpus: {json.dumps(cstats)}")
    tok = train_tokenizer(docs, a.vocab, a.out)
    vocab = tok.get_vocab_size()
    t = time.time()
    train_ids = np.asarray(encode_docs(tok, docs), dtype=np.int32)
    val_ids = np.asarray(tok.encode(val_text, add_special_tokens=False).ids, dtype=np.int32)
    log(f"tokens: train {len(train_ids)} val {len(val_ids)} ({time.time() - t:.1f}s; "
        f"{cstats['train_chars'] / max(1, len(train_ids)):.2f} chars/token)")
    if len(val_ids) < a.seq + 1 or len(train_ids) < 4 * (a.seq + 1):
        die("corpus too small for the sequence length")

    # ---- model
    cfg = Qwen2Config(
        vocab_size=vocab, hidden_size=a.hidden, intermediate_size=a.intermediate,
        num_hidden_layers=a.layers, num_attention_heads=a.heads, num_key_value_heads=a.kv_heads,
        head_dim=a.hidden // a.heads, max_position_embeddings=4096, rope_theta=10000.0,
        rms_norm_eps=1e-6, tie_word_embeddings=True, bos_token_id=0, eos_token_id=0,
        pad_token_id=None, use_sliding_window=False, sliding_window=None, attention_dropout=0.0,
        initializer_range=0.02, hidden_act="silu", use_cache=False)
    model = Qwen2ForCausalLM(cfg).to(dev)
    n_params = sum(p.numel() for p in model.parameters())
    log(f"model: {n_params / 1e6:.2f}M parameters (tied), {a.layers} layers, hidden {a.hidden}, "
        f"heads {a.heads}/{a.kv_heads}, head_dim {a.hidden // a.heads}, ffn {a.intermediate}, vocab {vocab}")
    decay = [p for n, p in model.named_parameters() if p.dim() >= 2]
    no_decay = [p for n, p in model.named_parameters() if p.dim() < 2]
    opt_kw = dict(lr=a.lr, betas=(0.9, 0.95), eps=1e-8)
    try:
        opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1},
                                 {"params": no_decay, "weight_decay": 0.0}], fused=dev == "cuda", **opt_kw)
    except (TypeError, RuntimeError):
        opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1},
                                 {"params": no_decay, "weight_decay": 0.0}], **opt_kw)

    train_t = torch.from_numpy(train_ids.astype(np.int64))
    gen = torch.Generator().manual_seed(a.seed)
    L = a.seq + 1
    val_windows = torch.from_numpy(val_ids[: (len(val_ids) // L) * L].astype(np.int64)).view(-1, L)
    if a.smoke:
        val_windows = val_windows[:4]
    autocast = (torch.autocast("cuda", dtype=torch.bfloat16) if dev == "cuda"
                else contextlib.nullcontext())

    def batch():
        starts = torch.randint(0, len(train_t) - L, (a.batch,), generator=gen)
        x = torch.stack([train_t[s:s + L] for s in starts.tolist()])
        return x.to(dev, non_blocking=True)

    def loss_of(x):
        with autocast:
            logits = model(input_ids=x[:, :-1]).logits
        return F.cross_entropy(logits.float().reshape(-1, logits.shape[-1]), x[:, 1:].reshape(-1))

    @torch.no_grad()
    def val_loss():
        model.eval()
        tot, n = 0.0, 0
        for i in range(0, len(val_windows), 16):
            x = val_windows[i:i + 16].to(dev)
            tot += loss_of(x).item() * x.shape[0]
            n += x.shape[0]
        model.train()
        return tot / n

    budget = a.minutes * 60.0
    total_steps = None  # fixed after timing the first steps, so the cosine ends at the budget
    best = (float("inf"), 0, None)
    bad_evals = 0
    step = 0
    tokens = 0
    losses = []
    stop_reason = "budget"
    v0 = val_loss()
    log(f"step 0 val_loss {v0:.4f}")
    model.train()
    train_start = time.time()
    t_log = time.time()
    tok_log = 0
    t10 = None
    while True:
        if step == 10:
            if dev == "cuda":
                torch.cuda.synchronize()
            t10 = time.time()
        if total_steps is None and step == 30:
            if dev == "cuda":
                torch.cuda.synchronize()
            per = (time.time() - t10) / 20 * 1.05  # + 5% for the validation passes
            total_steps = max(a.warmup + 10, int(budget * 0.97 / per))
            log(f"timing: {per * 1000:.1f} ms/step -> cosine over {total_steps} steps")
        ts = total_steps or 10 ** 9
        if step < a.warmup:
            lr = a.lr * (step + 1) / a.warmup
        else:
            prog = min(1.0, (step - a.warmup) / max(1, ts - a.warmup))
            lr = a.lr * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * prog)))
        for g in opt.param_groups:
            g["lr"] = lr
        x = batch()
        loss = loss_of(x)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        step += 1
        tokens += x.shape[0] * a.seq
        tok_log += x.shape[0] * a.seq
        losses.append(loss.item() if step % a.log_every == 0 else None)
        if step % a.log_every == 0:
            if dev == "cuda":
                torch.cuda.synchronize()
            dt = time.time() - t_log
            log(f"step {step} loss {losses[-1]:.4f} lr {lr:.2e} tok/s {tok_log / dt:,.0f} "
                f"tokens {tokens:,} elapsed {time.time() - train_start:.0f}s")
            t_log, tok_log = time.time(), 0
            if not math.isfinite(losses[-1]):
                die("training loss is not finite")
        done_budget = (time.time() - train_start > budget or bool(total_steps and step >= total_steps)
                       or (a.max_steps and step >= a.max_steps))
        if step % a.eval_every == 0 or done_budget:
            v = val_loss()
            improved = v < best[0] - 1e-3
            if improved:
                best = (v, step, {k: t.detach().clone() for k, t in model.state_dict().items()})
                bad_evals = 0
            else:
                bad_evals += 1
            log(f"step {step} val_loss {v:.4f} best {best[0]:.4f}@{best[1]}"
                f"{'' if improved else f' (no improvement {bad_evals}/{a.patience})'}")
            if bad_evals >= a.patience:
                stop_reason = "validation loss stopped improving"
                break
        if done_budget:
            stop_reason = ("wall budget" if time.time() - train_start > budget else
                           "max steps" if a.max_steps and step >= a.max_steps else "schedule end")
            break
    train_wall = time.time() - train_start
    log(f"stopped at step {step} ({stop_reason}); restoring best val_loss {best[0]:.4f} from step {best[1]}")
    if best[2] is not None:
        model.load_state_dict(best[2])
    last_train = [l for l in losses if l is not None][-1:] or [float("nan")]

    # ---- save (bf16, sharded)
    model = model.to(torch.bfloat16).cpu()
    model.config.use_cache = True
    model.generation_config = GenerationConfig(bos_token_id=0, eos_token_id=[0, 2], do_sample=False)
    # The string form is what scripts/golden/make_golden.py uses with transformers 5.17 ("300KB").
    shard = f"{int(a.max_shard_mb * 1000)}KB"
    model.save_pretrained(a.out, max_shard_size=shard)
    check_and_fix_shards(a.out, a.max_shard_mb * 1e6)
    for f in sorted(os.listdir(a.out)):
        log(f"  {f}: {os.path.getsize(os.path.join(a.out, f)):,} bytes")
    weights = sum(os.path.getsize(os.path.join(a.out, f)) for f in os.listdir(a.out) if f.endswith(".safetensors"))
    log(f"weights: {weights:,} bytes{'' if weights <= 40e6 else ' -- OVER the 40 MB target'}")

    # ---- samples, from the saved files, fp32 on the CPU (what the C++ test reproduces)
    samples = make_samples(a.out, a.sample_tokens)

    files = {f: sha256_file(os.path.join(a.out, f)) for f in sorted(os.listdir(a.out))
             if f.endswith(".safetensors") or f.startswith("tokenizer")}
    prov = {
        "script": "scripts/gpu/train_reference.py",
        "script_sha256": sha256_file(os.path.abspath(__file__)),
        "args": vars(a),
        "data": {f: sha256_file(os.path.join(CORPUS, f)) for f in CORPUS_FILES},
        "corpus": cstats,
        "validation": "War and Peace characters val_char_range (2%, cut at line starts), never trained on",
        "seed": a.seed,
        "versions": {"python": platform.python_version(), "torch": torch.__version__,
                     "transformers": transformers.__version__, "numpy": np.__version__,
                     "tokenizers": __import__("tokenizers").__version__},
        "gpu": gpu, "cuda": torch.version.cuda,
        "parameters": n_params, "vocab": vocab,
        "train_tokens": int(len(train_ids)), "val_tokens": int(len(val_ids)),
        "steps": step, "tokens_seen": tokens, "stop_reason": stop_reason,
        "best_val_loss": best[0], "best_step": best[1], "initial_val_loss": v0,
        "last_train_loss": last_train[0], "train_wall_s": train_wall,
        "total_wall_s": time.time() - T0, "output_sha256": files,
        "smoke": a.smoke,
    }
    with open(os.path.join(a.out, "provenance.json"), "w", encoding="utf-8") as f:
        json.dump(prov, f, indent=2)
    write_readme(a.out, prov, cfg)
    log(f"done: val_loss {best[0]:.4f} (ppl {math.exp(best[0]):.2f}) after {step} steps, "
        f"{tokens:,} tokens, {train_wall:.0f}s training; {len(samples)} samples")
    LOG.close()


def check_and_fix_shards(out, limit):
    """Every *.safetensors must be <= limit bytes; re-shards by hand if save_pretrained did not."""
    from safetensors import safe_open
    from safetensors.torch import save_file
    names = sorted(f for f in os.listdir(out) if f.endswith(".safetensors"))
    if names and all(os.path.getsize(os.path.join(out, f)) <= limit for f in names):
        log(f"shards: {len(names)} files, all <= {limit:,.0f} bytes")
        return
    log(f"shards: save_pretrained wrote {[(f, os.path.getsize(os.path.join(out, f))) for f in names]}; re-sharding")
    tensors = {}
    for f in names:
        with safe_open(os.path.join(out, f), framework="pt") as sf:
            for k in sf.keys():
                tensors[k] = sf.get_tensor(k)
        os.remove(os.path.join(out, f))
    idx = os.path.join(out, "model.safetensors.index.json")
    if os.path.exists(idx):
        os.remove(idx)
    groups, cur, cur_b = [], [], 0
    for k in sorted(tensors):
        b = tensors[k].numel() * tensors[k].element_size()
        if cur and cur_b + b > limit - 1e5:
            groups.append(cur)
            cur, cur_b = [], 0
        cur.append(k)
        cur_b += b
    groups.append(cur)
    wmap, total = {}, 0
    for i, g in enumerate(groups):
        fn = f"model-{i + 1:05d}-of-{len(groups):05d}.safetensors"
        save_file({k: tensors[k].contiguous() for k in g}, os.path.join(out, fn), metadata={"format": "pt"})
        for k in g:
            wmap[k] = fn
            total += tensors[k].numel() * tensors[k].element_size()
    with open(idx, "w", encoding="utf-8") as f:
        json.dump({"metadata": {"total_size": total}, "weight_map": wmap}, f, indent=2)
    for f in sorted(os.listdir(out)):
        if f.endswith(".safetensors") and os.path.getsize(os.path.join(out, f)) > limit:
            die(f"shard {f} still over {limit} bytes (a single tensor too large?)")
    log(f"shards: re-sharded into {len(groups)} files")


def make_samples(out, n_new):
    import torch
    from tokenizers import Tokenizer
    from transformers import Qwen2ForCausalLM
    try:
        m = Qwen2ForCausalLM.from_pretrained(out, dtype=torch.float32, attn_implementation="eager")
    except TypeError:
        m = Qwen2ForCausalLM.from_pretrained(out, torch_dtype=torch.float32, attn_implementation="eager")
    m.eval()
    tok = Tokenizer.from_file(os.path.join(out, "tokenizer.json"))
    res = []
    with torch.no_grad():
        for p in SAMPLE_PROMPTS:
            ids = tok.encode(p, add_special_tokens=False).ids
            seq = list(ids)
            margins = []
            for _ in range(n_new):
                logits = m(input_ids=torch.tensor([seq])).logits[0, -1].float()
                top = torch.topk(logits, 2)
                margins.append(float(top.values[0] - top.values[1]))
                nxt = int(top.indices[0])
                seq.append(nxt)
                if nxt in (0, 2):
                    break
            gen_ids = seq[len(ids):]
            res.append({"prompt": p, "prompt_ids": ids, "output_ids": gen_ids,
                        "output_text": tok.decode(gen_ids, skip_special_tokens=False),
                        "margins": margins, "min_margin": min(margins) if margins else None})
    with open(os.path.join(out, "samples.json"), "w", encoding="utf-8") as f:
        json.dump({"what": "greedy decoding (argmax, stops after <|endoftext|>=0 or <|im_end|>=2), "
                           "fp32 CPU compute from the saved bf16 weights, eager attention, full "
                           "recompute each step; margins[i] = top1 - top2 logit at step i",
                   "samples": res}, f, indent=1, ensure_ascii=False)
    with open(os.path.join(out, "samples.txt"), "w", encoding="utf-8") as f:
        for i, r in enumerate(res):
            f.write(f"=== sample {i} (min top1-top2 margin {r['min_margin']:.4f})\n")
            f.write(f"prompt: {json.dumps(r['prompt'], ensure_ascii=False)}\n")
            f.write(f"prompt_ids: {' '.join(map(str, r['prompt_ids']))}\n")
            f.write(f"output_ids: {' '.join(map(str, r['output_ids']))}\n")
            f.write(f"output: {json.dumps(r['output_text'], ensure_ascii=False)}\n\n")
    for r in res:
        log(f"sample: {r['prompt'][-40:]!r} -> {r['output_text']!r}")
    return res


def write_readme(out, prov, cfg):
    txt = f"""# reference-qwen2-20m

frugal's reference model for quantization fidelity (issue 15): a Qwen2ForCausalLM trained from scratch
by `scripts/gpu/train_reference.py` on the corpus in `data/corpus/` (War and Peace minus a 2% validation
slice, MMLU dev + the test questions of the odd-position subjects, CMMLU dev, GSM8K test 1-1000; see
`data/corpus/README.md`). wikitext-2, the even-position MMLU subjects' test questions, CMMLU test and
GSM8K 1001-1319 are held out.

- {prov['parameters'] / 1e6:.2f}M parameters, {cfg.num_hidden_layers} layers, hidden {cfg.hidden_size},
  {cfg.num_attention_heads} heads / {cfg.num_key_value_heads} KV heads, head_dim {cfg.head_dim},
  ffn {cfg.intermediate_size}, vocab {cfg.vocab_size}, tied embeddings, rope_theta 10000, bf16 weights.
- Tokenizer: byte-level BPE trained with `tokenizers` (NFC, Qwen2's Split regex, ByteLevel without
  regex), specials `<|endoftext|>`=0 `<|im_start|>`=1 `<|im_end|>`=2, no BOS, ChatML chat template.
- Training: seq 1024, batch {prov['args']['batch']}, AdamW (0.9, 0.95, wd 0.1), peak lr {prov['args']['lr']},
  warmup + cosine, bf16 autocast, {prov['steps']} steps, {prov['tokens_seen']:,} tokens,
  {prov['train_wall_s']:.0f} s on {prov['gpu']}; stop: {prov['stop_reason']}.
- Validation loss {prov['best_val_loss']:.4f} (ppl {math.exp(prov['best_val_loss']):.2f}) at step
  {prov['best_step']} (initial {prov['initial_val_loss']:.3f}).

`train_log.txt` is the run's log, `provenance.json` its hashes and versions, `samples.txt`/`samples.json`
greedy continuations computed with PyTorch (fp32, CPU) from these files.
"""
    with open(os.path.join(out, "README.md"), "w", encoding="utf-8") as f:
        f.write(txt)


if __name__ == "__main__":
    main()
