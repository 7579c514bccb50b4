#!/usr/bin/env python3
"""Convert a llama2.c checkpoint (karpathy/llama2.c `run.c` format) into a HF LlamaForCausalLM
directory: config.json, model.safetensors (f32), generation_config.json.

Python standard library only (no numpy, no torch), so it runs anywhere.

llama2.c format: a header of 7 int32 {dim, hidden_dim, n_layers, n_heads, n_kv_heads, vocab_size
(negative => unshared classifier), seq_len}, then float32 arrays token_embedding [vocab, dim],
rms_att [L, dim], wq [L, dim, dim], wk [L, kv_dim, dim], wv [L, kv_dim, dim], wo [L, dim, dim],
rms_ffn [L, dim], w1 [L, hidden, dim], w2 [L, dim, hidden], w3 [L, hidden, dim], rms_final [dim],
freq_cis_real/imag [seq_len, head_size/2] (unused), and wcls [vocab, dim] when unshared.
Matrices are [out, in] row-major, the nn.Linear layout HF uses.

RoPE: llama2.c rotates interleaved pairs (2i, 2i+1) of each head while HF Llama rotates
(i, i + head_dim/2) ("rotate_half"). As transformers' convert_llama_weights_to_hf does, the rows
of wq and wk are permuted per head:
    w.view(n_heads, head_dim // 2, 2, dim).transpose(1, 2).reshape(n_heads * head_dim, dim)
i.e. new row h*hd + j*(hd/2) + i  <-  old row h*hd + 2*i + j.

Usage: convert_llama2c.py stories260K.bin OUT_DIR
"""
import array
import json
import os
import struct
import sys


def read_floats(f, n):
    a = array.array("f")
    a.frombytes(f.read(4 * n))
    if len(a) != n:
        raise SystemExit("checkpoint truncated: wanted %d floats, got %d" % (n, len(a)))
    if sys.byteorder != "little":
        a.byteswap()
    return a


def permute_rows(w, n_heads, head_dim, dim):
    """HF rotate_half order from llama2.c's interleaved order (see module docstring)."""
    out = array.array("f", bytes(4 * len(w)))
    half = head_dim // 2
    for h in range(n_heads):
        for i in range(half):
            for j in range(2):
                src = (h * head_dim + 2 * i + j) * dim
                dst = (h * head_dim + j * half + i) * dim
                out[dst:dst + dim] = w[src:src + dim]
    return out


def write_safetensors(path, tensors):
    """tensors: list of (name, shape, array('f')). Writes F32 safetensors."""
    header = {}
    offset = 0
    for name, shape, data in tensors:
        n = 1
        for d in shape:
            n *= d
        if n != len(data):
            raise SystemExit("%s: shape %s does not match %d values" % (name, shape, len(data)))
        header[name] = {"dtype": "F32", "shape": shape, "data_offsets": [offset, offset + 4 * n]}
        offset += 4 * n
    header["__metadata__"] = {"format": "pt", "source": "llama2.c checkpoint via scripts/convert_llama2c.py"}
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * ((8 - len(h) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)))
        f.write(h)
        for _, _, data in tensors:
            if sys.byteorder != "little":
                data = array.array("f", data)
                data.byteswap()
            f.write(data.tobytes())


def convert(src, out_dir):
    with open(src, "rb") as f:
        dim, hidden, n_layers, n_heads, n_kv_heads, vocab, seq_len = struct.unpack("<7i", f.read(28))
        shared = vocab > 0
        vocab = abs(vocab)
        head_dim = dim // n_heads
        kv_dim = n_kv_heads * head_dim
        emb = read_floats(f, vocab * dim)
        rms_att = read_floats(f, n_layers * dim)
        wq = read_floats(f, n_layers * dim * dim)
        wk = read_floats(f, n_layers * kv_dim * dim)
        wv = read_floats(f, n_layers * kv_dim * dim)
        wo = read_floats(f, n_layers * dim * dim)
        rms_ffn = read_floats(f, n_layers * dim)
        w1 = read_floats(f, n_layers * hidden * dim)
        w2 = read_floats(f, n_layers * dim * hidden)
        w3 = read_floats(f, n_layers * hidden * dim)
        rms_final = read_floats(f, dim)
        read_floats(f, seq_len * head_dim // 2)  # freq_cis_real: recomputed from rope_theta
        read_floats(f, seq_len * head_dim // 2)  # freq_cis_imag
        wcls = None if shared else read_floats(f, vocab * dim)
        if f.read(1):
            raise SystemExit("%s: unexpected bytes after the last tensor (wrong header?)" % src)

    def layer(a, l, n):
        return a[l * n:(l + 1) * n]

    tensors = [("model.embed_tokens.weight", [vocab, dim], emb)]
    for l in range(n_layers):
        p = "model.layers.%d." % l
        tensors += [
            (p + "input_layernorm.weight", [dim], layer(rms_att, l, dim)),
            (p + "self_attn.q_proj.weight", [dim, dim],
             permute_rows(layer(wq, l, dim * dim), n_heads, head_dim, dim)),
            (p + "self_attn.k_proj.weight", [kv_dim, dim],
             permute_rows(layer(wk, l, kv_dim * dim), n_kv_heads, head_dim, dim)),
            (p + "self_attn.v_proj.weight", [kv_dim, dim], layer(wv, l, kv_dim * dim)),
            (p + "self_attn.o_proj.weight", [dim, dim], layer(wo, l, dim * dim)),
            (p + "post_attention_layernorm.weight", [dim], layer(rms_ffn, l, dim)),
            (p + "mlp.gate_proj.weight", [hidden, dim], layer(w1, l, hidden * dim)),
            (p + "mlp.up_proj.weight", [hidden, dim], layer(w3, l, hidden * dim)),
            (p + "mlp.down_proj.weight", [dim, hidden], layer(w2, l, dim * hidden)),
        ]
    tensors.append(("model.norm.weight", [dim], rms_final))
    if wcls is not None:
        tensors.append(("lm_head.weight", [vocab, dim], wcls))

    os.makedirs(out_dir, exist_ok=True)
    write_safetensors(os.path.join(out_dir, "model.safetensors"), tensors)
    config = {
        "architectures": ["LlamaForCausalLM"],
        "model_type": "llama",
        "hidden_size": dim,
        "intermediate_size": hidden,
        "num_hidden_layers": n_layers,
        "num_attention_heads": n_heads,
        "num_key_value_heads": n_kv_heads,
        "head_dim": head_dim,
        "vocab_size": vocab,
        "max_position_embeddings": seq_len,
        "rms_norm_eps": 1e-5,
        "rope_theta": 10000.0,
        "rope_scaling": None,
        "hidden_act": "silu",
        "attention_bias": False,
        "mlp_bias": False,
        "tie_word_embeddings": shared,
        "bos_token_id": 1,
        "eos_token_id": 2,
        "torch_dtype": "float32",
    }
    with open(os.path.join(out_dir, "config.json"), "w") as f:
        json.dump(config, f, indent=2)
        f.write("\n")
    gen = {"bos_token_id": 1, "eos_token_id": 2, "do_sample": False}
    with open(os.path.join(out_dir, "generation_config.json"), "w") as f:
        json.dump(gen, f, indent=2)
        f.write("\n")


def main():
    if len(sys.argv) != 3:
        raise SystemExit(__doc__)
    convert(sys.argv[1], sys.argv[2])


if __name__ == "__main__":
    main()
