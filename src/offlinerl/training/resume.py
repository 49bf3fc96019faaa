"""An ``Algorithm``'s state to and from a checkpoint: what ``algorithm.json`` records, and restoring it.

``metadata`` is what ``Algorithm.save_checkpoint`` hands ``write_checkpoint`` besides the tensors;
``restore`` loads a checkpoint into a built ``Algorithm``: resuming (``resume=True``: every piece of state,
counters, samplers, an online job's replay) so the job continues exactly as the uninterrupted job would, or
starting a new job from the checkpoint's weights, optimizers, learner and connector state (``resume=False``:
counters from 0, updates continue, batch sources and replays fresh; e.g. fine-tuning an offline checkpoint).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Mapping

from offlinerl.config_io import to_dict
from offlinerl.episodes.agent_spaces import agent_spaces_json
from offlinerl.episodes.spaces import space_to_json
from offlinerl.training.checkpoint import Checkpoint, CheckpointError, class_path

if TYPE_CHECKING:
    from offlinerl.training.algorithm import Algorithm

__all__ = ["check_online_resume", "metadata", "new_job_state", "restore"]


def metadata(algo: "Algorithm") -> dict[str, Any]:
    """What ``algorithm.json`` holds besides the format fields (see ``offlinerl.training.checkpoint``)."""
    info = algo.offline_data.info
    return {
        "algorithm": algo.name,
        "config": algo.config.to_dict(),
        "dataset": algo.dataset,
        "dataset_fingerprint": info.fingerprint,
        "env_id": info.env_id,
        "env_kwargs": algo.eval_env_kwargs() if algo.can_evaluate else {},
        "observation_space": space_to_json(info.observation_space),
        "action_space": space_to_json(info.action_space),
        "module_class": class_path(algo.module_class),
        "module_ids": list(algo.offline_data.module_ids),
        "learner_class": class_path(algo.learner_class),
        "connector_state": algo.offline_data.connector_state(),
        "iteration": algo.iteration,
        "num_updates": algo.num_updates,
        "env_steps": algo.env_steps,
        "weights_seq_no": algo.weights_seq_no,
        "best_eval_return": algo.best_eval_return,
        "last_eval": algo.last_eval,
        **({} if not algo.offline_data.agent_spaces_differ else
           {"module_spaces": agent_spaces_json(algo.offline_data.module_spaces)}),
        **({} if algo.online is None else {"online": to_dict(algo.online)}),
        **({} if algo.gate is None or algo.gate.weights is None else {"gate": algo.gate.metadata()}),
    }


def restore(algo: "Algorithm", ckpt: Checkpoint, *, resume: bool = True) -> None:
    """Load the checked checkpoint ``ckpt`` into ``algo`` (``resume``: see the module docstring)."""
    ckpt.trained_module  # noqa: B018 - shapes and finiteness, with a clear message, before the learners
    ckpt.env_to_modules()  # checks the connector state (e.g. normaliser statistics) before the data uses it
    replay = None
    if resume and algo.experience is not None:
        check_online_resume(ckpt)
        replay = ckpt.replay_episodes()  # every file checked before any state changes
    algo.offline_data.set_connector_state(ckpt.connector_state)
    algo.env_to_module = None if algo.offline_data.multi_module else algo.offline_data.env_to_module_pipeline()
    state = ckpt.state if resume else new_job_state(ckpt.state, algo.learner_group.num_shards)
    algo.learner_group.set_state(state)
    deployed = ckpt.deployed_policy()
    if deployed is not None and not resume:  # a new job starts from the policy the old one deployed
        algo.learner_group.set_weights(deployed, strict=False)
    meta = ckpt.meta
    algo.num_updates = meta.num_updates
    algo.iteration = meta.iteration if resume else 0
    algo.env_steps = meta.env_steps if resume else 0
    algo.weights_seq_no = meta.weights_seq_no if resume else 0
    algo.best_eval_return = meta.best_eval_return if resume else None
    algo.last_eval = dict(meta.last_eval) if resume else {}
    if replay is not None:
        algo.experience.replay_size = algo.learner_group.restore_online(algo.experience.rebuild(replay))
    if algo.gate is not None and resume and deployed is not None:
        if not isinstance(meta.gate, dict):
            raise CheckpointError(f"{ckpt.path}: holds a deployed policy but algorithm.json has no gate record")
        algo.gate.restore(deployed, meta.gate)
    algo.sync_weights()


def check_online_resume(ckpt: Checkpoint) -> None:
    """Resuming an online job needs the replay only an online job's checkpoint holds."""
    if not ckpt.has_replay:
        raise CheckpointError(f"{ckpt.path}: holds no online replay (an offline job wrote it), so there is no online "
                              "job to resume; start fine-tuning from it instead (offlinerl finetune --from, or "
                              "from_checkpoint(..., resume=False))")


def new_job_state(state: Mapping[str, Any], num_learners: int) -> dict[str, Any]:
    """A checkpoint's LearnerGroup state for a new job: every learner gets the module, optimizers, counters and
    extra state (learner 0's where the new job has more learners), no batch-source state (the new job's sources
    start fresh), and its RNG state only where the number of learners is unchanged (else each replica keeps the
    stream it was seeded with)."""
    learners = state["learners"]
    out = []
    for i in range(num_learners):
        learner = dict(learners[min(i, len(learners) - 1)]["learner"])
        if len(learners) != num_learners:
            learner.pop("rng", None)
        out.append({"learner": learner})
    return {"num_learners": state.get("num_learners"), "learners": out}
