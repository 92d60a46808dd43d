from copy import copy, deepcopy

import torch

ac = ActorCritic(obs_dim, act_dim)
ac_targ = copy(ac)
for p in ac_targ.parameters():
    p.requires_grad = False
pi_optimizer = torch.optim.Adam(ac.pi.parameters(), lr=1e-3)
q_optimizer = torch.optim.Adam(ac.q.parameters(), lr=1e-3)


def update(data):
    q_optimizer.zero_grad()
    loss_q = compute_loss_q(data)
    loss_q.backward()
    q_optimizer.step()


def compute_loss_q(data):
    q = ac.q(data["obs"], data["act"])
    with torch.no_grad():
        backup = data["rew"] + 0.99 * (1 - data["done"]) * ac_targ.q(data["obs2"], ac_targ.pi(data["obs2"]))
    return ((q - backup) ** 2).mean()


for t in range(total_steps):
    update(replay.sample_batch(100))
