import torch
import torch.nn as nn

TARGET_UPDATE = 10


def optimize(policy, target, optimizer, batch):
    states, actions, targets_from = batch
    with torch.no_grad():
        expected = targets_from(target)
    loss = nn.functional.smooth_l1_loss(policy(states).gather(1, actions), expected)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()


for i_episode in range(300):
    for t in range(200):
        optimize(policy_net, target_net, optimizer, next(batches))
    if i_episode % TARGET_UPDATE == 0:
        target_net.load_state_dict(policy_net.state_dict())
