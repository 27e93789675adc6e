"""Measured on the device at hand: the profiler, devices (NVML, torch.cuda), reports, many ranks."""
