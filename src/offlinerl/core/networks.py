"""Network building blocks: MLPs, a small CNN encoder, and ``EnsembleMLP`` (all
members of a twin/ensemble critic in one batched matmul)."""

from __future__ import annotations

import math
from typing import Sequence

import torch
from torch import nn

from offlinerl.core.distributions import LOG_STD_MAX, LOG_STD_MIN, Categorical, Distribution, TanhGaussian

__all__ = [
    "activation",
    "Head",
    "in_float32",
    "MLP",
    "CNNEncoder",
    "EnsembleMLP",
    "batched_layer",
    "CPU_ROW_CHUNK",
    "Distribution",
    "Categorical",
    "TanhGaussian",
    "LOG_STD_MIN",
    "LOG_STD_MAX",
]

_ACTIVATIONS = {"relu": nn.ReLU, "tanh": nn.Tanh, "elu": nn.ELU, "silu": nn.SiLU, "gelu": nn.GELU}


def activation(name: str) -> type[nn.Module]:
    try:
        return _ACTIVATIONS[name]
    except KeyError:
        raise ValueError(f"unknown activation {name!r}; choose one of {sorted(_ACTIVATIONS)}") from None


def in_float32(fn, x: torch.Tensor) -> torch.Tensor:
    """``fn(x)`` in float32 (``x`` cast up) where ``torch.autocast`` is on, else ``fn(x)``."""
    if torch.is_autocast_enabled(x.device.type):
        with torch.autocast(x.device.type, enabled=False):
            return fn(x.float())
    return fn(x)


