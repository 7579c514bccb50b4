#!/usr/bin/env python3
"""PyTorch oracles for `frugal eval` (issue 15): perplexity and multiple-choice log-likelihoods.

Runs on the GPU machine (torch 2.11, transformers 5.x, tokenizers); the compute is fp32 on the CPU
(weights upcast from their stored dtype, eager attention, log-softmax in float64), like
scripts/golden/make_golden.py. Everything it reads is in the repository.

    python3 scripts/gpu/eval_oracles.py --model models/reference-qwen2-20m --out DIR [--smoke]

Writes (formats: tests/data/eval_oracle/README.md)
  DIR/ppl.json   per-token log-probs + PPL, llama.cpp protocol, for the reference model on
                 tests/data/eval_oracle/wikitext-2-test-head.txt (ctx 512), stories260K on
                 tests/data/eval_oracle/story.txt (ctx 256), and every tests/data/golden/* model on
                 fixed pseudo-random token ids stored in the file (ctx 64)
  DIR/mc.json    per-choice log-likelihoods of the 20 MMLU and 20 CMMLU questions in
                 tests/data/eval/oracle-{mmlu,cmmlu}/ (5-shot, the prompt format of docs/eval.md)
  DIR/oracle_log.txt
--smoke: one chunk / one question per kind, one golden model: every code path in seconds.
"""
import argparse
import csv
import io
import json
import math
import os
import platform
import sys
import time

T0 = time.time()
REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
ORACLE_DATA = os.path.join(REPO, "tests", "data", "eval_oracle")
EVAL_DATA = os.path.join(REPO, "tests", "data", "eval")
MC_HEADER = "The following are multiple choice questions (with answers) about {}.\n\n"
TOPK = 10
LOG = None


def log(msg):
    line = f"[{time.time() - T0:7.1f}s] {msg}"
    print(line, flush=True)
    if LOG is not None:
        LOG.write(line + "\n")
        LOG.flush()


def die(msg):
    log("ERROR: " + msg)
    sys.exit(1)


def rel(path):
    return os.path.relpath(os.path.abspath(path), REPO)


# ----------------------------------------------------------------------------------------------
class Tok:
    """tokenizer.json through the `tokenizers` library (the reference frugal's tokenizer matches),
    with BOS added as frugal does: add_bos_token from tokenizer_config.json."""

    def __init__(self, model_dir):
        from tokenizers import Tokenizer
        self.t = Tokenizer.from_file(os.path.join(model_dir, "tokenizer.json"))
        cfg_path = os.path.join(model_dir, "tokenizer_config.json")
        cfg = json.load(open(cfg_path, encoding="utf-8")) if os.path.exists(cfg_path) else {}
        self.add_bos = bool(cfg.get("add_bos_token", False))
        bos = cfg.get("bos_token")
        if isinstance(bos, dict):
            bos = bos.get("content")
        self.bos_id = self.t.token_to_id(bos) if bos else None
        if self.add_bos and self.bos_id is None:
            die(f"{cfg_path}: add_bos_token is true but bos_token {bos!r} is not in the vocabulary")

    def encode(self, text, bos):
        ids = self.t.encode(text, add_special_tokens=False).ids
        return ([self.bos_id] + ids) if (bos and self.add_bos) else ids


def load_model(model_dir):
    import torch
    import transformers
    arch = json.load(open(os.path.join(model_dir, "config.json"), encoding="utf-8"))["architectures"][0]
    cls = getattr(transformers, arch)
    try:
        m = cls.from_pretrained(model_dir, dtype=torch.float32, attn_implementation="eager")
    except TypeError:
        m = cls.from_pretrained(model_dir, torch_dtype=torch.float32, attn_implementation="eager")
    m.eval()
    for p in m.parameters():
        if p.dtype != torch.float32:
            die(f"{model_dir}: parameter dtype {p.dtype} after loading in float32")
    return m, arch


