"""kaio's RMSNorm inside a PyTorch training step: forward and backward are kaio kernels.

    python examples/rmsnorm_training.py [--steps 200]              # CUDA tensors, kaio's cuda backend
    KAIO_BACKEND=reference python examples/rmsnorm_training.py --steps 20 --dim 64   # CPU tensors

``kaio.kernels.ml.torch_ops`` registers the library's ML ops as PyTorch custom operators with
autograd (``torch.ops.kaio.rmsnorm`` and its backward, both kaio kernels). They take torch
tensors as they are (no copies), run on torch's current stream, and work under ``torch.compile``
as opaque nodes. CUDA tensors need kaio's cuda backend, CPU tensors its reference backend.

The script trains a small regression model (Linear -> kaio RMSNorm -> SiLU -> Linear) with
AdamW, checks first that one forward and backward match the same model built on torch's own
operations, and then that the loss falls. Needs torch (``pip install kaio[torch]``).
"""
from __future__ import annotations

import argparse
import sys

import kaio


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description="kaio RMSNorm in a torch training step")
    p.add_argument("--steps", type=int, default=200, help="optimizer steps (default 200)")
    p.add_argument("--dim", type=int, default=1024, help="hidden width (default 1024)")
    p.add_argument("--batch", type=int, default=256, help="rows per batch (default 256)")
    args = p.parse_args(argv)
    try:
        import torch

        from kaio.kernels.ml import torch_ops  # noqa: F401  (registers torch.ops.kaio.*)
    except ImportError as e:
        print(f"rmsnorm_training needs PyTorch: {e}", file=sys.stderr)
        return 2

    backend = kaio.get_backend().name
    device = {"cuda": "cuda", "hip": "cuda", "reference": "cpu"}[backend]
    torch.manual_seed(0)

    class KaioRMSNorm(torch.nn.Module):
        def __init__(self, dim: int, eps: float = 1e-6):
            super().__init__()
            self.weight = torch.nn.Parameter(torch.ones(dim))
            self.eps = eps

        def forward(self, x):
            return torch.ops.kaio.rmsnorm(x, self.weight, self.eps)

    class TorchRMSNorm(KaioRMSNorm):       # the same thing in torch's own ops, to compare with
        def forward(self, x):
            return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight

    def model(norm):
        return torch.nn.Sequential(torch.nn.Linear(args.dim, args.dim), norm(args.dim),
                                   torch.nn.SiLU(), torch.nn.Linear(args.dim, 1)).to(device)

    net, ref = model(KaioRMSNorm), model(TorchRMSNorm)
    ref.load_state_dict(net.state_dict())
    w_true = torch.randn(args.dim, 1, device=device) / args.dim ** 0.5

    def batch():
        x = torch.randn(args.batch, args.dim, device=device)
        return x, torch.tanh(x @ w_true)

    # 1. one forward and backward against torch's own RMSNorm
    x, y = batch()
    for m in (net, ref):
        torch.nn.functional.mse_loss(m(x), y).backward()
    gk, gt = net[1].weight.grad, ref[1].weight.grad
    worst = float((gk - gt).abs().max() / gt.abs().max())
    if worst > 1e-4:
        raise SystemExit(f"rmsnorm_training: kaio's weight gradient differs from torch's by {worst:.2e}")
    net.zero_grad()

    # 2. train
    opt = torch.optim.AdamW(net.parameters(), lr=1e-3)
    losses = []
    for _ in range(args.steps):
        x, y = batch()
        loss = torch.nn.functional.mse_loss(net(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    first, last = sum(losses[:5]) / 5, sum(losses[-5:]) / 5
    if not last < 0.8 * first:
        raise SystemExit(f"rmsnorm_training: the loss did not fall ({first:.4f} -> {last:.4f})")
    print(f"rmsnorm_training on {backend} ({device} tensors): gradients match torch within "
          f"{worst:.1e}; loss {first:.4f} -> {last:.4f} in {args.steps} steps")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
