#!/usr/bin/env python3
"""Convert a llama2.c tokenizer.bin (e.g. stories260K's tok512.bin) to HF tokenizer.json +
tokenizer_config.json: a Llama-2 style SentencePiece BPE with byte fallback.

llama2.c format: int32 max_token_length, then per token: float32 score, int32 byte length, bytes.
Its exporter wrote '▁' as ' ' and BOS/EOS as '\\n<s>\\n' / '\\n</s>\\n'; we undo both.
Merges are derived from vocab + scores the way transformers' SentencePieceExtractor does: every
split of a piece into two vocab pieces is a merge, ranked by the piece's score (highest first).

Usage: convert_llama2c_tokenizer.py TOKENIZER_BIN OUT_DIR [--model-max-length N]
Python 3 standard library only.
"""
import argparse
import json
import os
import struct
import sys

SPACE = "\u2581"


def read_llama2c(path):
    with open(path, "rb") as f:
        data = f.read()
    if len(data) < 4:
        raise ValueError(f"{path}: too short for a llama2.c tokenizer")
    off = 4
    pieces, scores = [], []
    while off < len(data):
        if off + 8 > len(data):
            raise ValueError(f"{path}: truncated token header at byte {off}")
        score, n = struct.unpack_from("<fi", data, off)
        off += 8
        if n < 0 or off + n > len(data):
            raise ValueError(f"{path}: token {len(pieces)} has bad length {n} at byte {off}")
        pieces.append(data[off:off + n].decode("utf-8"))
        scores.append(score)
        off += n
    return pieces, scores


def restore_pieces(pieces):
    out = []
    for i, p in enumerate(pieces):
        if p.strip("\n") in ("<s>", "</s>") and p != p.strip("\n"):
            p = p.strip("\n")
        out.append(p.replace(" ", SPACE))
    if len(out) < 259 or out[0] != "<unk>" or out[1] != "<s>" or out[2] != "</s>":
        raise ValueError("expected ids 0,1,2 = <unk>, <s>, </s>")
    for b in range(256):
        if out[3 + b] != f"<0x{b:02X}>":
            raise ValueError(f"expected id {3 + b} = <0x{b:02X}>, got {out[3 + b]!r}")
    return out


def sentencepiece_merges(pieces, scores):
    vocab = {p: i for i, p in enumerate(pieces)}
    merges = []
    for piece, score in zip(pieces, scores):  # vocab order, as dict(vocab_scores) iterates
        local = []
        for k in range(1, len(piece)):
            left, right = piece[:k], piece[k:]
            if left in vocab and right in vocab:
                local.append((left, right, score))
        local.sort(key=lambda m: (vocab[m[0]], vocab[m[1]]))
        merges.extend(local)
    merges.sort(key=lambda m: m[2], reverse=True)  # stable: ties keep vocab order
    return [f"{left} {right}" for left, right, _ in merges]


def build(pieces, scores):
    vocab = {}
    for i, p in enumerate(pieces):
        if p in vocab:
            raise ValueError(f"duplicate piece {p!r} at ids {vocab[p]} and {i}")
        vocab[p] = i
    special = lambda i, c: {"id": i, "content": c, "single_word": False, "lstrip": False, "rstrip": False,
                            "normalized": False, "special": True}
    bos_template = {"SpecialToken": {"id": "<s>", "type_id": 0}}
    return {
        "version": "1.0",
        "truncation": None,
        "padding": None,
        "added_tokens": [special(0, "<unk>"), special(1, "<s>"), special(2, "</s>")],
        "normalizer": {"type": "Sequence", "normalizers": [
            {"type": "Prepend", "prepend": SPACE},
            {"type": "Replace", "pattern": {"String": " "}, "content": SPACE}]},
        "pre_tokenizer": None,
        "post_processor": {
            "type": "TemplateProcessing",
            "single": [bos_template, {"Sequence": {"id": "A", "type_id": 0}}],
            "pair": [bos_template, {"Sequence": {"id": "A", "type_id": 0}},
                     {"SpecialToken": {"id": "<s>", "type_id": 1}}, {"Sequence": {"id": "B", "type_id": 1}}],
            "special_tokens": {"<s>": {"id": "<s>", "ids": [1], "tokens": ["<s>"]}}},
        "decoder": {"type": "Sequence", "decoders": [
            {"type": "Replace", "pattern": {"String": SPACE}, "content": " "},
            {"type": "ByteFallback"}, {"type": "Fuse"},
            {"type": "Strip", "content": " ", "start": 1, "stop": 0}]},
        "model": {"type": "BPE", "dropout": None, "unk_token": "<unk>", "continuing_subword_prefix": None,
                  "end_of_word_suffix": None, "fuse_unk": True, "byte_fallback": True, "ignore_merges": False,
                  "vocab": vocab, "merges": sentencepiece_merges(pieces, scores)},
    }


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("tokenizer_bin")
    ap.add_argument("out_dir")
    ap.add_argument("--model-max-length", type=int, default=512)
    args = ap.parse_args()
    try:
        pieces, scores = read_llama2c(args.tokenizer_bin)
        pieces = restore_pieces(pieces)
        tokenizer = build(pieces, scores)
    except (ValueError, UnicodeDecodeError) as e:
        print(f"convert_llama2c_tokenizer: {e}", file=sys.stderr)
        return 1
    config = {
        "add_bos_token": True, "add_eos_token": False, "bos_token": "<s>", "eos_token": "</s>",
        "unk_token": "<unk>", "pad_token": None, "clean_up_tokenization_spaces": False, "legacy": True,
        "model_max_length": args.model_max_length, "tokenizer_class": "LlamaTokenizer",
        "_provenance": "converted from llama2.c " + os.path.basename(args.tokenizer_bin) +
                       " by scripts/convert_llama2c_tokenizer.py",
    }
    os.makedirs(args.out_dir, exist_ok=True)
    with open(os.path.join(args.out_dir, "tokenizer.json"), "w", encoding="utf-8") as f:
        json.dump(tokenizer, f, ensure_ascii=False, indent=1)
        f.write("\n")
    with open(os.path.join(args.out_dir, "tokenizer_config.json"), "w", encoding="utf-8") as f:
        json.dump(config, f, ensure_ascii=False, indent=1)
        f.write("\n")
    print(f"wrote {len(pieces)} tokens, {len(tokenizer['model']['merges'])} merges to {args.out_dir}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
