#!/usr/bin/env python3
"""Copies the reference model's training corpus and the eval-oracle questions into the repo.

Run once on the dev machine (stdlib only), from the repository root:
    python3 scripts/eval/make_corpus.py [--shared ../shared/data]
Writes
  data/corpus/war-and-peace.txt.xz      War and Peace, byte for byte
  data/corpus/mmlu.tar.xz               MMLU dev/*.csv (all 57 subjects) + test/*.csv of the
                                        odd-position subjects (sorted, 0-based index 1, 3, 5, ...)
  data/corpus/cmmlu-dev.tar.xz          CMMLU dev/*.csv (all 67 subjects)
  data/corpus/gsm8k-test-first1000.jsonl.xz   GSM8K test problems 1..1000 (1001..1319 held out)
  tests/data/eval/oracle-mmlu/{dev,test}/<subject>_{dev,test}.csv   4 held-out subjects, dev 5 + test 5
  tests/data/eval/oracle-cmmlu/{dev,test}/<subject>.csv             4 subjects, dev 5 + test 5
Files are copied, never edited: the CSV rows are the original bytes (tar members keep names).
"""
import argparse
import io
import lzma
import os
import tarfile

MMLU_ORACLE = ["abstract_algebra", "conceptual_physics", "management", "world_religions"]
CMMLU_ORACLE = ["anatomy", "arts", "traditional_chinese_medicine", "world_religions"]
N_ORACLE_TEST = 5


def xz_bytes(data):
    return lzma.compress(data, preset=9 | lzma.PRESET_EXTREME)


def add(tar, name, data):
    info = tarfile.TarInfo(name)
    info.size = len(data)
    info.mtime = 0
    tar.addfile(info, io.BytesIO(data))


def read(path):
    with open(path, "rb") as f:
        return f.read()


def head_lines_csv(data, n_rows, header):
    """First n_rows CSV records (RFC 4180: quoted fields may hold newlines) as original bytes."""
    out, rows, in_quote, start = [], 0, False, 0
    need = n_rows + (1 if header else 0)
    i = 0
    while i < len(data) and rows < need:
        c = data[i:i + 1]
        if c == b'"':
            in_quote = not in_quote
        elif c == b"\n" and not in_quote:
            rows += 1
            if rows == need:
                return data[:i + 1]
        i += 1
    if rows < need - 1:
        raise SystemExit(f"only {rows} records, wanted {need}")
    return data


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--shared", default="../shared/data")
    a = ap.parse_args()
    S = a.shared
    os.makedirs("data/corpus", exist_ok=True)
    with open("data/corpus/war-and-peace.txt.xz", "wb") as f:
        f.write(xz_bytes(read(f"{S}/text/war-and-peace.txt")))

    subjects = sorted(n[:-len("_test.csv")] for n in os.listdir(f"{S}/eval/mmlu/test"))
    assert len(subjects) == 57, subjects
    train_subjects = subjects[1::2]
    held_out = subjects[0::2]
    for s in MMLU_ORACLE:
        assert s in held_out, s
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.USTAR_FORMAT) as tar:
        for s in subjects:
            add(tar, f"dev/{s}_dev.csv", read(f"{S}/eval/mmlu/dev/{s}_dev.csv"))
        for s in train_subjects:
            add(tar, f"test/{s}_test.csv", read(f"{S}/eval/mmlu/test/{s}_test.csv"))
    with open("data/corpus/mmlu.tar.xz", "wb") as f:
        f.write(xz_bytes(buf.getvalue()))

    cm = sorted(os.listdir(f"{S}/eval/cmmlu/dev"))
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.USTAR_FORMAT) as tar:
        for n in cm:
            add(tar, f"dev/{n}", read(f"{S}/eval/cmmlu/dev/{n}"))
    with open("data/corpus/cmmlu-dev.tar.xz", "wb") as f:
        f.write(xz_bytes(buf.getvalue()))

    lines = read(f"{S}/eval/gsm8k/test.jsonl").splitlines(keepends=True)
    assert len(lines) == 1319, len(lines)
    with open("data/corpus/gsm8k-test-first1000.jsonl.xz", "wb") as f:
        f.write(xz_bytes(b"".join(lines[:1000])))

    for s in MMLU_ORACLE:
        for part, n in (("dev", None), ("test", N_ORACLE_TEST)):
            d = f"tests/data/eval/oracle-mmlu/{part}"
            os.makedirs(d, exist_ok=True)
            data = read(f"{S}/eval/mmlu/{part}/{s}_{part}.csv")
            if n is not None:
                data = head_lines_csv(data, n, header=False)
            with open(f"{d}/{s}_{part}.csv", "wb") as f:
                f.write(data)
    for s in CMMLU_ORACLE:
        for part, n in (("dev", None), ("test", N_ORACLE_TEST)):
            d = f"tests/data/eval/oracle-cmmlu/{part}"
            os.makedirs(d, exist_ok=True)
            data = read(f"{S}/eval/cmmlu/{part}/{s}.csv")
            if n is not None:
                data = head_lines_csv(data, n, header=True)
            with open(f"{d}/{s}.csv", "wb") as f:
                f.write(data)
    print("held-out MMLU subjects (test not in the corpus):", " ".join(held_out))


if __name__ == "__main__":
    main()
