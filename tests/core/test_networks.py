import math

import torch

from offlinerl.core.networks import CPU_BMM_MAX_ROWS, CPU_ROW_CHUNK, MLP, batched_layer, CNNEncoder, EnsembleMLP, Categorical, TanhGaussian


def test_mlp_shapes():
    net = MLP(3, [8, 8], 2)
    assert net(torch.zeros(5, 3)).shape == (5, 2)


def test_cnn_encoder_on_flat_images():
    enc = CNNEncoder((16, 16, 3), out_dim=32)
    assert enc(torch.zeros(4, 16 * 16 * 3)).shape == (4, 32)


def test_ensemble_mlp_equals_independent_members():
    torch.manual_seed(0)
    ens = EnsembleMLP(2, 3, 1, [4])
    x = torch.randn(5, 3)
    out = ens(x)
    assert out.shape == (2, 5, 1)
    for e in range(2):
        h = torch.relu(x @ ens.weights[0][e] + ens.biases[0][e])
        torch.testing.assert_close(out[e], h @ ens.weights[1][e] + ens.biases[1][e])


def test_large_ensembles_on_small_batches_equal_their_independent_members():
    """More than two members on at most CPU_BMM_MAX_ROWS rows run as one baddbmm per layer on CPU: each member's
    output is still its own MLP's."""
    torch.manual_seed(0)
    ens = EnsembleMLP(5, 3, 1, [8])
    for x in (torch.randn(CPU_BMM_MAX_ROWS, 3), torch.randn(5, 7, 3)):
        out = ens(x)
        for e in range(5):
            xe = x if x.dim() == 2 else x[e]
            h = torch.relu(xe @ ens.weights[0][e] + ens.biases[0][e])
            torch.testing.assert_close(out[e], h @ ens.weights[1][e] + ens.biases[1][e])


def test_ensemble_mlp_cpu_chunks_match_batched_product():
    """The CPU path (per member, CPU_ROW_CHUNK rows at a time) computes what the batched one does, with gradients."""
    torch.manual_seed(0)
    ens = EnsembleMLP(2, 3, 2, [8, 8])
    for x in (torch.randn(CPU_ROW_CHUNK * 2 + 7, 3), torch.randn(2, 300, 3)):  # shared input; one input per member
        out = ens(x)
        h = ens._layers(x.unsqueeze(0).expand(2, -1, -1) if x.dim() == 2 else x, batched_layer)  # the accelerator path
        torch.testing.assert_close(out, h)
        grads = torch.autograd.grad(out.square().sum(), list(ens.parameters()))
        expected = torch.autograd.grad(h.square().sum(), list(ens.parameters()))
        for g, ge in zip(grads, expected):
            torch.testing.assert_close(g, ge, rtol=1e-5, atol=1e-4)  # sums over 4103 rows, in another order


def test_ensemble_mlp_under_bf16_autocast_runs_all_rows_at_once_and_tracks_float32():
    """Under autocast (config.precision: bf16) the CPU path takes more than CPU_ROW_CHUNK rows in one pass, in
    bfloat16 but for the float32 output layer, and stays within bfloat16's rounding of the float32 result."""
    torch.manual_seed(0)
    ens = EnsembleMLP(2, 3, 1, [64, 64])
    x = torch.randn(CPU_ROW_CHUNK * 2 + 7, 3)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        out = ens(x)
    assert out.dtype == torch.float32 and out.shape == (2, CPU_ROW_CHUNK * 2 + 7, 1)
    torch.testing.assert_close(out, ens(x), rtol=0.05, atol=0.02)


def test_categorical_hand_computed():
    d = Categorical(torch.tensor([[0.0, math.log(3.0)]]))
    torch.testing.assert_close(d.log_prob(torch.tensor([1])), torch.tensor([math.log(0.75)]))
    assert d.mode().item() == 1
    ent = -(0.25 * math.log(0.25) + 0.75 * math.log(0.75))
    assert abs(d.entropy().item() - ent) < 1e-6


def test_tanh_gaussian_log_prob_change_of_variables():
    low, high = torch.tensor([-2.0]), torch.tensor([2.0])
    d = TanhGaussian(torch.tensor([[0.3, math.log(0.5)]]), low, high)
    a = torch.tensor([[1.0]])
    u = math.atanh(0.5)
    normal = -0.5 * ((u - 0.3) / 0.5) ** 2 - math.log(0.5) - 0.5 * math.log(2 * math.pi)
    expected = normal - math.log(2.0 * (1 - 0.5**2))
    assert abs(d.log_prob(a).item() - expected) < 1e-5
    assert abs(d.mode().item() - 2.0 * math.tanh(0.3)) < 1e-6


def test_tanh_gaussian_density_integrates_to_one():
    low, high = torch.tensor([-2.0]), torch.tensor([2.0])
    d = TanhGaussian(torch.tensor([[0.5, math.log(0.7)]]).expand(20001, 2), low, high)
    grid = torch.linspace(-1.99999, 1.99999, 20001).unsqueeze(-1)
    dens = d.log_prob(grid).exp()
    total = torch.trapezoid(dens, grid.squeeze(-1)).item()
    assert abs(total - 1.0) < 2e-3


def test_tanh_gaussian_samples_in_bounds_and_logp_consistent():
    torch.manual_seed(0)
    low, high = torch.tensor([-1.0, 0.0]), torch.tensor([1.0, 4.0])
    d = TanhGaussian(torch.zeros(1000, 4), low, high)
    a, logp = d.rsample_and_log_prob()
    assert (a >= low).all() and (a <= high).all()
    inside = (((a - d.center) / d.scale).abs() < 0.99).all(-1)  # log_prob clamps only at the very bounds
    assert inside.float().mean() > 0.9
    torch.testing.assert_close(logp[inside], d.log_prob(a)[inside], atol=2e-3, rtol=1e-3)
