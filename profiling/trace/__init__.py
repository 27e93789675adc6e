"""Fake-tensor traces of a training step: the tracker, block scaling, reports of a run."""
