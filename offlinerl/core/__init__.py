<<<<<<< HEAD
"""Core training pieces (placeholder until training-core merges)."""
=======
"""Core training protocols: RLModule, Learner, LearnerGroup, losses, networks."""
>>>>>>> training-core
