"""libdetinfer_torch.so from Debian's python3-torch: batch invariance of the operators
(bitwise), closeness to PyTorch (tolerance), attention paths, errors, and the scoped aten
override on an unmodified torch.nn model.

Run by ctest (label python) with DETINFER_TORCH_LIB set; PYTHONPATH holds detinfer_torch.py.
"""

import hashlib
import itertools
import os
import unittest

import torch

import detinfer_torch

detinfer_torch.load(os.environ["DETINFER_TORCH_LIB"])
ops = torch.ops.detinfer


def rand(*shape, seed, dtype=torch.float32):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(*shape, generator=g, dtype=torch.float32).to(dtype)


def row_prefixes(m):
    return sorted({1, 2, 3, max(1, m // 2), max(1, m - 1), m})


MM_SHAPES = list(itertools.product([1, 4, 33, 64], [1, 7, 64, 65, 200, 1031], [1, 5, 64, 129]))


class MatmulTest(unittest.TestCase):
    def test_mm_rows_are_batch_invariant_for_many_shapes(self):
        torch_variant = []
        for i, (m, k, n) in enumerate(MM_SHAPES):
            x = rand(m, k, seed=i)
            w = rand(k, n, seed=1000 + i)
            full = ops.mm(x, w)
            ref = torch.mm(x, w)
            for p in row_prefixes(m):
                self.assertTrue(torch.equal(ops.mm(x[:p], w), full[:p]),
                                f"detinfer.mm rows differ for M={m} K={k} N={n} prefix {p}")
                if not torch.equal(torch.mm(x[:p], w), ref[:p]):
                    torch_variant.append((m, k, n, p))
            exact = x.double() @ w.double()
            tol = 1e-5 * (x.double().abs() @ w.double().abs()).max().item() + 1e-6
            self.assertLess((full.double() - exact).abs().max().item(), tol, (m, k, n))
        print(f"\n[torch.mm on this machine] {len(torch_variant)} of "
              f"{sum(len(row_prefixes(m)) for m, _, _ in MM_SHAPES)} (shape, prefix) cases give "
              f"different bits for the same rows; detinfer.mm: 0")
        for case in torch_variant[:8]:
            print("  torch.mm differs: M=%d K=%d N=%d prefix=%d" % case)

    def test_mm_non_contiguous_and_half_inputs(self):
        x = rand(40, 96, seed=1)
        w = rand(96, 24, seed=2)
        full = ops.mm(x, w)
        self.assertTrue(torch.equal(ops.mm(x.t().contiguous().t(), w), full))
        self.assertTrue(torch.equal(ops.mm(x[::2], w), full[::2]))
        for dt in (torch.bfloat16, torch.float16):
            y = ops.mm(x.to(dt), w.to(dt))
            self.assertEqual(y.dtype, dt)
            self.assertTrue(torch.equal(ops.mm(x.to(dt)[:3], w.to(dt)), y[:3]))

    def test_linear_addmm_agree_bitwise(self):
        x = rand(9, 130, seed=3)
        wt = rand(70, 130, seed=4)
        b = rand(70, seed=5)
        lin = ops.linear(x, wt, b)
        self.assertTrue(torch.equal(lin, ops.addmm(b, x, wt.t())))
        self.assertTrue(torch.equal(ops.linear(x, wt), ops.mm(x, wt.t())))
        x3 = rand(2, 5, 130, seed=6)
        self.assertTrue(torch.equal(ops.linear(x3, wt, b)[1], ops.linear(x3[1], wt, b)))
        torch.testing.assert_close(lin, torch.nn.functional.linear(x, wt, b), rtol=1e-4, atol=1e-4)
        # bf16 weights are widened exactly: same bits as the widened f32 weights.
        wb = wt.to(torch.bfloat16)
        self.assertTrue(torch.equal(ops.linear(x, wb, b), ops.linear(x, wb.float(), b)))
        y = ops.addmm(b, x, wt.t(), beta=0.5, alpha=2.0)
        torch.testing.assert_close(y, torch.addmm(b, x, wt.t(), beta=0.5, alpha=2.0),
                                   rtol=1e-4, atol=1e-4)


class IsaTest(unittest.TestCase):
    def test_same_bits_with_every_isa(self):
        x, w = rand(7, 300, seed=31), rand(300, 33, seed=32)
        q, k, v = rand(9, 4, 64, seed=33), rand(9, 2, 64, seed=34), rand(9, 2, 64, seed=35)
        digests = {}
        original = ops.cpu_isa()
        try:
            for isa in ("scalar", "avx2", "avx512"):
                try:
                    ops.set_cpu_isa(isa)
                except RuntimeError as e:
                    self.assertIn("unsupported", str(e).lower())
                    continue  # this CPU lacks the ISA
                y = ops.mm(x, w)
                outs = (y, ops.log_softmax(y, -1), ops.rms_norm(y, w[0, :33], 1e-5),
                        ops.attention_prefill(q, k, v, 0.125))
                digests[isa] = hashlib.sha256(b"".join(t.numpy().tobytes() for t in outs)).hexdigest()
        finally:
            ops.set_cpu_isa(original)
        print(f"\n[ISA] {original} active; digests: {digests}")
        self.assertIn("scalar", digests)
        self.assertEqual(len(set(digests.values())), 1, digests)
        with self.assertRaisesRegex(RuntimeError, "unknown ISA"):
            ops.set_cpu_isa("sse9")


class RowOpsTest(unittest.TestCase):
    def test_row_ops_close_to_torch_and_row_invariant(self):
        x = rand(12, 7, 300, seed=7) * 4
        for dim in (-1, 1, 0):
            sm = ops.softmax(x, dim)
            lsm = ops.log_softmax(x, dim)
            torch.testing.assert_close(sm, torch.softmax(x, dim), rtol=1e-5, atol=1e-6)
            torch.testing.assert_close(lsm, torch.log_softmax(x, dim), rtol=1e-5, atol=1e-5)
        self.assertTrue(torch.equal(ops.softmax(x[:1], -1), ops.softmax(x, -1)[:1]))
        for dims, keep in (([-1], False), ([0, 2], True), ([1], False), (None, False)):
            mean = ops.mean(x, dims, keep)
            torch.testing.assert_close(mean, x.mean(dims if dims else list(range(x.dim())), keep),
                                       rtol=1e-5, atol=1e-6)
        self.assertTrue(torch.equal(ops.mean(x[:5], [-1]), ops.mean(x, [-1])[:5]))
        w = rand(300, seed=8)
        rn = ops.rms_norm(x, w, 1e-6)
        ref = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * w
        torch.testing.assert_close(rn, ref, rtol=1e-5, atol=1e-5)
        self.assertTrue(torch.equal(ops.rms_norm(x[3:4], w, 1e-6), rn[3:4]))
        g, u = rand(5, 257, seed=9), rand(5, 257, seed=10)
        torch.testing.assert_close(ops.silu_mul(g, u), torch.nn.functional.silu(g) * u,
                                   rtol=1e-5, atol=1e-6)


def paged_cache(k, v, block_size, seed):
    """Scatters k/v [T, Hkv, D] into a shuffled paged cache; returns caches and table."""
    t, hkv, d = k.shape
    nb = (t + block_size - 1) // block_size
    total = nb + 3
    perm = torch.randperm(total, generator=torch.Generator().manual_seed(seed))[:nb]
    kc = rand(total, block_size, hkv, d, seed=seed + 1)  # garbage outside the sequence
    vc = rand(total, block_size, hkv, d, seed=seed + 2)
    for i in range(t):
        kc[perm[i // block_size], i % block_size] = k[i]
        vc[perm[i // block_size], i % block_size] = v[i]
    return kc, vc, perm.to(torch.int32)


class AttentionTest(unittest.TestCase):
    def test_prefill_equals_paged_decode_rows_and_torch(self):
        t, h, hkv, d = 37, 8, 2, 32
        q, k, v = rand(t, h, d, seed=11), rand(t, hkv, d, seed=12), rand(t, hkv, d, seed=13)
        scale = d ** -0.5
        pre = ops.attention_prefill(q, k, v, scale)
        kc, vc, table = paged_cache(k, v, 16, seed=14)
        # The same rows through the paged cache, all at once and one by one (decode).
        rows = ops.attention(q, kc, vc, table, torch.arange(1, t + 1), scale)
        self.assertTrue(torch.equal(rows, pre))
        for i in (0, 15, 16, 36):
            one = ops.attention(q[i:i + 1], kc, vc, table, torch.tensor([i + 1]), scale)
            self.assertTrue(torch.equal(one[0], pre[i]), i)
        # Batched decode: sequence b = prefix of length lens[b], each its own table.
        lens = torch.tensor([37, 1, 20])
        tables = table.unsqueeze(0).repeat(3, 1)
        qb = torch.stack([q[n - 1] for n in lens.tolist()])
        dec = ops.paged_attention_decode(qb, kc, vc, tables, lens, scale)
        for b, n in enumerate(lens.tolist()):
            self.assertTrue(torch.equal(dec[b], pre[n - 1]))
        # Reference: causal softmax attention in float64.
        kk = k.double().repeat_interleave(h // hkv, 1)
        vv = v.double().repeat_interleave(h // hkv, 1)
        s = torch.einsum("thd,shd->hts", q.double(), kk) * scale
        s = s.masked_fill(torch.triu(torch.ones(t, t, dtype=torch.bool), 1), float("-inf"))
        ref = torch.einsum("hts,shd->thd", torch.softmax(s, -1), vv)
        torch.testing.assert_close(pre.double(), ref, rtol=1e-5, atol=1e-5)

    def test_invalid_arguments_raise(self):
        kc = torch.zeros(2, 4, 1, 8)
        q = torch.zeros(1, 2, 8)
        with self.assertRaisesRegex(RuntimeError, "outside the cache"):
            ops.attention(q, kc, kc, torch.tensor([5], dtype=torch.int32), torch.tensor([3]), 1.0)
        with self.assertRaisesRegex(RuntimeError, "blocks but the block table"):
            ops.attention(q, kc, kc, torch.tensor([0], dtype=torch.int32), torch.tensor([5]), 1.0)
        with self.assertRaisesRegex(RuntimeError, "row 0 sees 0 keys"):
            ops.attention(q, kc, kc, torch.tensor([0], dtype=torch.int32), torch.tensor([0]), 1.0)
        with self.assertRaisesRegex(RuntimeError, "num_keys has 2 entries for 1 query rows"):
            ops.attention(q, kc, kc, torch.tensor([0]), torch.tensor([1, 1]), 1.0)
        tables = torch.tensor([[0, 1]])
        with self.assertRaisesRegex(RuntimeError, "block_tables must be \\[2, max_blocks\\]"):
            ops.paged_attention_decode(
                torch.zeros(2, 2, 8), kc, kc, tables, torch.tensor([1, 1]), 1.0)
        with self.assertRaisesRegex(RuntimeError, "context_lens has 2 entries for a batch of 1"):
            ops.paged_attention_decode(q, kc, kc, tables, torch.tensor([1, 1]), 1.0)
        with self.assertRaisesRegex(RuntimeError, "outside the cache"):
            ops.paged_attention_decode(q, kc, kc, torch.tensor([[2, 0]]), torch.tensor([1]), 1.0)
        with self.assertRaisesRegex(RuntimeError, "cannot be multiplied"):
            ops.mm(torch.zeros(2, 3), torch.zeros(4, 5))
        with self.assertRaisesRegex(RuntimeError, "float32, bfloat16 or float16"):
            ops.mm(torch.zeros(2, 3, dtype=torch.int64), torch.zeros(3, 5, dtype=torch.int64))


class Mlp(torch.nn.Module):
    """An ordinary model: nothing in it knows about detinfer."""

    def __init__(self):
        super().__init__()
        self.up = torch.nn.Linear(96, 256)
        self.down = torch.nn.Linear(256, 40, bias=False)
        self.head = torch.nn.Linear(40, 40)

    def forward(self, x):
        h = torch.nn.functional.silu(self.up(x))
        h = self.down(h)
        h = h - h.mean(dim=-1, keepdim=True)
        return torch.log_softmax(self.head(h), dim=-1), torch.softmax(h, dim=-1)


class AtenOverrideTest(unittest.TestCase):
    def setUp(self):
        torch.manual_seed(0)
        self.model = Mlp().eval()
        self.x = rand(48, 96, seed=21)

    def batch_invariant(self, fn):
        full = fn(self.x)
        return all(torch.equal(a, b) for m in row_prefixes(48) for a, b in
                   zip(fn(self.x[:m]), (f[:m] for f in full)))

    def test_unmodified_model_becomes_batch_invariant(self):
        with torch.no_grad():
            plain = self.model(self.x)
            print(f"\n[torch.nn MLP without override] batch-invariant: "
                  f"{self.batch_invariant(self.model)}")
            self.assertFalse(ops.aten_override_enabled())
            with detinfer_torch.batch_invariant():
                self.assertTrue(ops.aten_override_enabled())
                self.assertTrue(self.batch_invariant(self.model))
                inv = self.model(self.x)
                # The override really routes aten::mm to detinfer.
                a, b = rand(5, 96, seed=22), rand(96, 7, seed=23)
                self.assertTrue(torch.equal(torch.mm(a, b), ops.mm(a, b)))
                with detinfer_torch.batch_invariant():  # scopes nest
                    pass
                self.assertTrue(ops.aten_override_enabled())
            self.assertFalse(ops.aten_override_enabled())
            for p, q in zip(plain, inv):
                torch.testing.assert_close(p, q, rtol=1e-4, atol=1e-5)
            self.assertTrue(all(torch.equal(p, q) for p, q in zip(plain, self.model(self.x))),
                            "PyTorch's kernels are back after the scope")

    def test_override_with_autograd_and_3d_inputs(self):
        x3 = self.x.view(6, 8, 96)
        with detinfer_torch.batch_invariant():
            out = self.model(x3)[0]  # grad mode on: autograd dispatches to the override
            self.assertTrue(torch.equal(self.model(x3[:2])[0], out[:2]))
            out.sum().backward()
            self.assertIsNotNone(self.model.up.weight.grad)
            with torch.inference_mode():
                self.assertTrue(torch.equal(self.model(x3[:1])[0], out[:1].detach()))
        # Doubles are not the kernels' dtype: PyTorch's kernels still serve them.
        with detinfer_torch.batch_invariant():
            d = torch.mm(self.x.double()[:2, :5], self.x.double()[:5, :3])
        self.assertEqual(d.dtype, torch.float64)


if __name__ == "__main__":
    unittest.main(verbosity=2)
