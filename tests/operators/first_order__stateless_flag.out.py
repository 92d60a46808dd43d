import torch
from torch.nn.utils.stateless import functional_call


def inner_loop(model, loss_fn, support, steps, alpha, second_order):
    fast = {n: p for n, p in model.named_parameters()}
    for _ in range(steps):
        loss = loss_fn(functional_call(model, fast, support[0]), support[1])
        grads = torch.autograd.grad(loss, fast.values(), create_graph=second_order)
        fast = {n: p - alpha * g for (n, p), g in zip(fast.items(), grads)}
    return fast


def outer_loss(model, loss_fn, task, steps=5, alpha=0.01):
    support, query = task
    fast = inner_loop(model, loss_fn, support, steps, alpha, second_order=False)
    return loss_fn(functional_call(model, fast, query[0]), query[1])


def evaluate(model, loss_fn, task):
    support, query = task
    fast = inner_loop(model, loss_fn, support, 10, 0.01, second_order=False)
    with torch.no_grad():
        return loss_fn(functional_call(model, fast, query[0]), query[1]).item()
