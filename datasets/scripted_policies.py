"""Scripted behaviour policies for the reference datasets.

A behaviour policy maps one observation and a numpy ``Generator`` to
``(action, logp)``: the action sent to the env and the log-probability (or
log-density) of that choice under the behaviour policy. Every policy also has
``mean_action(obs)``: its noise-free action, used to measure the "best
behaviour level" anchor of a dataset card.

Controllers (deterministic, noise-free):
- ``LinearSwitch``: CartPole bang-bang controller, push right iff ``k·s + b > 0``.
- ``Latched``: CartPole, one controller until the cart first leaves a band around the
  centre, another for the rest of the episode (stateful: build one per episode).
- ``EnergySwingUp``: Pendulum energy pumping far from upright, PD balance near it.
- ``LinearStateFeedback``: InvertedDoublePendulum cart, u = −K·[x, θ1, θ2, ẋ, θ̇1, θ̇2] + b,
  with K from ``double_pendulum_lqr_gains`` (discrete LQR on a finite-difference
  linearisation of the MuJoCo model about upright).
- ``HoldBeyond``: InvertedDoublePendulum, one controller near the centre; beyond
  |x| > limit the full-state feedback stops the cart and holds it at ±hold.

Exploration wrappers:
- ``EpsilonGreedy`` (discrete): with probability ε a uniformly random action,
  else the controller's; logp is exact: log((1-ε)·[a = a*] + ε/n).
- ``GaussianNoise`` (Box): a_raw = μ(s) + σ·N(0, I), sent clipped to the bounds;
  logp is the Gaussian log-density of a_raw *before clipping*
  (Σ_i −½((a_raw_i − μ_i)/σ)² − log σ − ½ log 2π). The stored action is the
  clipped one, so logp is not the density of the stored action where clipping
  happened (that density has atoms at the bounds).
- ``UniformRandom``: uniform over the action space; logp = −log n (Discrete)
  or −Σ log(high − low) (Box).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

__all__ = [
    "BehaviorPolicy",
    "Controller",
    "LinearSwitch",
    "Latched",
    "EnergySwingUp",
    "LinearStateFeedback",
    "HoldBeyond",
    "double_pendulum_lqr_gains",
    "EpsilonGreedy",
    "GaussianNoise",
    "UniformRandom",
]


class Controller(Protocol):
    """A deterministic scripted controller."""

    def __call__(self, obs: np.ndarray) -> Any: ...

    def describe(self) -> dict[str, Any]: ...


class BehaviorPolicy(Protocol):
    """What the collector runs: an action and its log-probability per step."""

    def act(self, obs: np.ndarray, rng: np.random.Generator) -> tuple[Any, float]: ...

    def mean_action(self, obs: np.ndarray) -> Any: ...

    def describe(self) -> dict[str, Any]: ...


# ---------------------------------------------------------------- controllers


@dataclass(frozen=True)
class LinearSwitch:
    """CartPole: action 1 (push right) iff ``gains · [x, ẋ, θ, θ̇] + bias > 0``."""

    gains: tuple[float, float, float, float]
    """Feedback gains on cart position, cart velocity, pole angle, pole angular velocity."""
    bias: float = 0.0
    """Constant offset; a positive bias keeps the pole up but lets the cart drift right."""

    def __call__(self, obs: np.ndarray) -> int:
        return int(float(np.dot(self.gains, obs)) + self.bias > 0.0)

    def describe(self) -> dict[str, Any]:
        return {"controller": "linear_switch", "gains": list(self.gains), "bias": self.bias}


class Latched:
    """CartPole: ``base`` until ``|x| > x_limit`` is first seen, then ``recovery`` for good.

    It never switches back, so the recovery controller returns the cart to the centre and
    keeps it there instead of chattering at the band's edge (as a controller that switched on
    |x| alone did in the first version of cartpole-mixed). It keeps state (whether it has
    switched): make a fresh one for every episode.
    """

    def __init__(self, base: LinearSwitch, recovery: LinearSwitch, x_limit: float) -> None:
        self.base = base
        self.recovery = recovery
        self.x_limit = x_limit
        self.switched = False

    def __call__(self, obs: np.ndarray) -> int:
        if abs(float(obs[0])) > self.x_limit:
            self.switched = True
        return self.recovery(obs) if self.switched else self.base(obs)

    def describe(self) -> dict[str, Any]:
        return {"controller": "latched", "base": self.base.describe(), "recovery": self.recovery.describe(),
                "x_limit": self.x_limit}


@dataclass(frozen=True)
class EnergySwingUp:
    """Pendulum (m = l = 1, g = 10): energy pumping, then PD balance near upright.

    Pumping: u = k_e · (E* − E) · sign(θ̇) with E = θ̇²/6 + 5 cos θ and E* = 5
    (the energy at rest upright) by default, clipped to ±``pump_torque``. Balance
    when cos θ > ``switch_cos``: u = −kp · θ − kd · θ̇. Torque clipped to ±``max_torque``.
    A small ``pump_torque`` swings up slowly: many swings before the top is reached.
    """

    k_energy: float = 2.0
    """Gain of the energy-pumping law."""
    kp: float = 10.0
    """Proportional gain of the balance law."""
    kd: float = 2.0
    """Derivative gain of the balance law."""
    switch_cos: float = 0.85
    """Balance when cos θ exceeds this; a high value catches late and overshoots."""
    max_torque: float = 2.0
    """Torque limit of the controller (the env allows ±2)."""
    target_energy: float = 5.0
    """E* of the pumping law; above 5 the pendulum is driven over the top and keeps spinning."""
    pump_torque: float = 2.0
    """Torque limit while pumping (at most ``max_torque``); below ~0.5 the swing-up takes 80+ steps."""

    def __call__(self, obs: np.ndarray) -> np.ndarray:
        cos_t, sin_t, omega = (float(v) for v in obs)
        if cos_t > self.switch_cos:
            u = -self.kp * math.atan2(sin_t, cos_t) - self.kd * omega
        else:
            energy = omega * omega / 6.0 + 5.0 * cos_t
            direction = 1.0 if omega >= 0.0 else -1.0
            u = self.k_energy * (self.target_energy - energy) * direction
            u = min(max(u, -self.pump_torque), self.pump_torque)
        return np.array([min(max(u, -self.max_torque), self.max_torque)], dtype=np.float64)

    def describe(self) -> dict[str, Any]:
        return {
            "controller": "energy_swing_up_pd_balance",
            "k_energy": self.k_energy, "kp": self.kp, "kd": self.kd,
            "switch_cos": self.switch_cos, "max_torque": self.max_torque, "target_energy": self.target_energy,
            "pump_torque": self.pump_torque,
        }


def double_pendulum_lqr_gains(
    q_diag: tuple[float, ...] = (1.0, 1.0, 1.0, 0.1, 0.1, 0.1), r: float = 1.0, iterations: int = 5000
) -> tuple[float, ...]:
    """Discrete LQR gains of InvertedDoublePendulum-v5 about upright, per env step (5 MuJoCo steps).

    A, B come from central finite differences of one env step of the real model
    (state [x, θ1, θ2, ẋ, θ̇1, θ̇2], action in env units); K from iterating the
    Riccati recursion P ← Q + Aᵀ P (A − B K), K = (R + Bᵀ P B)⁻¹ Bᵀ P A.
    """
    import gymnasium as gym
    import mujoco

    env = gym.make("InvertedDoublePendulum-v5")
    model, data = env.unwrapped.model, env.unwrapped.data
    frame_skip = env.unwrapped.frame_skip

    def step(x: np.ndarray, u: float) -> np.ndarray:
        mujoco.mj_resetData(model, data)
        data.qpos[:], data.qvel[:], data.ctrl[:] = x[:3], x[3:], u
        for _ in range(frame_skip):
            mujoco.mj_step(model, data)
        return np.concatenate([data.qpos, data.qvel])

    eps, x0 = 1e-5, np.zeros(6)
    a = np.stack([(step(x0 + eps * e, 0.0) - step(x0 - eps * e, 0.0)) / (2 * eps) for e in np.eye(6)], axis=1)
    b = ((step(x0, eps) - step(x0, -eps)) / (2 * eps)).reshape(6, 1)
    env.close()
    q, rr = np.diag(q_diag), np.array([[r]])
    p = q.copy()
    for _ in range(iterations):
        k = np.linalg.solve(rr + b.T @ p @ b, b.T @ p @ a)
        p = q + a.T @ p @ (a - b @ k)
    return tuple(round(float(v), 6) for v in k.ravel())


@dataclass(frozen=True)
class LinearStateFeedback:
    """InvertedDoublePendulum-v5: u = −K·[x, θ1, θ2, ẋ, θ̇1, θ̇2] + bias, clipped to ±1.

    Angles come from the observation's sines and cosines, velocities from its
    (clipped) qvel entries.
    """

    gains: tuple[float, ...]
    """K: gains on cart position, the two link angles, and their velocities."""
    bias: float = 0.0
    """Constant force offset; with no cart-position gain it makes the cart drift into the rail."""

    def __call__(self, obs: np.ndarray) -> np.ndarray:
        o = np.asarray(obs, dtype=np.float64)
        state = np.array([o[0], math.atan2(o[1], o[3]), math.atan2(o[2], o[4]), o[5], o[6], o[7]])
        return np.clip(np.array([-float(np.dot(self.gains, state)) + self.bias]), -1.0, 1.0)

    def describe(self) -> dict[str, Any]:
        return {"controller": "linear_state_feedback", "gains": list(self.gains), "bias": self.bias}


@dataclass(frozen=True)
class HoldBeyond:
    """InvertedDoublePendulum-v5: ``base`` while |x| ≤ ``limit``; beyond it u = −K·(s − s*) with s* = (±hold, 0, …).

    With ``hold > limit`` the cart is stopped and held on the side it drifted to,
    outside the limit, so the switch is permanent without any memory: a drifting
    ``base`` is rescued once, and the rescued states (cart at rest off-centre) are
    unlike the start states (cart at rest in the centre).
    """

    base: LinearStateFeedback
    """The controller used while the cart is within ``limit`` of the centre."""
    gains: tuple[float, ...]
    """K of the full-state feedback that takes over beyond the limit."""
    limit: float
    """Distance of the cart from the centre beyond which the full-state feedback acts."""
    hold: float
    """Distance from the centre at which the full-state feedback holds the cart (> ``limit``)."""

    def __call__(self, obs: np.ndarray) -> np.ndarray:
        x = float(obs[0])
        if abs(x) <= self.limit:
            return self.base(obs)
        shifted = np.array(obs, dtype=np.float64)
        shifted[0] = x - math.copysign(self.hold, x)
        return LinearStateFeedback(self.gains)(shifted)

    def describe(self) -> dict[str, Any]:
        return {"controller": "hold_beyond", "base": self.base.describe(), "gains": list(self.gains),
                "limit": self.limit, "hold": self.hold}


# ---------------------------------------------------------- exploration wrappers


@dataclass(frozen=True)
class EpsilonGreedy:
    """Discrete: a uniformly random action with probability ε, else the controller's."""

    controller: Controller
    """The greedy controller."""
    epsilon: float
    """Probability of a uniformly random action (it may coincide with the greedy one)."""
    num_actions: int
    """Size of the Discrete action space."""

    def act(self, obs: np.ndarray, rng: np.random.Generator) -> tuple[int, float]:
        greedy = self.controller(obs)
        explore = rng.random() < self.epsilon
        action = int(rng.integers(self.num_actions)) if explore else greedy
        p = self.epsilon / self.num_actions + (1.0 - self.epsilon) * (action == greedy)
        return action, math.log(p)

    def mean_action(self, obs: np.ndarray) -> int:
        return self.controller(obs)

    def describe(self) -> dict[str, Any]:
        return {**self.controller.describe(), "exploration": "epsilon_greedy", "epsilon": self.epsilon}


