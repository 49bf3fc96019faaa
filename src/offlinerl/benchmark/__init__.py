"""Benchmark suites made here (D4RL-style families), their generators and `offlinerl benchmark`.

- :mod:`offlinerl.benchmark.suites`: which datasets a suite holds and how each is got, scored and trained.
- :mod:`offlinerl.benchmark.maze`: the maze-stitching family (PointMaze with the D4RL maze2d recipe): a seeded
  waypoint-controller generator and the reference returns of each maze's evaluation task (needs
  ``gymnasium-robotics``: ``pip install 'offlinerl[suite]'``).
- :mod:`offlinerl.benchmark.cards`: dataset cards and checksums of generated datasets.

Nothing is imported here, so ``import offlinerl.benchmark`` works without the optional env packages.
"""

#: Sizes of generated datasets (``SuiteDataset.steps``): ``tiny`` for CI, ``small``, ``full`` = the published size.
#: Here, not in :mod:`offlinerl.benchmark.suites`, so the command line offers them without importing a suite.
SIZES = ("tiny", "small", "full")
