"""Algorithms: each a folder of config, losses, learner and module."""
