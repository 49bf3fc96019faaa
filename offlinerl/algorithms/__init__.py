"""Algorithms: ``Algorithm`` + ``AlgorithmConfig`` and one folder per algorithm (bc, marwil, cql, iql, td3bc)."""
