"""The models a step runs: reference workloads as plain data, their torch blocks, user factories."""
