"""Core training protocols: RLModule, Learner, LearnerGroup, losses, networks."""
