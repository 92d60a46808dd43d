import torch
import torchvision_that_is_not_installed  # noqa: F401