def forward_logprobs(model, ids):
    """log-softmax (float64) of the fp32 logits of one sequence: [len(ids), vocab]."""
    import torch
    with torch.no_grad():
        logits = model(input_ids=torch.tensor([ids], dtype=torch.long)).logits[0]
    if logits.dtype != torch.float32:
        die(f"logits dtype {logits.dtype}, expected float32")
    return torch.log_softmax(logits.double(), dim=-1)


# ----------------------------------------------------------------------------------------------
def ppl_entry(name, model_dir, tokens, ctx, bos_id, max_chunks, text_file=None, extra=None, stored_dir=None):
    """llama.cpp perplexity: n_chunks = len(tokens) // ctx non-overlapping chunks; chunk k is
    tokens[k*ctx:(k+1)*ctx] with its first token replaced by BOS when the tokenizer adds BOS
    (llama.cpp perplexity.cpp does this); logits at j predict token j+1 for j in [ctx/2, ctx-1)."""
    import torch
    model, arch = load_model(model_dir)
    n_chunks = len(tokens) // ctx
    if n_chunks < 1:
        die(f"{name}: {len(tokens)} tokens is shorter than one chunk of {ctx}")
    n_chunks = min(n_chunks, max_chunks)
    first = ctx // 2
    chunks, logprobs, top_ids, top_lp, nll = [], [], [], [], []
    t = time.time()
    for k in range(n_chunks):
        chunk = list(tokens[k * ctx:(k + 1) * ctx])
        if bos_id is not None:
            chunk[0] = bos_id
        lp = forward_logprobs(model, chunk)
        lps, ti, tl = [], [], []
        for j in range(first, ctx - 1):
            v = float(lp[j, chunk[j + 1]])
            lps.append(v)
            nll.append(-v)
            tv, tix = torch.topk(lp[j], TOPK)
            ti.append([int(x) for x in tix])
            tl.append([float(x) for x in tv])
        chunks.append(chunk)
        logprobs.append(lps)
        top_ids.append(ti)
        top_lp.append(tl)
    n = len(nll)
    mean = sum(nll) / n
    var = sum((x - mean) ** 2 for x in nll) / (n - 1) if n > 1 else 0.0
    se = math.sqrt(var / n)
    e = {
        "name": name, "model_dir": stored_dir or rel(model_dir), "architecture": arch,
        "text_file": rel(text_file) if text_file else None,
        "ctx": ctx, "add_bos": bos_id is not None, "bos_id": bos_id,
        "n_tokens": len(tokens), "tokens": [int(x) for x in tokens],
        "n_chunks": n_chunks, "first_scored": first, "scored_per_chunk": ctx - 1 - first,
        "chunks": chunks, "logprobs": logprobs, "top_k": TOPK, "top_ids": top_ids, "top_logprobs": top_lp,
        "n_scored": n, "mean_nll": mean, "nll_stderr": se, "ppl": math.exp(mean),
        "ppl_stderr": math.exp(mean) * se,
    }
    if extra:
        e.update(extra)
    log(f"ppl {name}: {len(tokens)} tokens, {n_chunks} chunks of {ctx}, {n} scored, mean NLL {mean:.6f} "
        f"± {se:.6f}, PPL {math.exp(mean):.4f} ({time.time() - t:.1f}s)")
    return e


def golden_tokens(model_dir, n, seed):
    import torch
    vocab = json.load(open(os.path.join(model_dir, "config.json"), encoding="utf-8"))["vocab_size"]
    g = torch.Generator().manual_seed(seed)
    return [int(x) for x in torch.randint(3, vocab, (n,), generator=g)]


# ----------------------------------------------------------------------------------------------
def mc_block(q, a, b, c, d):
    return f"{q}\nA. {a}\nB. {b}\nC. {c}\nD. {d}\nAnswer:"


def read_csv(path, header):
    with open(path, newline="", encoding="utf-8") as f:
        rows = list(csv.reader(f))
    if header:
        if not rows or rows[0] != ["", "Question", "A", "B", "C", "D", "Answer"]:
            die(f"{path}: unexpected CMMLU header {rows[:1]}")
        rows = [r[1:] for r in rows[1:]]
    for i, r in enumerate(rows):
        if len(r) != 6 or r[5] not in ("A", "B", "C", "D"):
            die(f"{path}: record {i + 1}: expected question,A,B,C,D,answer in A-D, got {r!r:.200}")
    return rows


