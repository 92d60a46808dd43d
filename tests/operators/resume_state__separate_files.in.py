import torch


def save_checkpoint(net, opt, sched, folder):
    torch.save(net.state_dict(), f"{folder}/net.pt")
    torch.save(opt.state_dict(), f"{folder}/opt.pt")
    torch.save(sched.state_dict(), f"{folder}/sched.pt")


def load_checkpoint(net, opt, sched, folder):
    net.load_state_dict(torch.load(f"{folder}/net.pt"))
    # the rest of the training state
    opt.load_state_dict(torch.load(f"{folder}/opt.pt"))
    sched.load_state_dict(torch.load(f"{folder}/sched.pt"))
    return net, opt, sched
