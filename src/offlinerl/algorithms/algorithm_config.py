"""``AlgorithmConfig``: the frozen, keyword-only, documented config every algorithm extends.

Overrides go through ``dataclasses.replace``; ``from_dict`` / ``from_file`` load
YAML or JSON with every value checked; ``to_dict`` is what run directories and
checkpoints store.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Literal, Mapping, Sequence

from offlinerl.config_io import ConfigError, check, from_dict, to_dict
from offlinerl.core.devices import DEVICE_PATTERN, is_cuda
from offlinerl.core.metrics import MAX_EVAL_EPISODES
from offlinerl.core.policy_mapping import AgentToModule, policy_mapping_problem
from offlinerl.trusted import load_config_file
from offlinerl.data.config import DataConfig

if TYPE_CHECKING:
    import gymnasium as gym

    from offlinerl.api.trainer import Trainer
    from offlinerl.connectors import ConnectorV2
    from offlinerl.core.rl_module import MultiRLModuleSpec

__all__ = ["AlgorithmConfig", "ModelConfig", "EvaluationConfig", "ConfigError"]

#: Estimators ``evaluation.ope`` may name (``offlinerl.evaluation.ope.run.METHODS``, which a test keeps equal).
OPE_METHODS = ("fqe", "is", "wis", "pdis", "dr")


@dataclass(frozen=True, kw_only=True)
class ModelConfig:
    """Architecture of the stock module (``DefaultRLModule``); custom modules read what they need."""

    hidden: tuple[int, ...] = (256, 256)
    """Widths of the hidden layers of every MLP (policy, value, critics)."""
    activation: str = "relu"
    """Activation between layers: relu, tanh, elu, silu or gelu."""
    encoder: Literal["auto", "mlp", "cnn"] = "auto"
    """Observation encoder: "cnn" for HxWxC image observations, "mlp" otherwise; "auto" picks by shape."""
    cnn_channels: tuple[int, ...] = (16, 32)
    """Channels of the CNN encoder's conv layers (3x3, stride 2)."""
    cnn_out: int = 256
    """Width of the CNN encoder's output layer."""
    cnn_scale: float = 1.0
    """Factor applied to image pixels before the CNN (1/255 for uint8 images)."""
    extra: dict[str, Any] = field(default_factory=dict)
    """Free-form keys passed on to a custom module's ``model_config``."""

    def __post_init__(self) -> None:
        check(all(h > 0 for h in self.hidden), "model.hidden", f"widths must be positive, got {self.hidden}")
        check(self.activation in ("relu", "tanh", "elu", "silu", "gelu"), "model.activation", f"unknown {self.activation!r}")

    def to_module_config(self) -> dict[str, Any]:
        d = {k: v for k, v in to_dict(self).items() if k != "extra"}
        return {**d, **self.extra}


@dataclass(frozen=True, kw_only=True)
class EvaluationConfig:
    """Evaluation in the real environment through ``forward_inference``."""

    env: str | None = None
    """Gymnasium env id; None = the dataset's ``env_id``."""
    env_kwargs: dict[str, Any] = field(default_factory=dict)
    """Keyword arguments for ``gymnasium.make``."""
    episodes: int = 10
    """Episodes per evaluation (run side by side, one env each, seeds ``seed, seed+1, ...``)."""
    interval: int = 1
    """Evaluate every this many training iterations (0 = only at the end)."""
    seed: int = 10_000
    """Seed of the first evaluation episode (fixed, so evaluations are comparable)."""
    ope: str | None = None
    """Select the job's checkpoint by this OPE estimator on ``data.holdout`` after training (fqe, is, wis,
    pdis, dr; see docs/ope.md); None = no selection."""
    ope_updates: int = 10_000
    """FQE gradient steps per scored checkpoint (fqe and dr; the default is `FQEConfig`'s)."""

    def __post_init__(self) -> None:
        check(1 <= self.episodes <= MAX_EVAL_EPISODES, "evaluation.episodes",
              f"must be between 1 and {MAX_EVAL_EPISODES:,}, got {self.episodes}")
        check(self.seed >= 0, "evaluation.seed", f"must be >= 0 (gymnasium's reset seeds), got {self.seed}")
        check(self.interval >= 0, "evaluation.interval", f"must be >= 0, got {self.interval}")
        check(self.ope is None or self.ope in OPE_METHODS, "evaluation.ope",
               f"unknown estimator {self.ope!r}; choose among {', '.join(OPE_METHODS)}")
        check(self.ope_updates >= 1, "evaluation.ope_updates", f"must be >= 1, got {self.ope_updates}")