def mc_questions(fmt, limit_subjects, per_subject):
    base = os.path.join(EVAL_DATA, f"oracle-{fmt}")
    out = []
    subjects = sorted(f[:-len("_test.csv")] if fmt == "mmlu" else f[:-4]
                      for f in os.listdir(os.path.join(base, "test")))
    for s in subjects[:limit_subjects]:
        if fmt == "mmlu":
            dev_f, test_f = f"dev/{s}_dev.csv", f"test/{s}_test.csv"
        else:
            dev_f, test_f = f"dev/{s}.csv", f"test/{s}.csv"
        dev = read_csv(os.path.join(base, dev_f), fmt == "cmmlu")
        test = read_csv(os.path.join(base, test_f), fmt == "cmmlu")
        if len(dev) < 5:
            die(f"{base}/{dev_f}: {len(dev)} dev questions, 5 needed for 5-shot")
        shots = "".join(mc_block(*r[:5]) + f" {r[5]}\n\n" for r in dev[:5])
        header = MC_HEADER.format(s.replace("_", " "))
        for i, r in enumerate(test[:per_subject]):
            out.append(dict(format=fmt, subject=s, data_dir=rel(base), dev_file=dev_f, test_file=test_f,
                            row=i, answer=r[5], context=header + shots + mc_block(*r[:5])))
    return out


def mc_oracle(model_dir, tok, questions):
    model, arch = load_model(model_dir)
    n_pos = json.load(open(os.path.join(model_dir, "config.json"), encoding="utf-8"))["max_position_embeddings"]
    res = []
    t = time.time()
    for q in questions:
        ctx_ids = tok.encode(q["context"], bos=True)
        choices = {}
        for letter in "ABCD":
            cont = tok.encode(" " + letter, bos=False)
            if not cont:
                die(f"continuation ' {letter}' tokenizes to nothing")
            full = ctx_ids + cont
            if len(full) > n_pos:
                die(f"{q['data_dir']}/{q['test_file']} row {q['row']}: {len(full)} tokens > {n_pos}")
            lp = forward_logprobs(model, full)
            lps = [float(lp[len(ctx_ids) - 1 + i, c]) for i, c in enumerate(cont)]
            choices[letter] = {"ids": cont, "logprobs": lps, "loglik": sum(lps)}
        pred = max("ABCD", key=lambda L: choices[L]["loglik"])
        q = dict(q, context_ids=ctx_ids, n_context_tokens=len(ctx_ids), choices=choices, predicted=pred)
        res.append(q)
        log(f"mc {q['format']}/{q['subject']} #{q['row']}: {len(ctx_ids)} ctx tokens, "
            + " ".join(f"{L} {choices[L]['loglik']:.4f}" for L in "ABCD") + f" -> {pred} (answer {q['answer']})")
    log(f"mc: {len(res)} questions in {time.time() - t:.1f}s, "
        f"{sum(q['predicted'] == q['answer'] for q in res)} correct")
    return res


def hf_tokenizer_check(model_dir, tok, texts):
    """Informational: does transformers' AutoTokenizer agree with tokenizers on these texts?"""
    try:
        from transformers import AutoTokenizer
        hf = AutoTokenizer.from_pretrained(model_dir)
        bad = 0
        for s in texts:
            a = hf(s, add_special_tokens=tok.add_bos)["input_ids"]
            b = tok.encode(s, bos=True)
            bad += a != b
        log(f"AutoTokenizer({rel(model_dir)}) agrees with tokenizers on {len(texts) - bad}/{len(texts)} texts"
            f" ({type(hf).__name__})")
    except Exception as ex:  # noqa: BLE001 - informational only
        log(f"AutoTokenizer check skipped: {type(ex).__name__}: {ex}")


