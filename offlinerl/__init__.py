"""offlinerl: offline-first, data-centric reinforcement learning on Ray Data and PyTorch."""

__version__ = "0.1.0"
