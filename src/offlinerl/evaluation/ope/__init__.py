"""Off-policy evaluation: estimate a checkpoint's value from a dataset, without its env."""
