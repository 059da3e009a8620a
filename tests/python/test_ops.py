"""Every CPU op against an independent float64 numpy reference written from ops.h.

Tolerances are derived per op from where the op rounds (stated in each test):
  u = 2^-24 is the fp32 unit roundoff; ulp(v) is the bf16 spacing at |v| (2^(e-7)).
  An fp32 sum of n terms is off by at most n·u·Σ|terms| (a loose bound for our fixed 8-lane
  order). A bf16 store adds up to half an ulp; a value that lands within the fp32 error of a bf16
  rounding boundary may round the other way, hence "1 ulp" rather than half.
Ops whose semantics are exact (Cast, Copy, GatherRows, ScatterRows, Add, AddRows, bf16 RoPE,
PosEmbedInterp, Argmax) are compared bit for bit against ml_dtypes rounding.
Inputs are seeded per test case, reproducibly; FERRY_TEST_SEED overrides the seed (see seeded()).
"""
import math
import os
import zlib

import ml_dtypes
import numpy as np
import pytest

BF16 = ml_dtypes.bfloat16
U = 2.0**-24


def seeded(request):
    """A seed per test case, printed on failure through the test id and the message.

    By default the seed is fixed per test case (a CRC-32 of its node id, parameters included), so
    every run, CI included, draws the same inputs. FERRY_TEST_SEED overrides it: an integer is used
    for every test case (to reproduce a failure, pass the seed its message printed, with -k for the
    test id), and "random" draws a fresh seed per test case as an exploratory run.
    """
    env = os.environ.get("FERRY_TEST_SEED", "").strip()
    if not env:
        seed = zlib.crc32(request.node.nodeid.encode())
    elif env == "random":
        seed = np.random.SeedSequence().entropy % (2**32)
    else:
        try:
            seed = int(env, 0) % (2**32)
        except ValueError:
            pytest.fail(f"FERRY_TEST_SEED={env!r}: want an integer or 'random'", pytrace=False)
    request.node.user_properties.append(("seed", seed))
    return np.random.default_rng(seed), seed


def rand_bf16(rng, shape, scale=1.0):
    return (rng.standard_normal(shape) * scale).astype(np.float32).astype(BF16)


def f64(a):
    return np.asarray(a).astype(np.float64)


def to_bf16(a):
    """float64 -> bf16 with one rounding (via float32 is two roundings; avoid it)."""
    a = np.asarray(a, dtype=np.float64)
    # Round to nearest even at bf16 precision directly from float64.
    m, e = np.frexp(a)  # a = m·2^e, 0.5 <= |m| < 1
    scaled = np.ldexp(m, 8)  # 8 significant bits
    r = np.ldexp(np.round(scaled), e - 8)  # np.round is half-to-even
    r = np.where(np.isfinite(a), r, a)
    return r


def ulp(v):
    """bf16 spacing at |v| (for |v| >= the smallest normal)."""
    v = np.maximum(np.abs(np.asarray(v, dtype=np.float64)), 2.0**-126)
    return np.ldexp(1.0, np.floor(np.log2(v)).astype(np.int64) - 7)


def silu(u):
    return u / (1.0 + np.exp(-u))


def gelu_tanh(u):
    return 0.5 * u * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (u + 0.044715 * u**3)))


def gelu_erf(u):
    return 0.5 * u * (1.0 + np.vectorize(math.erf)(u / math.sqrt(2.0)))


ACTS = {"none": lambda u: u, "silu": silu, "gelu_tanh": gelu_tanh, "gelu_erf": gelu_erf}

F32 = np.float32


def act_f32(name, t):
    """The activation evaluated as ops.h documents it, in fp32 (for the bit-exactness checks):
    the formula in fp32 arithmetic, with exp/tanh/erf correctly rounded to fp32. For very negative
    inputs 1 + erf(·) and 1 + tanh(·) cancel, so the fp32 result is far from the exact one; the
    op's result must follow the fp32 formula, as PyTorch's does."""
    t = np.asarray(t, dtype=F32)
    if name == "none":
        return t
    if name == "silu":
        return t / (F32(1) + np.exp(-t.astype(np.float64)).astype(F32))
    if name == "gelu_tanh":
        inner = F32(0.7978845608028654) * (t + F32(0.044715) * t * t * t)
        th = np.tanh(inner.astype(np.float64)).astype(F32)
        return F32(0.5) * t * (F32(1) + th)
    erf = np.vectorize(math.erf)((t * F32(0.7071067811865476)).astype(np.float64)).astype(F32)
    return F32(0.5) * t * (F32(1) + erf)


def act_abs_err(name, t):
    """A bound on |fp32 act(t) − exact act(t)|: 4u relative, plus for the GELUs the cancellation in
    1 + erf/tanh: an error of 2u in erf/tanh (values < 1) becomes 0.5·|t|·2u absolute."""
    t = np.abs(np.asarray(t, dtype=np.float64))
    err = 4 * U * t * 1.13
    if name in ("gelu_tanh", "gelu_erf"):
        err = err + t * 2 * U
    return err


def assert_within(got, ref, tol, what, seed):
    got = f64(got)
    err = np.abs(got - ref)
    bad = ~(err <= tol)
    if bad.any():
        i = np.unravel_index(np.argmax(np.where(bad, err - tol, -np.inf)), err.shape)
        pytest.fail(
            f"{what} (seed {seed}): {bad.sum()} of {bad.size} elements out of tolerance; "
            f"worst at {i}: got {got[i]!r}, reference {ref[i]!r}, tolerance {np.broadcast_to(tol, err.shape)[i]!r}"
        )


