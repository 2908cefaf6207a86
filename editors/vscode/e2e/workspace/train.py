import torch


def blank(x):
    return x + torch.ones(x.shape)


def move(x):
    y = x.cuda()
    return y