class Head(nn.Linear):
    """A network's output layer. Under ``config.precision: bf16`` (the forwards in ``torch.autocast`` to bfloat16)
    it computes in float32, so Q and V estimates and distribution parameters keep float32's resolution (bfloat16
    holds 8 significant bits: a Q of 300 to within 1); the hidden layers, the bulk of the work, run in bfloat16."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return in_float32(super().forward, x)


class MLP(nn.Sequential):
    """``in -> hidden... -> out`` with the activation between layers (none after the last)."""

    def __init__(self, in_dim: int, hidden: Sequence[int], out_dim: int | None, act: str = "relu") -> None:
        layers: list[nn.Module] = []
        d = in_dim
        for h in hidden:
            layers += [nn.Linear(d, h), activation(act)()]
            d = h
        if out_dim is not None:
            layers.append(Head(d, out_dim))
            d = out_dim
        super().__init__(*layers)
        self.out_dim = d


class CNNEncoder(nn.Module):
    """Small conv encoder for flattened HWC images (values 0..255 or 0..1), then a linear layer.

    Input ``[B, H*W*C]`` (how connectors flatten a Box image), output ``[B, out_dim]``.
    """

    def __init__(
        self,
        obs_shape: Sequence[int],
        channels: Sequence[int] = (16, 32),
        kernel: int = 3,
        stride: int = 2,
        out_dim: int = 256,
        act: str = "relu",
        scale: float = 1.0,
    ) -> None:
        super().__init__()
        if len(obs_shape) == 2:
            obs_shape = (*obs_shape, 1)
        if len(obs_shape) != 3:
            raise ValueError(f"CNNEncoder needs an image shape (H, W[, C]), got {tuple(obs_shape)}")
        self.obs_shape = tuple(int(s) for s in obs_shape)
        self.scale = scale
        convs: list[nn.Module] = []
        c_in = self.obs_shape[2]
        for c in channels:
            convs += [nn.Conv2d(c_in, c, kernel, stride), activation(act)()]
            c_in = c
        self.convs = nn.Sequential(*convs, nn.Flatten())
        with torch.no_grad():
            n = self.convs(torch.zeros(1, self.obs_shape[2], *self.obs_shape[:2])).shape[1]
        self.head = nn.Sequential(nn.Linear(n, out_dim), activation(act)())
        self.out_dim = out_dim

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h, w, c = self.obs_shape
        img = x.reshape(-1, h, w, c).permute(0, 3, 1, 2) * self.scale  # [B, C, H, W]
        return self.head(self.convs(img))


CPU_ROW_CHUNK = 2048  # rows per addmm chain in EnsembleMLP on CPU (2048 × 256 float32 = 2 MiB)
CPU_BMM_MAX_ROWS = 1024  # EnsembleMLP on CPU: more than two members on at most this many rows each run as baddbmm


def batched_layer(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
    """One ``EnsembleMLP`` layer for every member at once: ``[E, B, in] @ [E, in, out] + [E, 1, out]``."""
    return torch.baddbmm(bias, x, weight)


class EnsembleMLP(nn.Module):
    """``num_members`` independent MLPs evaluated together: ``[B, in]`` or ``[E, B, in]`` -> ``[E, B, out]``.

    The weights of each layer are one ``[E, in, out]`` tensor. On an accelerator each layer is
    one ``torch.baddbmm`` over the ensemble dimension (one kernel per layer for twin critics).
    On CPU, where a kernel launch costs nothing, twin critics and large batches run each member's
    own ``addmm`` chain on at most ``CPU_ROW_CHUNK`` rows at a time, so that a layer's activations
    stay in cache: on CQL's critic batch (2 members, 256 × 256, 31 × 256 rows) that took the whole
    CQL update from 0.80× to 1.02× the CPU time of a plain two-``nn.Linear``-stack loop
    (``benchmarks/throughput_offpolicy.py``). Larger ensembles on at most ``CPU_BMM_MAX_ROWS`` rows
    (EDAC's 10-50 members on a batch of 256) run as ``baddbmm`` as on an accelerator: forward and
    backward over 3 × 256 layers, one thread, 10 members 42 → 28 ms, 50 members 625 → 133 ms.
    """

    def __init__(self, num_members: int, in_dim: int, out_dim: int, hidden: Sequence[int], act: str = "relu") -> None:
        super().__init__()
        self.num_members = num_members
        dims = [in_dim, *hidden, out_dim]
        self.weights = nn.ParameterList()
        self.biases = nn.ParameterList()
        for d_in, d_out in zip(dims[:-1], dims[1:]):
            w = torch.empty(num_members, d_in, d_out)
            b = torch.empty(num_members, 1, d_out)
            bound = 1.0 / math.sqrt(d_in)  # nn.Linear's default init, per member
            for e in range(num_members):
                nn.init.kaiming_uniform_(w[e].T, a=math.sqrt(5))
            nn.init.uniform_(b, -bound, bound)
            self.weights.append(nn.Parameter(w))
            self.biases.append(nn.Parameter(b))
        self.act = activation(act)()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.device.type == "cpu" and (self.num_members <= 2 or x.shape[-2] > CPU_BMM_MAX_ROWS):
            # each layer's members as views from one unbind: its backward stacks their gradients once, where a
            # select per member filled a zero tensor of the whole layer and added it, per member (IQL's update: 4%)
            ws = [w.unbind(0) for w in self._tensors(self.weights)]
            bs = [b.unbind(0) for b in self._tensors(self.biases)]
            return torch.stack([self._member_rows(x if x.dim() == 2 else x[e], [w[e] for w in ws], [b[e] for b in bs])
                                for e in range(self.num_members)])
        if x.dim() == 2:
            x = x.unsqueeze(0).expand(self.num_members, -1, -1)  # [E, B, in]
        return self._layers(x, batched_layer)  # [E, B, out]

    def _member_rows(self, x: torch.Tensor, weights: list[torch.Tensor], biases: list[torch.Tensor]) -> torch.Tensor:
        """One member (its layers' ``weights`` [in, out] and ``biases`` [1, out]) on ``[B, in]``, at most
        ``CPU_ROW_CHUNK`` rows at a time in float32; under autocast (bfloat16, half the bytes, and a cast of the
        weights per call) all rows at once: CQL's bf16 update 19.1 -> 21.4 upd/s."""
        def layer(h: torch.Tensor, w: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
            return torch.addmm(b, h, w)

        if x.shape[0] <= CPU_ROW_CHUNK or torch.is_autocast_enabled(x.device.type):
            return self._layers(x, layer, weights, biases)
        return torch.cat([self._layers(rows, layer, weights, biases) for rows in x.split(CPU_ROW_CHUNK)])

    @staticmethod
    def _tensors(tensors: nn.ParameterList) -> list[torch.Tensor]:
        """The list's tensors, read from its own dict (what ``torch.func.functional_call`` swaps): iterating a
        ``ParameterList`` looks each up by name, 8 us a forward for a critic's weights and biases."""
        return list(tensors._parameters.values())

    def _layers(self, x: torch.Tensor, layer, weights=None, biases=None) -> torch.Tensor:
        """``layer(x, weight, bias)`` for every layer (this module's, or the given per-layer ``weights`` and
        ``biases``), the activation between them."""
        weights = self._tensors(self.weights) if weights is None else weights
        biases = self._tensors(self.biases) if biases is None else biases
        last = len(weights) - 1
        for i, (w, b) in enumerate(zip(weights, biases)):
            if i < last:
                x = self.act(layer(x, w, b))
            else:  # the output layer in float32 under autocast, as a ``Head``
                x = in_float32(lambda h: layer(h, w, b), x)
        return x