# ----------------------------------------------------------------------------------------------
def main():
    global LOG
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", required=True, help="the reference model directory (HF)")
    ap.add_argument("--out", required=True)
    ap.add_argument("--model-name", default="models/reference-qwen2-20m",
                    help="the reference model's directory in the repo, as written into the fixtures")
    ap.add_argument("--smoke", action="store_true")
    ap.add_argument("--threads", type=int, default=0)
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    LOG = open(os.path.join(a.out, "oracle_log.txt"), "w", encoding="utf-8")
    log(f"eval_oracles.py {' '.join(sys.argv[1:])}")
    import torch
    import transformers
    torch.set_num_threads(a.threads or os.cpu_count() or 1)
    torch.manual_seed(0)
    log(f"python {platform.python_version()} torch {torch.__version__} transformers {transformers.__version__}"
        f" threads {torch.get_num_threads()}")
    meta = {"torch": torch.__version__, "transformers": transformers.__version__,
            "tokenizers": __import__("tokenizers").__version__, "compute": "fp32 CPU, eager attention, "
            "log_softmax in float64", "script": "scripts/gpu/eval_oracles.py", "smoke": a.smoke}
    max_chunks = 1 if a.smoke else 10 ** 9

    # ---- perplexity
    entries = []
    ref_tok = Tok(a.model)
    wiki = os.path.join(ORACLE_DATA, "wikitext-2-test-head.txt")
    text = open(wiki, encoding="utf-8", newline="").read()
    ref_ctx = 512 if not a.smoke else 128
    entries.append(ppl_entry("reference", a.model, ref_tok.encode(text, bos=True), ref_ctx,
                             ref_tok.bos_id if ref_tok.add_bos else None, max_chunks, wiki,
                             stored_dir=a.model_name))
    st_dir = os.path.join(REPO, "models", "stories260K")
    st_tok = Tok(st_dir)
    story = os.path.join(ORACLE_DATA, "story.txt")
    entries.append(ppl_entry("stories260K", st_dir, st_tok.encode(open(story, encoding="utf-8", newline="").read(), bos=True),
                             256, st_tok.bos_id if st_tok.add_bos else None, max_chunks, story))
    gold_root = os.path.join(REPO, "tests", "data", "golden")
    golds = sorted(d for d in os.listdir(gold_root) if os.path.isfile(os.path.join(gold_root, d, "config.json")))
    if a.smoke:
        golds = golds[:1]
    for i, g in enumerate(golds):
        d = os.path.join(gold_root, g)
        ctx = 64
        toks = golden_tokens(d, 4 * ctx, seed=1000 + i)
        entries.append(ppl_entry(f"golden/{g}", d, toks, ctx, None, max_chunks,
                                 extra={"tokens_from": f"torch.randint(3, vocab, ({4 * ctx},), "
                                                       f"Generator.manual_seed({1000 + i}))"}))
    with open(os.path.join(a.out, "ppl.json"), "w", encoding="utf-8") as f:
        json.dump({"format": "frugal-eval-oracle-ppl", "version": 1, "meta": meta, "entries": entries}, f)

    # ---- multiple choice
    per, subj = (1, 1) if a.smoke else (5, 4)
    qs = mc_questions("mmlu", subj, per) + mc_questions("cmmlu", subj, per)
    hf_tokenizer_check(a.model, ref_tok, [q["context"] for q in qs[:4]] + [text[:2000], " A", " B"])
    res = mc_oracle(a.model, ref_tok, qs)
    with open(os.path.join(a.out, "mc.json"), "w", encoding="utf-8") as f:
        json.dump({"format": "frugal-eval-oracle-mc", "version": 1, "meta": meta, "model_dir": a.model_name,
                   "shots": 5, "questions": res}, f, ensure_ascii=False)
    for fn in ("ppl.json", "mc.json"):
        sz = os.path.getsize(os.path.join(a.out, fn))
        log(f"wrote {fn}: {sz:,} bytes")
        if sz > 15 * 1024 * 1024:
            die(f"{fn} is over 15 MiB")
    log("done")
    LOG.close()


if __name__ == "__main__":
    main()
