"""Torch DDP: data-parallel training with torch.distributed (gloo, CPU) and mp.spawn.

The only sample that imports torch; nothing imports it at package import time.
"""
