#!/usr/bin/env python3
"""The slab GEMM's host plan and work split (src/backend/cuda/quant_gemm_slab.cu), mirrored in
Python to look at without a GPU. `python3 slab_plan.py` prints the launch shapes of the 7B int4
matrices and then walks the kernel's cursors over many shapes, checking that every (slice, row,
token) output is stored once and every (group, quad) unit is computed once, from the codes loaded
for it. It mirrors the code; it is not a test of the kernel (CudaQuantGemm.* is). Register-limited
blocks an SM come from ptxas (sm_90a, int4): 2 at m <= 16, 1 above."""
import random

cd = lambda a, b: -(-a // b)
W = 8
SM_SMEM = 233472  # cudaDevAttrMaxSharedMemoryPerMultiprocessor, H100 / H200
BLOCK_SMEM = 200 * 1024
RESERVED = 1024


def shape(m, n, k, int4=True, need_x=True, reg_per_sm=2, sms=132):
    mt = 1 if m <= 8 else 2 if m <= 16 else 4 if m <= 32 else 8
    r = 1 if mt <= 2 else 2
    tok = 8 * mt
    gy = cd(m, tok)
    per_quad = tok * (128 if int4 else 64) * 2 + (tok * 4 if need_x else 0)
    n_quads = cd(cd(k, 32 if int4 else 16), 4)
    budget = min(BLOCK_SMEM, SM_SMEM // reg_per_sm - RESERVED)
    q_max = max(1, budget // per_quad)
    smin = cd(n_quads, q_max)

    def res(sp):
        smem = cd(n_quads, sp) * per_quad
        return max(1, min(reg_per_sm, SM_SMEM // (smem + RESERVED))) * sms

    groups = cd(n, 16 * r)
    bands_max = cd(groups, W)

    def plan(sp):
        qps = cd(n_quads, sp)
        splits = cd(n_quads, qps)
        R = res(splits)
        gx = min(max(R // (splits * gy), 1), bands_max)
        gpb = W * cd(groups, gx * W)
        gx = cd(groups, gpb)
        blocks = gx * splits * gy
        waves = cd(blocks, R)
        warps = min(R, blocks) * W
        partial = 8 * splits * m * n / (1024 * r * warps) if splits > 1 else 0
        cost = waves * (gpb // W * qps + 4) + partial
        return dict(mt=mt, r=r, splits=splits, qps=qps, gx=gx, gpb=gpb, blocks=blocks, cost=round(cost, 1),
                    smem_kb=round(qps * per_quad / 1024, 1), x_mb=round(blocks * qps * per_quad / 1e6, 1),
                    partials_mb=round(splits * m * n * 4 / 1e6, 1) if splits > 1 else 0)

    best = plan(smin)
    for sp in range(smin + 1, max(smin, n_quads // 4) + 1):
        p = plan(sp)
        if p["cost"] < best["cost"]:
            best = p
    return best


def walk(m, n, k, int4, mt, R, U, qps, gpb, gx, splits):
    """The kernel's batches and stores for one launch shape; asserts the invariants."""
    n_quads = cd(cd(k, 32 if int4 else 16), 4)
    gy, TOK, n_groups = cd(m, 8 * mt), 8 * mt, cd(n, 16 * R)
    done, seen = {}, {}
    for bz in range(splits):
        qb = bz * qps
        ks = min(qps, n_quads - qb)
        assert ks > 0
        for by in range(gy):
            m0 = by * TOK
            for bx in range(gx):
                for warp in range(W):
                    g_first, g_end = bx * gpb + warp, min(n_groups, (bx + 1) * gpb)
                    my = (g_end - g_first + W - 1) // W if g_first < g_end else 0
                    nb = my * cd(ks, U)
                    st = {"lg": g_first, "lq": 0, "loaded": 0}

                    def load_batch():
                        live, ln = st["loaded"] < nb, min(U, ks - st["lq"])
                        out = [(st["lg"], qb + st["lq"] + u) if live and u < ln else None for u in range(U)]
                        st["loaded"] += 1
                        st["lq"] += ln
                        if st["lq"] == ks:
                            st["lq"], st["lg"] = 0, st["lg"] + W
                        return out

                    cur, cg, cq = load_batch(), g_first, 0
                    for _ in range(nb):
                        nxt, ln = load_batch(), min(U, ks - cq)
                        for u in range(ln):
                            assert cur[u] == (cg, qb + cq + u)
                            key = (bz, by, cg, qb + cq + u)
                            seen[key] = seen.get(key, 0) + 1
                        cq += ln
                        if cq == ks:
                            for row in (cg * 16 * R + i for i in range(16 * R)):
                                for tok in range(m0, m0 + TOK):
                                    if row < n and tok < m:
                                        done[(bz, row, tok)] = done.get((bz, row, tok), 0) + 1
                            cq, cg = 0, cg + W
                        cur = nxt
    for bz in range(splits):
        for row in range(n):
            for tok in range(m):
                assert done.get((bz, row, tok), 0) == 1
        qb = bz * qps
        for by in range(gy):
            for g in range(n_groups):
                for qd in range(qb, qb + min(qps, n_quads - qb)):
                    assert seen.get((bz, by, g, qd), 0) == 1


if __name__ == "__main__":
    for name, n, k in [("qkv", 4608, 3584), ("o", 3584, 3584), ("gate", 18944, 3584), ("gate_up", 37888, 3584),
                       ("down", 3584, 18944)]:
        for m in (1, 8, 16, 32, 64):
            print(name, "m=%d" % m, shape(m, n, k, reg_per_sm=2 if m <= 16 else 1))
    random.seed(2)
    count = 0
    for n, k in [(300, 1416), (2050, 4352), (37, 256), (1000, 3584)]:
        for m in (1, 5, 9, 16, 33, 64):
            for int4 in (True, False):
                mt = 1 if m <= 8 else 2 if m <= 16 else 4 if m <= 32 else 8
                for U, R in ([(2, 1), (4, 1)] if mt <= 2 else [(1, 2), (2, 1)]):
                    nq = cd(cd(k, 32 if int4 else 16), 4)
                    for qps in {1, 2, 3, 5, nq, random.randint(1, nq)}:
                        groups = cd(n, 16 * R)
                        bands = max(1, min(cd(groups, W), random.choice([1, 3, 50, 264])))
                        gpb = W * cd(groups, bands * W)
                        walk(m, n, k, int4, mt, R, U, qps, gpb, cd(groups, gpb), cd(nq, qps))
                        count += 1
    print("work split checked on", count, "launch shapes")
