import torch


def hard_update(target, source):
    for target_param, param in zip(target.parameters(), source.parameters()):
        target_param.data = param.data


actor, actor_target = Actor(), Actor()
hard_update(actor_target, actor)
actor_optim = torch.optim.Adam(actor.parameters(), lr=1e-4)
