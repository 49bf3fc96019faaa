"""Benchmark suites made here (D4RL-style families), their generators and `offlinerl benchmark`."""
