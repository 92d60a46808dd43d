# expect:
"""WGAN-GP on a 2-D mixture of Gaussians on a ring."""
import math

import torch
import torch.nn as nn

torch.manual_seed(0)
MODES = torch.tensor([[math.cos(2 * math.pi * i / 4), math.sin(2 * math.pi * i / 4)] for i in range(4)]) * 2.0


def real_batch(n):
    return MODES[torch.randint(0, 4, (n,))] + 0.1 * torch.randn(n, 2)


Z = 8
G = nn.Sequential(nn.Linear(Z, 48), nn.ReLU(), nn.Linear(48, 48), nn.ReLU(), nn.Linear(48, 2))
Dn = nn.Sequential(nn.Linear(2, 48), nn.ReLU(), nn.Linear(48, 48), nn.ReLU(), nn.Linear(48, 1))
opt_g = torch.optim.Adam(G.parameters(), lr=1e-3, betas=(0.5, 0.9))
opt_d = torch.optim.Adam(Dn.parameters(), lr=1e-3, betas=(0.5, 0.9))
n_critic, lam, B = 3, 1.0, 64


def gradient_penalty(critic, real, fake):
    eps = torch.rand(real.size(0), 1)
    interp = (eps * real + (1 - eps) * fake).requires_grad_(True)
    out = critic(interp)
    grads, = torch.autograd.grad(out.sum(), interp, create_graph=True)
    return ((grads.norm(2, dim=1) - 1) ** 2).mean()


def mode_distance(n=1000):
    """Mean distance from generated points to the nearest mode (lower is better)."""
    with torch.no_grad():
        x = G(torch.randn(n, Z))
    return torch.cdist(x, MODES).min(1).values.mean().item()


print(f"start: mean distance to nearest mode {mode_distance():.3f}")
for it in range(100):
    for _ in range(n_critic):
        real = real_batch(B)
        with torch.no_grad():
            fake = G(torch.randn(B, Z))
        d_loss = Dn(fake).mean() - Dn(real).mean() + lam * gradient_penalty(Dn, real, fake)
        opt_d.zero_grad()
        d_loss.backward()
        opt_d.step()
    fake = G(torch.randn(B, Z))
    g_loss = -Dn(fake).mean()
    opt_g.zero_grad()
    g_loss.backward()
    opt_g.step()
    if it % 40 == 39:
        print(f"it {it + 1} d_loss {d_loss.item():.3f} g_loss {g_loss.item():.3f} dist {mode_distance():.3f}")