@dataclass(frozen=True, kw_only=True)
class AlgorithmConfig:
    """Settings shared by every algorithm; an algorithm's config subclasses this."""

    seed: int = 0
    """Seeds module initialisation, minibatch sampling and evaluation."""
    num_seeds: int = 1
    """Train this many independent replicas, seeds ``seed, seed+1, ..., seed+num_seeds-1``, as one vectorised
    learner in one process (``offlinerl.core.seed_stack``): parameters stacked on a leading seed dimension, every
    replica exactly its single-seed run (``offlinerl train`` writes ``seed-<s>/`` run directories inside the run
    directory, each laid out as a single run; docs/training.md). In-memory data and ``num_learners: 0`` only;
    MARWIL and ``share_encoder`` cannot."""
    lr: float = 3e-4
    """Learning rate of the default optimizer(s)."""
    train_batch_size: int = 256
    """Transitions per gradient update, per learner."""
    updates_per_iteration: int = 500
    """Gradient updates per ``training_step`` (one Ray call per learner)."""
    grad_clip: float | None = None
    """Clip each optimizer's gradient to this global norm (None = no clipping)."""
    gamma: float = 0.99
    """Discount factor."""
    normalize_observations: bool = False
    """Normalise observations with dataset statistics (same state on the learner and env sides)."""
    share_encoder: bool = False
    """Multi-agent datasets: every module uses one policy encoder (the observation trunk before the policy head;
    ``SHARED_ENCODERS``), stepped once per update on the sum of every module's loss; each module keeps its own
    heads, critics and value networks (docs/multi-agent.md). Refused for one module or an algorithm that cannot."""
    policy_mapping: str | dict[str, str] | None = None
    """Multi-agent datasets: which module learns from and acts for each agent. None: a row's ``module_id``, else
    its ``agent_id`` (one module per id; in the env, agent ``a`` -> module ``a``); a module id (``shared``): one
    module for every agent; ``{glob pattern: module id}`` (``{"adversary_*": adversary, "agent_*": good}``): the
    first pattern matching the agent id, an agent none matches being an error. Applied to a row's ``agent_id``
    (else its ``module_id``), overriding its ``module_id`` (``offlinerl.core.policy_mapping``)."""
    num_learners: int = 0
    """0 = learn in this process; m >= 1 = m Ray actors with torch.distributed (DDP semantics)."""
    num_cpus_per_learner: float = 1
    """CPUs each learner reserves and uses (torch threads = ceil of it)."""
    num_gpus_per_learner: float = 0
    """GPUs per learner (NCCL when > 0); the in-memory data then lives on the GPU."""
    device: str | None = None
    """Where the learners compute: ``cpu``, ``cuda`` or ``cuda:N`` (``--device``); None: a GPU when
    ``num_gpus_per_learner > 0``, else the CPU. ``cuda`` with remote learners reserves one GPU per learner (unless
    ``num_gpus_per_learner`` says how many); ``cuda:N`` picks GPU N for the in-process learner (remote ones use
    the GPU Ray gives them)."""
    compile: bool = False
    """``torch.compile`` each learner's loss computation (the forwards and the loss maths; the backward follows
    through AOTAutograd), for GPUs: on this 2-core CPU it made IQL slower (77 against 114 updates/s) after ~20 s of
    compiling, and it computes the same losses to float rounding (tests/core/test_compile.py)."""
    precision: str = "fp32"
    """``fp32``, or ``bf16``: each learner's forwards and losses under ``torch.autocast`` to bfloat16, so the hidden
    layers' matmuls run in bfloat16 (float32 accumulation) while the weights, gradients, optimizer state and every
    network's output layer (``networks.Head``: Q and V estimates, distribution parameters) stay float32. For CPUs with
    bfloat16 matmul units (AMX, AVX512-BF16) and GPUs, and large matmuls: on this machine's CPU (AMX) ReBRAC's update at
    batch 1024 ran 1.4x as fast and CQL's 1.8x, updates at batch 256 0.9x; with ``num_seeds > 1`` the stacked update too
    (three ReBRAC seeds at batch 1024: 1.37x). Results differ from ``fp32`` by bfloat16's rounding (docs/scaling.md,
    "Precision")."""
    learner_placement: str = "spread"
    """Where Ray starts the learner actors: ``spread`` over the cluster's nodes (a placement group with Ray's SPREAD
    strategy: one per node while nodes have room, what scaling out on CPUs is for) or ``default`` (Ray's default policy, which
    fills the driver's node first: e.g. several GPUs of one machine, where NCCL stays inside the node)."""
    model: ModelConfig = field(default_factory=ModelConfig)
    """Network architecture."""
    data: DataConfig = field(default_factory=DataConfig)
    """Data settings: how the dataset is read and batched (``DataConfig``)."""
    evaluation: EvaluationConfig = field(default_factory=EvaluationConfig)
    """Evaluation settings."""

    SHARED_ENCODERS: ClassVar[tuple[str, ...]] = ()
    """Not a setting: the submodules of the algorithm's module that ``share_encoder`` shares (an algorithm's config
    class declares them, e.g. BC's ``("pi_encoder",)``); () = the algorithm cannot share."""

    def __post_init__(self) -> None:
        check(self.lr > 0, "lr", f"must be positive, got {self.lr}")
        check(self.num_seeds >= 1, "num_seeds", f"must be >= 1, got {self.num_seeds}")
        check(not self.share_encoder or bool(self.SHARED_ENCODERS), "share_encoder",
              f"{type(self).__name__} declares no encoder its modules can share (SHARED_ENCODERS is empty)")
        problem = policy_mapping_problem(self.policy_mapping)
        check(problem is None, "policy_mapping", str(problem))
        check(self.train_batch_size >= 1, "train_batch_size", f"must be >= 1, got {self.train_batch_size}")
        check(self.updates_per_iteration >= 1, "updates_per_iteration", f"must be >= 1, got {self.updates_per_iteration}")
        check(self.grad_clip is None or self.grad_clip > 0, "grad_clip", f"must be positive or null, got {self.grad_clip}")
        check(0.0 <= self.gamma <= 1.0, "gamma", f"must be in [0, 1], got {self.gamma}")
        check(self.num_learners >= 0, "num_learners", f"must be >= 0, got {self.num_learners}")
        check(self.num_cpus_per_learner > 0, "num_cpus_per_learner", f"must be positive, got {self.num_cpus_per_learner}")
        check(self.num_gpus_per_learner >= 0, "num_gpus_per_learner", f"must be >= 0, got {self.num_gpus_per_learner}")
        check(self.device is None or DEVICE_PATTERN.fullmatch(self.device) is not None, "device",
              f"'cpu', 'cuda' or 'cuda:N', got {self.device!r}")
        check(not (self.device == "cpu" and self.num_gpus_per_learner > 0), "device",
              f"'cpu' with num_gpus_per_learner={self.num_gpus_per_learner:g}; drop one of them")
        check(self.precision in ("fp32", "bf16"), "precision", f"'fp32' or 'bf16', got {self.precision!r}")
        check(self.learner_placement in ("spread", "default"), "learner_placement",
               f"'spread' or 'default', got {self.learner_placement!r}")
        check(self.evaluation.ope is None or self.data.holdout is not None, "evaluation.ope",
               "selection by OPE scores checkpoints on held-out episodes; set data.holdout (e.g. "
               "data: {holdout: {fraction: 0.2}}, or --set config.data.holdout.fraction=0.2)")

    @property
    def learner_gpus(self) -> float:
        """GPUs each learner reserves: ``num_gpus_per_learner``, else 1 when ``device`` is a GPU."""
        return self.num_gpus_per_learner or (1.0 if is_cuda(self.device) else 0.0)

    @property
    def learner_device(self) -> str:
        """Where the learners compute, as ``result.json`` records it: ``device``, else ``cuda`` when GPUs are
        reserved, else ``cpu``."""
        return self.device or ("cuda" if self.num_gpus_per_learner > 0 else "cpu")

    @property
    def agent_to_module(self) -> AgentToModule | None:
        """``policy_mapping`` as the ``MultiRLModuleSpec``'s agent -> module callable (None: no mapping)."""
        return None if self.policy_mapping is None else AgentToModule.of(self.policy_mapping)

    # -- what an algorithm customises -------------------------------------------------------------
    def module_config(self) -> dict[str, Any]:
        """``model_config`` passed to the module (algorithms add e.g. ``value_head``)."""
        return self.model.to_module_config()

    def module_spec(self, module_class: type, observation_space: "gym.Space", action_space: "gym.Space",
                    module_ids: Sequence[str],
                    module_spaces: Mapping[str, tuple["gym.Space", "gym.Space"]] | None = None) -> "MultiRLModuleSpec":
        """The job's ``MultiRLModuleSpec``: one module of ``module_class`` per module id, each with
        ``module_config()``, agents mapped to modules by ``policy_mapping``; with ``share_encoder``, all holding one
        ``SHARED_ENCODERS`` each. ``ConfigError`` for ``share_encoder`` with fewer than two modules. Each module
        acts in the two spaces given, or in its own (``module_spaces``: agents of different spaces)."""
        from offlinerl.core.rl_module import MultiRLModuleSpec, RLModuleSpec

        check(not self.share_encoder or len(module_ids) >= 2, "share_encoder",
              f"needs a multi-agent dataset (two or more modules, by agent_id or module_id), this one has "
              f"{list(module_ids)}{' (policy_mapping)' if self.policy_mapping is not None else ''}; "
              "set share_encoder: false")
        spaces = dict(module_spaces or {})
        specs = {mid: RLModuleSpec(module_class, *spaces.get(mid, (observation_space, action_space)), self.module_config())
                 for mid in module_ids}
        return MultiRLModuleSpec(specs, self.agent_to_module, shared=self.SHARED_ENCODERS if self.share_encoder else ())

    def learner_connectors(self, observation_space: "gym.Space", action_space: "gym.Space") -> list["ConnectorV2"]:
        """Episode rows -> train batch, before observation flattening/normalisation (added by
        ``connectors.learner_pipeline``). Default: transitions and next observations."""
        from offlinerl.connectors import transition_connectors

        return transition_connectors()

    # -- loading and saving --------------------------------------------------------------------
    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "AlgorithmConfig":
        return from_dict(cls, data)

    @classmethod
    def from_file(cls, path: str | Path) -> "AlgorithmConfig":
        return from_dict(cls, load_config_file(path))

    def to_dict(self) -> dict[str, Any]:
        return to_dict(self)

    def replace(self, **changes: Any) -> "AlgorithmConfig":
        return dataclasses.replace(self, **changes)

    # -- the Python API ---------------------------------------------------------------------------
    def build(self, dataset: str | Path, *, algorithm: str | None = None, **options: Any) -> "Trainer":
        """This config's algorithm on the episode dataset ``dataset``, ready to ``fit``, ``evaluate`` and ``predict``
        (``offlinerl.api.Trainer``; ``options``: its keywords, e.g. ``address``, ``validate_data``). ``algorithm``:
        the registered name, found from the config class when not given."""
        from offlinerl.algorithms.registry import algorithm_of_config
        from offlinerl.api.trainer import Trainer  # the Python API's one entry from below (tests/test_layers.py)

        if algorithm is None:
            try:
                algorithm = algorithm_of_config(type(self))
            except KeyError as exc:
                raise ValueError(exc.args[0]) from None
        return Trainer(algorithm, self, dataset, **options)