def assert_mostly_exact(got, ref_rounded, what, seed):
    """Where the reference follows the op's bf16 rounding points, fp32-vs-float64 differences flip
    a rounding only when a value lies within ~1e-6 relative of a bf16 boundary: rare. Require all
    but 3% (+1) of the elements to match exactly, which catches a missing or extra rounding."""
    g = f64(got)
    mismatches = int((g != ref_rounded).sum())
    limit = 0.03 * g.size + 1
    assert mismatches <= limit, f"{what} (seed {seed}): {mismatches} of {g.size} not bit-exact"


def assert_bits(got, ref, what, seed):
    g = np.asarray(got)
    r = np.asarray(ref)
    assert g.dtype == r.dtype and g.shape == r.shape, f"{what}: {g.dtype}{g.shape} vs {r.dtype}{r.shape}"
    gb = g.view(np.uint16 if g.itemsize == 2 else np.uint32)
    rb = r.view(gb.dtype)
    if not np.array_equal(gb, rb):
        i = np.unravel_index(np.argmax(gb != rb), gb.shape)
        pytest.fail(f"{what} (seed {seed}): bits differ at {i}: got {g[i]!r}, reference {r[i]!r}")


# ---------------------------------------------------------------------------------------------
# Linear: acc = Σ_k bf16(x)·w in fp32 (+ bias); bf16 y = bf16(act(bf16(acc))), f32 y = act(acc).
# Tolerance: with S = Σ_k |x·w| + |bias|, the fp32 sum is off by ≤ K·u·S. f32 y: that error
# times the activation's slope (≤ 1.13) plus the fp32 activation's own error (act_abs_err). bf16
# y: also the rounding of bf16(acc) through the activation, and 1 ulp of y for the final store.

@pytest.mark.parametrize("m,k,n", [(1, 1, 7), (1, 64, 300), (3, 13, 17), (5, 77, 40), (9, 256, 33), (2, 1000, 5)])
@pytest.mark.parametrize("act", ["none", "silu", "gelu_tanh", "gelu_erf"])
@pytest.mark.parametrize("out_dtype", ["bf16", "f32"])
def test_linear(ops, request, m, k, n, act, out_dtype):
    rng, seed = seeded(request)
    x = rand_bf16(rng, (m, k))
    w = rand_bf16(rng, (n, k), 1.0 / math.sqrt(k))
    bias = rand_bf16(rng, (1, n)) if n % 2 else None
    y = ops.linear(x, w, bias, out_dtype=out_dtype, act=act)
    assert y.shape == (m, n)
    assert y.dtype == (BF16 if out_dtype == "bf16" else np.float32)
    acc = f64(x) @ f64(w).T
    s = np.abs(f64(x)) @ np.abs(f64(w)).T
    if bias is not None:
        acc = acc + f64(bias)
        s = s + np.abs(f64(bias))
    f = ACTS[act]
    sum_err = k * U * s
    ref = f(acc)
    if out_dtype == "f32":
        tol = 1.13 * sum_err + act_abs_err(act, acc) + 1e-30
    else:
        # ulp(acc), not half: bf16(acc32) may sit in the binade above acc.
        tol = 1.13 * (sum_err + ulp(acc)) + ulp(ref) + act_abs_err(act, acc)
        assert_mostly_exact(y, to_bf16(act_f32(act, to_bf16(acc))), f"linear {act}", seed)
    assert_within(y, ref, tol, f"linear {act} -> {out_dtype}", seed)


def test_linear_rounds_f32_input_to_bf16(ops, request):
    rng, seed = seeded(request)
    x = rng.standard_normal((4, 24)).astype(np.float32)
    w = rand_bf16(rng, (6, 24))
    y = ops.linear(x, w, out_dtype="f32")
    # The same product with x rounded by ml_dtypes first must give the same bits.
    y2 = ops.linear(x.astype(BF16), w, out_dtype="f32")
    assert_bits(y, y2, "linear f32 x", seed)
    assert_within(y, f64(x.astype(BF16)) @ f64(w).T, 24 * U * (np.abs(f64(x)) @ np.abs(f64(w)).T) * 1.01 + 1e-30, "linear f32 x", seed)


def test_linear_strided_x(ops, request):
    rng, seed = seeded(request)
    wide = rand_bf16(rng, (5, 50))
    x = wide[:, 10:29]  # a column window: reaches the op with row_stride 50
    w = rand_bf16(rng, (8, 19))
    y = ops.linear(x, w, out_dtype="f32")
    y2 = ops.linear(np.ascontiguousarray(x), w, out_dtype="f32")
    assert_bits(y, y2, "linear strided x", seed)


# ---------------------------------------------------------------------------------------------
# RmsNorm: n = u / sqrt(mean(u²) + eps). bf16: y = bf16(bf16(n)·w); the reference applies the
# same two roundings to the float64 n, so y may differ by the one-ulp flip of bf16(n) (when the
# fp32 n sits near a boundary) carried through the product and the final rounding: 2 ulp.
# f32: y = n·w; n carries the fp32 error of the mean of `dim` squares: (dim + 4)·u relative.

