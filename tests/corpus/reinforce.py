# expect:
"""REINFORCE on a tiny contextual gridworld: reach the goal cell on a 5x5 grid within 12 moves."""
import torch
import torch.nn as nn

torch.manual_seed(0)
N, HORIZON = 4, 10
MOVES = torch.tensor([[0, 1], [0, -1], [1, 0], [-1, 0]])
GAMMA, BATCH = 0.95, 32


def observe(pos, goal):
    return torch.cat([pos, goal], -1).float() / (N - 1)


def run_episodes(policy, n):
    """Play n episodes side by side; return per-step log-probs, rewards and alive masks."""
    pos = torch.randint(0, N, (n, 2))
    goal = torch.randint(0, N, (n, 2))
    done = torch.zeros(n, dtype=torch.bool)
    log_probs, rewards, alive = [], [], []
    for t in range(HORIZON):
        dist = torch.distributions.Categorical(logits=policy(observe(pos, goal)))
        a = dist.sample()
        log_probs.append(dist.log_prob(a))
        alive.append((~done).float())
        pos = torch.where(done[:, None], pos, (pos + MOVES[a]).clamp(0, N - 1))
        reached = (pos == goal).all(1) & ~done
        rewards.append(reached.float() - 0.02 * (~done).float())
        done = done | reached
    return torch.stack(log_probs, 1), torch.stack(rewards, 1), torch.stack(alive, 1), done


def discounted(rewards):
    out = torch.zeros_like(rewards)
    running = torch.zeros(rewards.shape[0])
    for t in reversed(range(rewards.shape[1])):
        running = rewards[:, t] + GAMMA * running
        out[:, t] = running
    return out


policy = nn.Sequential(nn.Linear(4, 64), nn.Tanh(), nn.Linear(64, 4))
opt = torch.optim.Adam(policy.parameters(), lr=1e-2)
for it in range(50):
    log_probs, rewards, alive, success = run_episodes(policy, BATCH)
    returns = discounted(rewards)
    valid = alive.bool()
    r = returns[valid]
    norm = torch.zeros_like(returns)
    norm[valid] = (r - r.mean()) / (r.std() + 1e-8)
    loss = -(log_probs * norm * alive).sum() / BATCH
    opt.zero_grad()
    loss.backward()
    opt.step()
    if it % 10 == 9:
        print(f"it {it + 1} loss {loss.item():.3f} success {success.float().mean():.2f} "
              f"return {rewards.sum(1).mean():.3f}")
