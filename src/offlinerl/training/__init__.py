"""Training: ``Algorithm`` (the thin control plane of a job, offline or online), checkpoints (the one writer and
reader), and what an online job adds: ``OnlineConfig``, online experience, the recording and the policy gate."""