@pytest.mark.parametrize("rows,cols,dim", [(1, 64, 64), (3, 128, 128), (5, 256, 128), (2, 72, 8), (4, 13, 13)])
@pytest.mark.parametrize("dtype", ["bf16", "f32"])
def test_rms_norm(ops, request, rows, cols, dim, dtype):
    rng, seed = seeded(request)
    x = rand_bf16(rng, (rows, cols), 3.0)
    if dtype == "f32":
        x = (rng.standard_normal((rows, cols)) * 3.0).astype(np.float32)
    w = rand_bf16(rng, (1, dim))
    eps = 1e-6
    y = ops.rms_norm(x, w, dim=dim, eps=eps)
    assert y.dtype == x.dtype and y.shape == x.shape
    u = f64(x).reshape(rows, cols // dim, dim)
    n = u / np.sqrt(np.mean(u * u, axis=-1, keepdims=True) + eps)
    wv = f64(w).reshape(1, 1, dim)
    if dtype == "bf16":
        ref = to_bf16(to_bf16(n) * wv).reshape(rows, cols)
        tol = 2 * ulp(ref)
        assert_mostly_exact(y, ref, "rms_norm bf16", seed)
    else:
        ref = (n * wv).reshape(rows, cols)
        tol = (dim + 4) * U * np.abs(ref) + 1e-30
    assert_within(y, ref, tol, f"rms_norm {dtype}", seed)
    # In place (y aliases x) gives the same bits.
    assert_bits(ops.rms_norm(x, w, dim=dim, eps=eps, in_place=True), y, "rms_norm in place", seed)


# ---------------------------------------------------------------------------------------------
# LayerNorm in fp32: y = (u − mean)/sqrt(var + eps)·w + b. The fp32 mean is off by ≤ cols·u·max|u|
# which shifts every centred value; with r = 1/sqrt(var + eps) that is cols·u·max|u|·r·|w|, plus
# a few roundings of each term (4u·(|d·r·w| + |b|)). bf16 y adds 1 ulp.

@pytest.mark.parametrize("rows,cols", [(1, 1), (1, 32), (4, 100), (3, 1152)])
@pytest.mark.parametrize("in_dtype,out_dtype", [("bf16", "bf16"), ("f32", "f32"), ("f32", "bf16"), ("bf16", "f32")])
def test_layer_norm(ops, request, rows, cols, in_dtype, out_dtype):
    rng, seed = seeded(request)
    x = (rng.standard_normal((rows, cols)) * 2.0 + 0.5).astype(np.float32)
    if in_dtype == "bf16":
        x = x.astype(BF16)
    w = rand_bf16(rng, (1, cols))
    b = rand_bf16(rng, (1, cols))
    eps = 1e-6
    y = ops.layer_norm(x, w, b, eps=eps, out_dtype=out_dtype)
    assert y.dtype == (BF16 if out_dtype == "bf16" else np.float32)
    u = f64(x)
    mean = u.mean(axis=1, keepdims=True)
    d = u - mean
    r = 1.0 / np.sqrt((d * d).mean(axis=1, keepdims=True) + eps)
    ref = d * r * f64(w) + f64(b)
    maxu = np.abs(u).max(axis=1, keepdims=True)
    tol = (cols + 4) * U * maxu * r * np.abs(f64(w)) + 4 * U * (np.abs(d * r * f64(w)) + np.abs(f64(b)))
    tol = tol + (cols + 4) * U * np.abs(d * r * f64(w))  # the error of r itself
    if out_dtype == "bf16":
        tol = tol + ulp(ref)
        assert_mostly_exact(y, to_bf16(ref), "layer_norm bf16", seed)
    assert_within(y, ref, tol, f"layer_norm {in_dtype}->{out_dtype}", seed)


# ---------------------------------------------------------------------------------------------
# RoPE. bf16 math: c, s rounded to bf16; each product of two bf16 values is exact in fp32 and
# float64 and then rounded; the sum of two bf16 values rounds once. So the result is exact:
# compared bit for bit. f32 math: each fp32 product and the sum round (≤ 2u·(|a·c| + |b·s|)),
# then 1 ulp for the bf16 store.

def rope_reference(x, cos, sin, heads, hd, math_kind):
    half = hd // 2
    xv = f64(x).reshape(x.shape[0], heads, hd)
    a, b = xv[..., :half], xv[..., half:]
    c = f64(cos)[:, None, :]
    s = f64(sin)[:, None, :]
    if math_kind == "bf16":
        c, s = to_bf16(c), to_bf16(s)
        lo = to_bf16(to_bf16(a * c) + to_bf16(-b * s))
        hi = to_bf16(to_bf16(b * c) + to_bf16(a * s))
        bound = None
    else:
        lo = a * c - b * s
        hi = b * c + a * s
        bound_lo = 2 * U * (np.abs(a * c) + np.abs(b * s))
        bound_hi = 2 * U * (np.abs(b * c) + np.abs(a * s))
        bound = np.concatenate([bound_lo, bound_hi], axis=-1).reshape(x.shape[0], heads * hd)
    ref = np.concatenate([lo, hi], axis=-1).reshape(x.shape[0], heads * hd)
    return ref, bound


@pytest.mark.parametrize("s,heads,hd", [(1, 1, 2), (3, 4, 8), (7, 2, 128), (5, 3, 72)])
@pytest.mark.parametrize("math_kind", ["bf16", "f32"])
def test_rope(ops, request, s, heads, hd, math_kind):
    rng, seed = seeded(request)
    wide = rand_bf16(rng, (s, heads * hd + 6))
    x = wide[:, 3 : 3 + heads * hd]  # strided, like q inside a fused qkv row
    ang = rng.uniform(-50, 50, (s, hd // 2))
    cos = np.cos(ang).astype(np.float32)
    sin = np.sin(ang).astype(np.float32)
    y = ops.rope(x, cos, sin, heads, hd, math=math_kind)
    ref, bound = rope_reference(x, cos, sin, heads, hd, math_kind)
    if math_kind == "bf16":
        assert_bits(y, ref.astype(np.float32).astype(BF16), "rope bf16", seed)
    else:
        assert_within(y, ref, bound + ulp(ref), "rope f32", seed)


# ---------------------------------------------------------------------------------------------
# RopeTable: inv_freq_j = 1/theta^(2j/hd) in fp32 (pow and the reciprocal each within ~1 fp32
# ulp), angle = f32(pos)·inv_freq (one more rounding), cos/sin in fp32. The reference uses the
# exact float64 angle; the bound is |angle|·4u (inv_freq and the product) + 2u for cos/sin.

def mrope_rows(half, sections):
    rows = np.zeros(half, dtype=np.int64)
    for j in range(half):
        if j % 3 == 1 and j < 3 * sections[1]:
            rows[j] = 1
        elif j % 3 == 2 and j < 3 * sections[2]:
            rows[j] = 2
    return rows


@pytest.mark.parametrize("hd,theta,sections", [(128, 5e6, (24, 20, 20)), (64, 1e4, (16, 8, 8)), (16, 1e6, (24, 20, 20))])
def test_rope_table(ops, request, hd, theta, sections):
    rng, seed = seeded(request)
    pos = rng.integers(0, 5000, (9, 3)).astype(np.int32)
    pos[0] = [7, 7, 7]
    cos, sin = ops.rope_table(pos, hd, theta=theta, sections=sections)
    half = hd // 2
    assert cos.shape == (9, half) and cos.dtype == np.float32
    inv = 1.0 / theta ** (np.arange(half) * 2.0 / hd)
    rows = mrope_rows(half, sections)
    ang = f64(pos)[:, rows] * inv[None, :]
    tol = np.abs(ang) * 4 * U + 2 * U
    assert_within(cos, np.cos(ang), tol, "rope_table cos", seed)
    assert_within(sin, np.sin(ang), tol, "rope_table sin", seed)
    # The M-RoPE column choice: for a position row (t, h, w) = (0, 0, p), only w frequencies move.
    z = np.array([[0, 0, 1000]], dtype=np.int32)
    c, s = ops.rope_table(z, hd, theta=theta, sections=sections)
    np.testing.assert_array_equal(c[0, rows != 2], 1.0)
    np.testing.assert_array_equal(s[0, rows != 2], 0.0)
    if (rows == 2).any():
        assert (s[0, rows == 2] != 0).any()


# ---------------------------------------------------------------------------------------------
# Attention. Reference: float64 scores q·k·scale, softmax, Σ p·v. fp32 errors: a score is off by
# ≤ D·u·Σ|q·k|·scale, which moves every p by that relative amount twice (numerator and the sum),
# plus L·u for the sums over keys; all of it scaled by max|v|. Then 1 ulp for the bf16 store.

def attention_reference(q, ks, vs, heads, kv_heads, hd, scale, causal, q_pos0):
    k = np.concatenate([f64(a) for a in ks], axis=0)
    v = np.concatenate([f64(a) for a in vs], axis=0)
    s_rows, total = q.shape[0], k.shape[0]
    group = heads // kv_heads
    ref = np.zeros((s_rows, heads * hd))
    tol = np.zeros((s_rows, heads * hd))
    qv = f64(q)
    for h in range(heads):
        g = h // group
        qh = qv[:, h * hd : (h + 1) * hd]
        kh = k[:, g * hd : (g + 1) * hd]
        vh = v[:, g * hd : (g + 1) * hd]
        scores = qh @ kh.T * scale
        mag = np.abs(qh) @ np.abs(kh).T * abs(scale)
        for i in range(s_rows):
            visible = total if not causal else max(0, min(total, q_pos0 + i + 1))
            if visible == 0:
                continue
            sc = scores[i, :visible]
            p = np.exp(sc - sc.max())
            p /= p.sum()
            ref[i, h * hd : (h + 1) * hd] = p @ vh[:visible]
            score_err = (hd + 2) * U * mag[i, :visible].max()
            tol[i, h * hd : (h + 1) * hd] = (4 * score_err + 2 * (visible + 8) * U) * np.abs(vh[:visible]).max()
    return ref, tol


@pytest.mark.parametrize("s_rows,lens,heads,kv_heads,hd,causal,q_pos0", [
    (1, (1,), 2, 2, 8, False, 0),           # one key
    (1, (17,), 4, 2, 16, True, 16),         # decode step, GQA 2
    (1, (130, 3), 8, 2, 64, True, 132),     # decode over two spans, GQA 4
    (5, (5,), 4, 4, 32, True, 0),           # causal prefill, GQA 1
    (6, (40, 6), 4, 1, 24, True, 40),       # chunked prefill after a cache: q_pos0 > 0, GQA 4
    (3, (257,), 6, 3, 72, False, 0),        # non-causal (vision/expert), head_dim 72
    (4, (9, 0), 2, 1, 16, True, 2),         # an empty second span
])
def test_attention(ops, request, s_rows, lens, heads, kv_heads, hd, causal, q_pos0):
    rng, seed = seeded(request)
    q = rand_bf16(rng, (s_rows, heads * hd), 2.0)
    ks = [rand_bf16(rng, (n, kv_heads * hd), 2.0) for n in lens]
    vs = [rand_bf16(rng, (n, kv_heads * hd)) for n in lens]
    scale = 1.0 / math.sqrt(hd)
    extra = {}
    if len(lens) == 2:
        extra = dict(k2=ks[1], v2=vs[1])
    out = ops.attention(q, ks[0], vs[0], heads, kv_heads, hd, scale, causal=causal, q_pos0=q_pos0, **extra)
    ref, tol = attention_reference(q, ks, vs, heads, kv_heads, hd, scale, causal, q_pos0)
    assert_within(out, ref, tol + ulp(ref), "attention", seed)
    assert_mostly_exact(out, to_bf16(ref), "attention", seed)


def test_attention_without_keys_gives_zeros(ops, request):
    rng, seed = seeded(request)
    q = rand_bf16(rng, (3, 2 * 16))
    empty = np.zeros((0, 16), dtype=BF16)
    # Outputs start as guard-pattern bytes, so zeros here were written by the op.
    for causal in (False, True):
        out = ops.attention(q, empty, empty, 2, 1, 16, 0.25, causal=causal, q_pos0=0)
        assert_bits(out, np.zeros((3, 32), dtype=BF16), "attention without keys", seed)


def test_attention_causal_first_query_sees_one_key(ops, request):
    rng, seed = seeded(request)
    q = rand_bf16(rng, (3, 16))
    k = rand_bf16(rng, (4, 16))
    v = rand_bf16(rng, (4, 16))
    out = ops.attention(q, k, v, 1, 1, 16, 0.25, causal=True, q_pos0=0)
    ref, tol = attention_reference(q, [k], [v], 1, 1, 16, 0.25, True, 0)
    assert_within(out, ref, tol + ulp(ref), "attention causal", seed)
    # Query 0 sees only key 0, so its softmax weight is exactly 1 and the output is v[0].
    assert_bits(out[0:1], v[0:1], "attention single visible key", seed)


def test_attention_strided_kv(ops, request):
    rng, seed = seeded(request)
    fused = rand_bf16(rng, (7, 3 * 32))  # [q | k | v] with 2 heads of 16, like a fused qkv
    q, k, v = fused[:, 0:32], fused[:, 32:64], fused[:, 64:96]
    out = ops.attention(q, k, v, 2, 2, 16, 0.25, causal=True)
    out2 = ops.attention(*(np.ascontiguousarray(a) for a in (q, k, v)), 2, 2, 16, 0.25, causal=True)
    assert_bits(out, out2, "attention strided", seed)


# q_pos0 from a device int (q_pos0_dev): the spans may run to the cache's capacity, and keys past
# q_pos0 + S − 1 are never read (NaN here, so a read would show). Same result as the numpy
# reference over the visible keys, and the same bits as the host q_pos0 over either span length.

@pytest.mark.parametrize("s_rows,visible,capacity,heads,kv_heads,hd", [
    (1, 1, 64, 4, 2, 16),         # first decode step: one key of a 64-row cache
    (1, 130, 300, 8, 2, 64),      # decode, GQA 4
    (1, 300, 300, 2, 2, 8),       # the cache exactly full
    (3, 57, 200, 6, 3, 24),       # three queries (a short draft), GQA 2
])
def test_attention_q_pos0_dev(ops, request, s_rows, visible, capacity, heads, kv_heads, hd):
    rng, seed = seeded(request)
    q_pos0 = visible - s_rows
    q = rand_bf16(rng, (s_rows, heads * hd), 2.0)
    k = rand_bf16(rng, (capacity, kv_heads * hd), 2.0)
    v = rand_bf16(rng, (capacity, kv_heads * hd))
    k[visible:] = np.nan
    v[visible:] = np.nan
    scale = 1.0 / math.sqrt(hd)
    pos = np.array([[q_pos0]], dtype=np.int32)
    out = ops.attention(q, k, v, heads, kv_heads, hd, scale, causal=True, q_pos0_dev=pos)
    ref, tol = attention_reference(q, [k[:visible]], [v[:visible]], heads, kv_heads, hd, scale,
                                   True, q_pos0)
    assert_within(out, ref, tol + ulp(ref), "attention q_pos0_dev", seed)
    assert_mostly_exact(out, to_bf16(ref), "attention q_pos0_dev", seed)
    host = ops.attention(q, k, v, heads, kv_heads, hd, scale, causal=True, q_pos0=q_pos0)
    assert_bits(out, host, "q_pos0_dev vs host q_pos0, capacity spans", seed)
    tight = ops.attention(q, k[:visible], v[:visible], heads, kv_heads, hd, scale, causal=True,
                          q_pos0=q_pos0)
    assert_bits(out, tight, "q_pos0_dev vs host q_pos0, visible keys only", seed)


def test_attention_q_pos0_dev_rejected(ops, request):
    rng, seed = seeded(request)
    q = rand_bf16(rng, (1, 2 * 16))
    k = rand_bf16(rng, (4, 16))
    v = rand_bf16(rng, (4, 16))
    pos = np.array([[1]], dtype=np.int32)
    with pytest.raises(ValueError, match="attention: q_pos0_dev: needs causal attention"):
        ops.attention(q, k, v, 2, 1, 16, 0.25, causal=False, q_pos0_dev=pos)
    with pytest.raises(ValueError, match="attention: q_pos0: must be 0 when q_pos0_dev is given"):
        ops.attention(q, k, v, 2, 1, 16, 0.25, causal=True, q_pos0=1, q_pos0_dev=pos)
    with pytest.raises(ValueError, match=r"attention: q_pos0_dev: expected shape \[1, 1\], got \[1, 2\]"):
        ops.attention(q, k, v, 2, 1, 16, 0.25, causal=True, q_pos0_dev=np.array([[1, 2]], np.int32))
    with pytest.raises(ValueError, match="attention: q_pos0_dev: expected dtype I32, got F32"):
        ops.attention(q, k, v, 2, 1, 16, 0.25, causal=True, q_pos0_dev=np.array([[1.0]], np.float32))
    # A negative position is caught when the op runs (the value is not known before).
    with pytest.raises((ValueError, RuntimeError), match="q_pos0_dev < 0"):
        ops.attention(q, k, v, 2, 1, 16, 0.25, causal=True, q_pos0_dev=np.array([[-1]], np.int32))
    # The module is still usable afterwards.
    out = ops.attention(q, k, v, 2, 1, 16, 0.25, causal=True, q_pos0_dev=pos)
    assert_bits(out, ops.attention(q, k, v, 2, 1, 16, 0.25, causal=True, q_pos0=1), "after errors", seed)
# Segments: query i of segment s sees only the keys of segment s (the images of a vision batch).
# Reference: the float64 attention of each segment on its own, with the same tolerance.

def segmented_reference(q, k, v, heads, kv_heads, hd, scale, bounds):
    ref = np.zeros((q.shape[0], heads * hd))
    tol = np.zeros_like(ref)
    for a, b in zip(bounds[:-1], bounds[1:]):
        if b > a:
            ref[a:b], tol[a:b] = attention_reference(q[a:b], [k[a:b]], [v[a:b]], heads, kv_heads,
                                                     hd, scale, False, 0)
    return ref, tol


def segment_table(bounds, stride=1):
    """An int32 [n + 1, 1] offset array, optionally a column of a wider array (row stride)."""
    wide = np.full((len(bounds), stride), -7, dtype=np.int32)
    wide[:, 0] = bounds
    return wide[:, :1]


@pytest.mark.parametrize("bounds,heads,kv_heads,hd,stride", [
    ((0, 7, 14, 21), 2, 2, 16, 1),            # equal segments
    ((0, 1, 38, 121, 200), 4, 4, 72, 1),     # one row, then odd unequal sizes; vision head_dim
    ((0, 13, 13, 40, 41), 4, 2, 64, 2),      # an empty segment, GQA 2, strided offsets
    ((0, 33, 50), 2, 1, 128, 1),             # head_dim 128, GQA 2
    ((0, 50), 3, 3, 8, 1),                   # one segment: the plain op
])
def test_attention_segments(ops, request, bounds, heads, kv_heads, hd, stride):
    rng, seed = seeded(request)
    s_rows = bounds[-1]
    q = rand_bf16(rng, (s_rows, heads * hd), 2.0)
    k = rand_bf16(rng, (s_rows, kv_heads * hd), 2.0)
    v = rand_bf16(rng, (s_rows, kv_heads * hd))
    scale = 1.0 / math.sqrt(hd)
    longest = max(b - a for a, b in zip(bounds[:-1], bounds[1:]))
    out = ops.attention_segmented(q, k, v, heads, kv_heads, hd, scale, segment_table(bounds, stride),
                                  longest)
    ref, tol = segmented_reference(q, k, v, heads, kv_heads, hd, scale, bounds)
    what = f"attention segments {bounds}"
    assert_within(out, ref, tol + ulp(ref), what, seed)
    assert_mostly_exact(out, to_bf16(ref), what, seed)
    # Segmented attention is, bit for bit, each segment's plain attention on its own rows.
    for a, b in zip(bounds[:-1], bounds[1:]):
        if b > a:
            alone = ops.attention(q[a:b], k[a:b], v[a:b], heads, kv_heads, hd, scale)
            assert_bits(out[a:b], alone, f"{what}: segment [{a}, {b})", seed)


def test_attention_segments_fused_qkv(ops, request):
    """The vision tower's layout: q, k, v are column slices of one qkv row (row strides)."""
    rng, seed = seeded(request)
    heads, hd, bounds = 2, 16, (0, 9, 25)
    fused = rand_bf16(rng, (25, 3 * heads * hd), 2.0)
    q, k, v = (fused[:, i * heads * hd:(i + 1) * heads * hd] for i in range(3))
    out = ops.attention_segmented(q, k, v, heads, heads, hd, 0.25, segment_table(bounds), 16)
    ref, tol = segmented_reference(q, k, v, heads, heads, hd, 0.25, bounds)
    assert_within(out, ref, tol + ulp(ref), "attention segments fused qkv", seed)


def test_attention_segments_rejected_by_validate(ops, request):
    rng, seed = seeded(request)
    q = rand_bf16(rng, (6, 16))
    seg = segment_table((0, 3, 6))
    with pytest.raises(ValueError, match="attention: segments: needs non-causal attention"):
        ops.attention_segmented(q, q, q, 1, 1, 16, 0.25, seg, 3, causal=True)
    with pytest.raises(ValueError, match="attention: segments: needs one span"):
        ops.attention_segmented(q, q, q, 1, 1, 16, 0.25, seg, 3, k2=q[:1], v2=q[:1])
    with pytest.raises(ValueError, match="attention: segments: needs one span"):
        ops.attention_segmented(q, q[:5], q[:5], 1, 1, 16, 0.25, seg, 3)
    for rows in (0, 7):
        with pytest.raises(ValueError, match=r"attention: max_segment_rows: must lie in \[1, S\]"):
            ops.attention_segmented(q, q, q, 1, 1, 16, 0.25, seg, rows)
    with pytest.raises(ValueError, match=r"attention: segments: expected shape \[n \+ 1, 1\]"):
        ops.attention_segmented(q, q, q, 1, 1, 16, 0.25, segment_table((6,)), 6)
    with pytest.raises(ValueError, match="attention: segments: expected dtype I32"):
        ops.attention_segmented(q, q, q, 1, 1, 16, 0.25, np.zeros((3, 1), np.float32), 3)


@pytest.mark.parametrize("bounds", [
    (1, 3, 6),        # does not start at 0
    (0, 4, 2, 6),     # decreasing
    (0, 2, 5),        # ends before S
    (0, 3, 7),        # ends past S
    (0, 1, 6),        # a segment longer than max_segment_rows (3)
    (0, -1, 6),       # negative
])
def test_attention_segments_bad_offsets(ops, request, bounds):
    """The offsets are device data, checked when the op runs: the error comes from synchronize."""
    rng, seed = seeded(request)
    q = rand_bf16(rng, (6, 16))
    with pytest.raises(RuntimeError, match="attention: .*segment"):
        ops.attention_segmented(q, q, q, 1, 1, 16, 0.25, segment_table(bounds), 3)


# ---------------------------------------------------------------------------------------------
# SwiGLU: out = bf16(bf16(silu(g))·u). The product of two bf16 values is exact, so the only
# freedom is the fp32 silu landing on the other side of a bf16 boundary than the float64 one:
# at most 2 ulp, and rare, so also require nearly all elements bit-exact.

@pytest.mark.parametrize("m,i", [(1, 1), (3, 17), (8, 512)])
def test_swiglu(ops, request, m, i):
    rng, seed = seeded(request)
    fused = rand_bf16(rng, (m, 2 * i), 3.0)
    gate, up = fused[:, :i], fused[:, i:]
    out = ops.swiglu(gate, up)
    ref = to_bf16(to_bf16(silu(f64(gate))) * f64(up))
    assert_within(out, ref, 2 * ulp(ref), "swiglu", seed)
    assert_mostly_exact(out, ref, "swiglu", seed)


# ---------------------------------------------------------------------------------------------
# Exact ops: the reference applies ml_dtypes' round-to-nearest-even at the documented points.

@pytest.mark.parametrize("dst_dtype,src_dtype", [("bf16", "bf16"), ("bf16", "f32"), ("f32", "bf16"), ("f32", "f32")])
def test_add(ops, request, dst_dtype, src_dtype):
    rng, seed = seeded(request)
    def make(dt, shape):
        a = (rng.standard_normal(shape) * 4).astype(np.float32)
        return a.astype(BF16) if dt == "bf16" else a
    dst = make(dst_dtype, (5, 33))
    src = make(src_dtype, (5, 33))
    got = ops.add(dst, src)
    ref = dst.astype(np.float32) + src.astype(np.float32)
    assert_bits(got, ref.astype(dst.dtype), f"add {dst_dtype}+={src_dtype}", seed)


def test_add_rows(ops, request):
    rng, seed = seeded(request)
    dst = rand_bf16(rng, (10, 12))
    src = (rng.standard_normal((4, 12))).astype(np.float32)
    rows = rng.choice(10, 4, replace=False).astype(np.int32).reshape(4, 1)
    got = ops.add_rows(dst, src, rows)
    ref = dst.copy()
    for i, r in enumerate(rows[:, 0]):
        ref[r] = (dst[r].astype(np.float32) + src[i]).astype(BF16)
    assert_bits(got, ref, "add_rows", seed)


@pytest.mark.parametrize("dtype", [BF16, np.float32])
def test_gather_and_scatter_rows(ops, request, dtype):
    rng, seed = seeded(request)
    table = rng.standard_normal((50, 9)).astype(np.float32).astype(dtype)
    ids = rng.integers(0, 50, (7, 1)).astype(np.int32)
    assert_bits(ops.gather_rows(table, ids), table[ids[:, 0]], "gather_rows", seed)
    src = rng.standard_normal((3, 9)).astype(np.float32).astype(dtype)
    rows = rng.choice(50, 3, replace=False).astype(np.int32).reshape(3, 1)
    ref = table.copy()
    ref[rows[:, 0]] = src
    assert_bits(ops.scatter_rows(src, rows, table), ref, "scatter_rows", seed)


def test_add_rows_rejects_repeated_rows(ops):
    dst = np.zeros((4, 2), dtype=np.float32)
    with pytest.raises(RuntimeError, match="add_rows: rows: row 2 repeats"):
        ops.add_rows(dst, np.ones((2, 2), np.float32), np.array([[2], [2]], dtype=np.int32))


def test_scatter_rows_rejects_repeated_rows(ops):
    dst = np.zeros((4, 2), dtype=np.float32)
    with pytest.raises(RuntimeError, match="scatter_rows: rows: row 1 repeats"):
        ops.scatter_rows(np.ones((2, 2), np.float32), np.array([[1], [1]], dtype=np.int32), dst)


def test_index_out_of_range_is_an_error(ops):
    table = np.zeros((4, 2), dtype=np.float32)
    with pytest.raises(RuntimeError, match="gather_rows: ids: index 4"):
        ops.gather_rows(table, np.array([[4]], dtype=np.int32))
    with pytest.raises(RuntimeError, match="scatter_rows: rows: index -1"):
        ops.scatter_rows(np.zeros((1, 2), np.float32), np.array([[-1]], dtype=np.int32), table)


def test_cast(ops, request):
    rng, seed = seeded(request)
    x = (rng.standard_normal((6, 40)) * 10.0 ** rng.integers(-30, 30, (6, 40))).astype(np.float32)
    special = np.array([0.0, -0.0, np.inf, -np.inf, 1e-40, -3e-39, 3.0e38, 3.4e38,
                        1.0 + 2.0**-8, 1.0 + 3 * 2.0**-8, 2.0**-133], dtype=np.float32)
    x[0, : special.size] = special
    got = ops.cast(x, "bf16")
    assert_bits(got, x.astype(BF16), "cast f32->bf16", seed)
    back = ops.cast(got, "f32")
    assert_bits(back, got.astype(np.float32), "cast bf16->f32", seed)
    nan = ops.cast(np.array([[np.nan, -np.nan]], dtype=np.float32), "bf16")
    assert np.isnan(f64(nan)).all()


def test_copy_into_strided_destination(ops, request):
    rng, seed = seeded(request)
    src = rand_bf16(rng, (5, 16))
    dst = rand_bf16(rng, (5, 48))  # e.g. a KV cache row holding several heads
    got = ops.copy(src, dst, col0=16)
    ref = dst.copy()
    ref[:, 16:32] = src
    assert_bits(got, ref, "copy", seed)
    wide = rand_bf16(rng, (4, 30))
    got = ops.copy(wide[:, 5:12], rand_bf16(rng, (4, 7)))  # strided source
    assert_bits(got, np.ascontiguousarray(wide[:, 5:12]), "copy strided src", seed)


def test_pos_embed_interp(ops, request):
    rng, seed = seeded(request)
    table = rand_bf16(rng, (48, 20))
    idx = rng.integers(0, 48, (11, 4)).astype(np.int32)
    weight = rng.uniform(0, 1, (11, 4)).astype(np.float32)
    got = ops.pos_embed_interp(table, idx, weight)
    w = weight.astype(BF16).astype(np.float32)
    e = table.astype(np.float32)
    def prod(k):  # a product of two bf16 values is exact in fp32; then one rounding
        return (e[idx[:, k]] * w[:, k : k + 1]).astype(BF16).astype(np.float32)
    acc = prod(0)
    for k in range(1, 4):
        acc = (acc + prod(k)).astype(BF16).astype(np.float32)
    assert_bits(got, acc.astype(BF16), "pos_embed_interp", seed)


def argmax_reference(x):
    out = np.zeros((x.shape[0], 1), dtype=np.int32)
    for r, row in enumerate(f64(x)):
        best = None
        for c, v in enumerate(row):
            if np.isnan(v):
                continue
            if best is None or v > row[best]:
                best = c
        out[r, 0] = 0 if best is None else best
    return out


@pytest.mark.parametrize("dtype", [BF16, np.float32])
def test_argmax(ops, request, dtype):
    rng, seed = seeded(request)
    x = rng.integers(-20, 20, (6, 300)).astype(np.float32)  # many ties: lowest index wins
    x[1, :5] = np.nan
    x[2, :] = -np.inf
    x[2, 7] = np.nan
    x[3, :] = np.nan
    x[4, 0] = np.nan
    x[4, 299] = 1000.0
    x = x.astype(dtype)
    got = ops.argmax(x)
    np.testing.assert_array_equal(got, argmax_reference(x), err_msg=f"seed {seed}")
    big = rng.standard_normal((1, 155697)).astype(np.float32).astype(dtype)
    np.testing.assert_array_equal(ops.argmax(big), argmax_reference(big), err_msg=f"seed {seed}")


# ---------------------------------------------------------------------------------------------
# The module raises on ops that validate() rejects, and results do not depend on threads.

def test_validation_errors_raise(ops):
    x = np.zeros((2, 8), dtype=BF16)
    with pytest.raises(ValueError, match="linear: w: expected shape"):
        ops.linear(x, np.zeros((3, 7), dtype=BF16))
    with pytest.raises(ValueError, match="attention: num_heads: 3 is not a multiple"):
        ops.attention(np.zeros((1, 24), BF16), np.zeros((2, 16), BF16), np.zeros((2, 16), BF16), 3, 2, 8, 1.0)


def test_thread_count_does_not_change_bits(ferry_ops, request):
    rng, seed = seeded(request)
    x = rand_bf16(rng, (13, 200))
    w = rand_bf16(rng, (300, 200))
    q = rand_bf16(rng, (9, 4 * 32))
    k = rand_bf16(rng, (50, 2 * 32))
    v = rand_bf16(rng, (50, 2 * 32))
    results = []
    for threads in (1, 2, 5):
        ferry_ops.configure(threads=threads, max_delay_us=20, seed=threads)
        results.append((ferry_ops.linear(x, w, act="gelu_erf"),
                        ferry_ops.attention(q, k, v, 4, 2, 32, 0.17, causal=True, q_pos0=41),
                        ferry_ops.rms_norm(x, rand_bf16(np.random.default_rng(1), (1, 200)))))
    ferry_ops.configure(threads=0)
    for other in results[1:]:
        for a, b in zip(results[0], other):
            assert_bits(b, a, "threads", seed)


# ---------------------------------------------------------------------------------------------
# Random shapes drawn fresh every run (sizes, strides, head layouts), same tolerances as above.

def test_linear_random_shapes(ops, request):
    rng, seed = seeded(request)
    for _ in range(12):
        m, k, n = (int(v) for v in rng.integers(1, [20, 300, 200]))
        pad = int(rng.integers(0, 5))
        x = rand_bf16(rng, (m, k + pad))[:, pad:]
        w = rand_bf16(rng, (n, k), 1.0 / math.sqrt(k))
        y = ops.linear(x, w, out_dtype="f32")
        acc = f64(x) @ f64(w).T
        tol = k * U * (np.abs(f64(x)) @ np.abs(f64(w)).T) + 4 * U * np.abs(acc) + 1e-30
        assert_within(y, acc, tol, f"linear m={m} k={k} n={n} pad={pad}", seed)


def test_attention_random_shapes(ops, request):
    rng, seed = seeded(request)
    for _ in range(8):
        kv_heads = int(rng.integers(1, 4))
        heads = kv_heads * int(rng.choice([1, 2, 4]))
        hd = int(rng.choice([2, 8, 16, 40, 64]))
        s_rows = int(rng.integers(1, 9))
        lens = [int(rng.integers(0, 60)), int(rng.integers(0, 8))]
        causal = bool(rng.integers(0, 2))
        q_pos0 = int(rng.integers(0, sum(lens) + 2))
        q = rand_bf16(rng, (s_rows, heads * hd), 2.0)
        ks = [rand_bf16(rng, (n, kv_heads * hd), 2.0) for n in lens]
        vs = [rand_bf16(rng, (n, kv_heads * hd)) for n in lens]
        scale = float(rng.uniform(0.05, 0.5))
        out = ops.attention(q, ks[0], vs[0], heads, kv_heads, hd, scale, causal=causal,
                            q_pos0=q_pos0, k2=ks[1], v2=vs[1])
        ref, tol = attention_reference(q, ks, vs, heads, kv_heads, hd, scale, causal, q_pos0)
        what = f"attention S={s_rows} lens={lens} H={heads}/{kv_heads} D={hd} causal={causal} q0={q_pos0}"
        assert_within(out, ref, tol + ulp(ref), what, seed)
