"""Closed-form estimates: memory by category, activations, optimizer states, step time."""