@dataclass(frozen=True)
class GaussianNoise:
    """Box: a_raw = μ(s) + σ·ε, ε ~ N(0, I); the env gets clip(a_raw, low, high)."""

    controller: Controller
    """The noise-free controller μ."""
    sigma: float
    """Standard deviation of the action noise (same for every dimension)."""
    low: np.ndarray
    """Lower action bounds."""
    high: np.ndarray
    """Upper action bounds."""

    def act(self, obs: np.ndarray, rng: np.random.Generator) -> tuple[np.ndarray, float]:
        mean = np.asarray(self.controller(obs), dtype=np.float64)
        noise = rng.standard_normal(mean.shape)
        raw = mean + self.sigma * noise
        logp = float(np.sum(-0.5 * noise**2 - math.log(self.sigma) - 0.5 * math.log(2 * math.pi)))
        return np.clip(raw, self.low, self.high).astype(np.float32), logp

    def mean_action(self, obs: np.ndarray) -> np.ndarray:
        return np.clip(np.asarray(self.controller(obs), dtype=np.float64), self.low, self.high).astype(np.float32)

    def describe(self) -> dict[str, Any]:
        return {**self.controller.describe(), "exploration": "gaussian", "sigma": self.sigma}


class UniformRandom:
    """Uniformly random actions (the 0 anchor of the normalised score)."""

    def __init__(self, action_space: Any) -> None:
        self.space = action_space
        if hasattr(action_space, "n"):
            self.logp = -math.log(int(action_space.n))
        else:
            self.logp = -float(np.sum(np.log(action_space.high.astype(np.float64) - action_space.low)))

    def act(self, obs: np.ndarray, rng: np.random.Generator) -> tuple[Any, float]:
        if hasattr(self.space, "n"):
            return int(self.space.start) + int(rng.integers(int(self.space.n))), self.logp
        a = rng.uniform(self.space.low.astype(np.float64), self.space.high.astype(np.float64))
        return a.astype(self.space.dtype), self.logp

    def mean_action(self, obs: np.ndarray) -> Any:
        raise TypeError("a uniformly random policy has no noise-free action")

    def describe(self) -> dict[str, Any]:
        return {"controller": "uniform_random", "exploration": "uniform"}
