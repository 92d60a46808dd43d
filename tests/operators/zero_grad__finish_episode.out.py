import torch
from torch.distributions import Categorical

GAMMA = 0.99
policy = torch.nn.Sequential(torch.nn.Linear(4, 64), torch.nn.ReLU(), torch.nn.Linear(64, 2))
optimizer = torch.optim.Adam(policy.parameters(), lr=1e-2)
saved_log_probs, rewards = [], []


def select_action(state):
    dist = Categorical(logits=policy(state))
    action = dist.sample()
    saved_log_probs.append(dist.log_prob(action))
    return action.item()


def finish_episode():
    returns, running = [], 0.0
    for r in reversed(rewards):
        running = r + GAMMA * running
        returns.insert(0, running)
    returns = torch.tensor(returns)
    returns = (returns - returns.mean()) / (returns.std() + 1e-8)
    policy_loss = -(torch.stack(saved_log_probs) * returns).sum()
    policy_loss.backward()
    optimizer.step()
    saved_log_probs.clear()
    rewards.clear()


for episode in range(200):
    state = torch.randn(4)
    for t in range(50):
        action = select_action(state)
        state = torch.randn(4)
        rewards.append(1.0 if action == int(state[0] > 0) else 0.0)
    finish_episode()
