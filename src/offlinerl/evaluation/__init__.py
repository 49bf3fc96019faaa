"""Evaluation of a trained policy: in its recorded task (``evaluate``), acting with a checkpoint's policy in env
runners (``acting``), and off-policy evaluation on a dataset without the env (``ope``)."""
