"""Correctness check of the kernels in this directory on a real GPU.

Needs torch + triton and an sm90/sm100 GPU:

    python3 bench/kernels/check.py

Launches `matmul.matmul_tma_kernel` and `fa_fwd.attn_fwd_kernel` with the
default configurations and compares against torch references.
"""

import math
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import torch  # noqa: E402
import triton  # noqa: E402
from triton.tools.tensor_descriptor import TensorDescriptor  # noqa: E402

import fa_fwd  # noqa: E402
import matmul  # noqa: E402


def check_matmul(M=1024, N=768, K=512):
    cfg = dict(matmul.DEFAULT_CONFIG)
    BM, BN, BK = cfg["BLOCK_M"], cfg["BLOCK_N"], cfg["BLOCK_K"]
    a = torch.randn(M, K, device="cuda", dtype=torch.float16)
    b = torch.randn(N, K, device="cuda", dtype=torch.float16)  # B is N x K
    c = torch.empty(M, N, device="cuda", dtype=torch.float16)
    a_desc = TensorDescriptor.from_tensor(a, [BM, BK])
    b_desc = TensorDescriptor.from_tensor(b, [BN, BK])
    c_desc = TensorDescriptor.from_tensor(c, [BM, BN])
    grid = (triton.cdiv(M, BM) * triton.cdiv(N, BN), )
    matmul.matmul_tma_kernel[grid](a_desc, b_desc, c_desc, M, N, K, **cfg)
    ref = (a.float() @ b.float().T).half()
    err = (c.float() - ref.float()).abs().max().item()
    print(f"matmul {M}x{N}x{K}: max abs err {err:.4f}")
    assert torch.allclose(c, ref, atol=0.5, rtol=1e-2), err


def check_fa(Z=2, H=3, N_CTX=1024):
    cap = torch.cuda.get_device_capability()[0] * 10
    cfg = dict(fa_fwd.DEFAULT_CONFIGS[cap])
    D, BM, BN = cfg["HEAD_DIM"], cfg["BLOCK_M"], cfg["BLOCK_N"]
    q, k, v = (torch.randn(Z, H, N_CTX, D, device="cuda", dtype=torch.float16) for _ in range(3))
    o = torch.empty_like(q)
    lse = torch.empty(Z * H * N_CTX, device="cuda", dtype=torch.float32)
    sm_scale = 1.0 / math.sqrt(D)

    def desc(t, rows):
        return TensorDescriptor.from_tensor(t.view(Z * H * N_CTX, D), [rows, D])

    grid = (triton.cdiv(N_CTX, BM), Z * H)
    fa_fwd.attn_fwd_kernel[grid](sm_scale, lse, Z, H, desc(q, BM), desc(k, BN), desc(v, BN), desc(o, BM), N_CTX,
                                 **cfg)
    s = (q.float() @ k.float().transpose(-1, -2)) * sm_scale
    ref = torch.softmax(s, dim=-1) @ v.float()
    ref_lse = torch.logsumexp(s, dim=-1) / math.log(2)  # the kernel stores log2-sum-exp
    err = (o.float() - ref).abs().max().item()
    lse_err = (lse.view(Z, H, N_CTX) - ref_lse).abs().max().item()
    print(f"fa_fwd Z={Z} H={H} N_CTX={N_CTX} D={D} sm{cap}: max abs err {err:.4f}, lse err {lse_err:.4f}")
    assert torch.allclose(o.float(), ref, atol=2e-2, rtol=0), err
    assert lse_err < 1e-2, lse_err


if __name__ == "__main__":
    check_matmul()
    check_fa()
    print("OK")
