"""Algorithms: what differs per algorithm. ``AlgorithmConfig`` (the config base), the registry, shared
actor-critic pieces, and one folder per algorithm (bc, marwil, cql, iql, td3bc, rebrac)."""
