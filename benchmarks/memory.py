"""Larger than memory: streaming BC and CQL on Pendulum datasets of growing size, under a memory cap.

    PYTHONPATH=. python benchmarks/memory.py make --steps 16000000 -o /data/pendulum-16M            # and 48M (--seed 1),
    PYTHONPATH=. python benchmarks/memory.py make --steps 160000000 -o /data/pendulum-160M --seed 2  # 160M: 3.6 GiB
    PYTHONPATH=. python benchmarks/memory.py run /data/pendulum-16M /data/pendulum-48M /data/pendulum-160M \\
        --algorithms bc,cql --cap-gib 2.5 --object-store-mib 512 --in-memory-up-to 16000000 \\
        --out benchmarks/results/memory.json
    PYTHONPATH=. python benchmarks/memory.py table benchmarks/results/memory.json

``make`` writes a long vector dataset fast: Pendulum-v1's dynamics (gymnasium's equations, float64, every
episode 200 steps and truncated) simulated for thousands of episodes at once in numpy, acted by the
energy swing-up + PD controller of the shipped dataset's expert level with Gaussian action noise. Before it
writes, it replays a few episodes' actions in ``gymnasium.make("Pendulum-v1")`` from the same start states and
stops unless observations and rewards agree (so this is real Pendulum data, not a look-alike).

``run`` trains each dataset with each algorithm through ``offlinerl train`` (the shipped pipeline,
``data.mode=streaming``, one final 20-episode evaluation), as its own process tree in a Linux memory cgroup
limited to ``--cap-gib``, with Ray's object store capped at ``--object-store-mib`` (driver, raylet, GCS, Ray Data and learner workers, all of them; page cache
included, as the kernel counts it). A sampler reads the PSS of every process of the tree twice a second
(``/proc/PID/smaps_rollup``) and keeps the peak. Also recorded: the cgroup's own peak and OOM count,
what Ray spilled (the raylet's log), time to the first update and updates/s from ``result.json``. Each dataset is first
checked with ``offlinerl validate`` under the same cap (measured too); that records it as valid, so the
training jobs do not read it again (``offlinerl.episodes.validated``). ``--in-memory-up-to STEPS`` adds
uncapped ``data.mode=in_memory`` runs of the smaller datasets, for the streaming/in-memory throughput ratio.
Runs go one at a time; the machine should be otherwise quiet.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO / "src"), str(REPO)]  # the checkout's package (src/ layout) and its helpers

from benchmarks.convert_bench import _descendants, _mem_kb, _name  # noqa: E402
EPISODE_STEPS = 200
G, DT, MAX_SPEED, MAX_TORQUE = 10.0, 0.05, 8.0, 2.0


# -- data ---------------------------------------------------------------------------------------------
def controller(cos_t: np.ndarray, sin_t: np.ndarray, omega: np.ndarray) -> np.ndarray:
    """``datasets/scripted_policies.EnergySwingUp()`` (the expert level), vectorised."""
    balance = -10.0 * np.arctan2(sin_t, cos_t) - 2.0 * omega
    energy = omega * omega / 6.0 + 5.0 * cos_t
    pump = np.clip(2.0 * (5.0 - energy) * np.where(omega >= 0.0, 1.0, -1.0), -2.0, 2.0)
    return np.clip(np.where(cos_t > 0.85, balance, pump), -2.0, 2.0)


def simulate(n: int, rng: np.random.Generator, sigma: float) -> dict[str, np.ndarray]:
    """``n`` Pendulum-v1 episodes of 200 steps (gymnasium's dynamics), acted by the noisy controller."""
    th = rng.uniform(-np.pi, np.pi, n)
    thdot = rng.uniform(-1.0, 1.0, n)
    start = np.stack([th, thdot], 1)
    obs = np.empty((n, EPISODE_STEPS + 1, 3), np.float32)
    act = np.empty((n, EPISODE_STEPS, 1), np.float32)
    rew = np.empty((n, EPISODE_STEPS), np.float32)
    for t in range(EPISODE_STEPS + 1):
        obs[:, t] = np.stack([np.cos(th), np.sin(th), thdot], 1)
        if t == EPISODE_STEPS:
            break
        c, s, w = (obs[:, t, i].astype(np.float64) for i in range(3))
        a = np.clip(controller(c, s, w) + sigma * rng.standard_normal(n), -MAX_TORQUE, MAX_TORQUE).astype(np.float32)
        act[:, t, 0] = a
        # gymnasium multiplies the float32 action by Python floats (float32 results under NumPy 2's promotion
        # rules) and adds them to its float64 state: the same here, or the trajectories drift apart.
        torque, effort = (np.float32(3.0) * a).astype(np.float64), (np.float32(0.001) * a * a).astype(np.float64)
        norm = ((th + np.pi) % (2 * np.pi)) - np.pi
        rew[:, t] = -(norm ** 2 + 0.1 * thdot ** 2 + effort)
        thdot = np.clip(thdot + (3 * G / 2 * np.sin(th) + torque) * DT, -MAX_SPEED, MAX_SPEED)
        th = th + thdot * DT
    return {"obs": obs, "actions": act, "rewards": rew, "start": start}


def check_against_gymnasium(episodes: dict[str, np.ndarray], count: int = 3) -> None:
    """Replay the first ``count`` episodes' actions in gymnasium's Pendulum-v1 from the same start states."""
    import gymnasium as gym

    env = gym.make("Pendulum-v1")
    for i in range(count):
        env.reset(seed=0)
        env.unwrapped.state = episodes["start"][i].copy()
        obs = [env.unwrapped._get_obs()]
        rewards = []
        for a in episodes["actions"][i]:
            o, r, _, _, _ = env.step(a)
            obs.append(o)
            rewards.append(r)
        if not (np.allclose(np.array(obs), episodes["obs"][i], atol=1e-5)
                and np.allclose(np.array(rewards, np.float32), episodes["rewards"][i], atol=1e-4)):
            raise SystemExit(f"episode {i}: the numpy simulation disagrees with gymnasium's Pendulum-v1")
    env.close()


def make(steps: int, out: str, seed: int, sigma: float, block: int, overwrite: bool) -> None:
    import gymnasium as gym
    from tqdm import tqdm

    from offlinerl.env.collect import env_spec_json
    from offlinerl.episodes import SingleAgentEpisode, write_dataset
    from offlinerl.episodes.atomic import OutputExistsError

    if Path(out).exists() and not overwrite:  # before minutes of simulation, not after
        raise SystemExit(f"{out} exists; pass --overwrite to replace it (only a dataset of ours is replaced)")
    n_episodes = -(-steps // EPISODE_STEPS)
    rng = np.random.default_rng(seed)
    first = simulate(min(block, n_episodes), rng, sigma)
    check_against_gymnasium(first)
    env = gym.make("Pendulum-v1")
    bar = tqdm(total=n_episodes * EPISODE_STEPS, unit="step", unit_scale=True, desc="simulate + write")

    def episodes():
        done, data = 0, first
        while done < n_episodes:
            k = min(block, n_episodes - done)
            data = data if done == 0 else simulate(k, rng, sigma)
            for i in range(k):
                yield SingleAgentEpisode(id=f"{done + i:09d}", obs=data["obs"][i], actions=data["actions"][i],
                                         rewards=data["rewards"][i], truncated=True)
            done += k
            bar.update(k * EPISODE_STEPS)

    try:
        info = write_dataset(
            episodes(), out, observation_space=env.observation_space, action_space=env.action_space,
            env_id="Pendulum-v1", env_spec=env_spec_json("Pendulum-v1"), rows_per_file=2000, overwrite=overwrite,
            provenance={"collector": "benchmarks/memory.py make", "seed": seed, "action_noise_sigma": sigma,
                        "policy": "EnergySwingUp() of datasets/scripted_policies.py (the expert level), vectorised",
                        "simulator": "Pendulum-v1 dynamics in numpy (float64), checked against gymnasium"})
    except OutputExistsError as exc:  # e.g. --overwrite of a directory that is not a dataset of ours
        raise SystemExit(str(exc)) from None
    bar.close()
    size = sum(f.stat().st_size for f in Path(out).glob("*.parquet"))
    print(f"{out}: {info.num_episodes} episodes, {info.num_steps} steps, {size / 2**20:.0f} MiB of parquet")


# -- measuring ------------------------------------------------------------------------------------------
def tree_pss(root: int) -> list[tuple[str, int]]:
    """``(process name, PSS bytes)`` of ``root`` and each of its descendants (found by parent pid, as
    ``convert_bench.py`` does; Ray names its workers by what they run, e.g. ``ray::MapBatches(...)``)."""
    return [(_name(pid), _mem_kb(pid)[1] * 1024) for pid in _descendants(root)]


class Cgroup:
    """A cgroup-v1 memory group with a hard limit (None where the machine does not allow one)."""

    ROOT = Path("/sys/fs/cgroup/memory")

    def __init__(self, name: str, limit_bytes: int) -> None:
        self.path = self.ROOT / name
        try:
            self.path.mkdir(exist_ok=True)
            (self.path / "memory.limit_in_bytes").write_text(str(limit_bytes))
            (self.path / "memory.max_usage_in_bytes").write_text("0")
        except OSError as e:
            raise SystemExit(f"cannot make a memory cgroup at {self.path} ({e}); run as root on cgroup v1, "
                             "or pass --cap-gib 0 to measure without a cap")

    def add(self, pid: int) -> None:
        (self.path / "cgroup.procs").write_text(str(pid))

    def read(self) -> dict:
        oom = dict(line.split() for line in (self.path / "memory.oom_control").read_text().splitlines())
        return {"cgroup_peak_bytes": int((self.path / "memory.max_usage_in_bytes").read_text()),
                "cgroup_failcnt": int((self.path / "memory.failcnt").read_text()),
                "cgroup_oom_kills": int(oom.get("oom_kill", 0))}

    def remove(self) -> None:
        for _ in range(50):
            try:
                self.path.rmdir()
                return
            except OSError:
                time.sleep(0.2)


def measure(name: str, cmd: list[str], cap: int, workdir: Path, env: dict[str, str]) -> dict:
    """Run ``cmd`` as its own process tree (in the memory cgroup when ``cap``), sampling its PSS twice a second."""
    group = Cgroup(f"offlinerl-memory-{os.getpid()}", cap) if cap else None
    log = open(workdir / f"{name}.log", "w")
    ray_tmp = tempfile.mkdtemp(prefix="orl-", dir="/tmp")  # short: Ray's socket paths live under it
    # The child joins the cgroup before it execs, so Ray's processes (its descendants) start inside it.
    pre = (lambda: group.add(os.getpid())) if group else None
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, cwd=REPO, preexec_fn=pre,
                            env={**os.environ, **env, "PYTHONPATH": str(REPO), "RAY_TMPDIR": ray_tmp}, start_new_session=True)
    peak, at_peak, samples, stop = 0, [], [], threading.Event()

    def sample() -> None:
        nonlocal peak, at_peak
        while not stop.is_set():
            procs = tree_pss(proc.pid)
            pss = sum(b for _, b in procs)
            if pss > peak:
                peak, at_peak = pss, sorted(procs, key=lambda p: -p[1])
            samples.append((round(time.perf_counter() - t0, 1), pss))
            stop.wait(0.5)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    try:
        rc = proc.wait()
    except KeyboardInterrupt:
        os.killpg(proc.pid, signal.SIGKILL)
        raise
    finally:
        stop.set()
        sampler.join()
        log.close()
    out = {"exit_code": rc, "wall_s": time.perf_counter() - t0, "peak_pss_bytes": peak, "cap_bytes": cap or None,
           "peak_processes": [[name, round(b / 2**20)] for name, b in at_peak[:10]],  # MiB, the 10 largest
           "pss_samples": samples[:: max(1, len(samples) // 200)]}
    if group:
        out.update(group.read())
        group.remove()
    # The raylet logs its running total of spilled data ("Spilled N MiB, ...") whenever it spills.
    spilled = [float(m) for log_file in Path(ray_tmp).glob("ray/session_*/logs/raylet*.out")
               for m in re.findall(r"Spilled (\d+) MiB", log_file.read_text(errors="replace"))]
    out["spilled_mib"] = max(spilled) if spilled else 0.0
    shutil.rmtree(ray_tmp, ignore_errors=True)
    return out


def dataset_size(dataset: str) -> dict:
    info = json.loads((Path(dataset) / "dataset.json").read_text())
    return {"dataset": dataset, "num_steps": info["num_steps"],
            "parquet_bytes": sum(f.stat().st_size for f in Path(dataset).glob("*.parquet"))}


def validate_one(dataset: str, cap: int, workdir: Path, env: dict[str, str]) -> dict:
    """``offlinerl validate`` under the cap (it records the dataset as valid, so the training jobs skip it)."""
    cmd = [sys.executable, "-m", "offlinerl.cli", "validate", dataset]
    out = {**dataset_size(dataset), "algorithm": "validate", "mode": "—",
           **measure(f"validate-{Path(dataset).name}", cmd, cap, workdir, env)}
    print(json.dumps({k: v for k, v in out.items() if k != "pss_samples"}), flush=True)
    return out


def train_one(dataset: str, algorithm: str, mode: str, updates: int, cap: int, workdir: Path,
              env: dict[str, str]) -> dict:
    name = f"{algorithm}-{mode}-{Path(dataset).name}"
    run_dir = workdir / name
    cmd = [sys.executable, "-m", "offlinerl.cli", "train", str(REPO / "jobs" / f"pendulum-{algorithm}.yaml"),
           "--set", f"dataset={dataset}", "--set", f"config.data.mode={mode}", "--set", f"stop.updates={updates}",
           "--set", "config.evaluation.interval=0", "--set", "checkpoint_interval=0", "-o", str(run_dir),
           "--no-progress"]
    out = {**dataset_size(dataset), "algorithm": algorithm, "mode": mode, "updates": updates,
           **measure(name, cmd, cap, workdir, env)}
    result = run_dir / "result.json"
    if result.exists():
        r = json.loads(result.read_text())
        out.update({k: r.get(k) for k in ("first_update_s", "updates_per_s", "final_eval_return")})
    print(json.dumps({k: v for k, v in out.items() if k != "pss_samples"}), flush=True)
    return out


def run(datasets: list[str], algorithms: list[str], cap_gib: float, object_store_mib: int, updates: int,
        in_memory_up_to: int, out: str, workdir: str) -> None:
    work = Path(workdir)
    work.mkdir(parents=True, exist_ok=True)
    os.environ.setdefault("OFFLINERL_CACHE_DIR", str(work / "cache"))  # validation records of these datasets only
    cap = int(cap_gib * 2**30)
    # The object store of the Ray each capped job starts (Ray's default is 30% of the memory it sees).
    capped_env = {"RAY_DEFAULT_OBJECT_STORE_MAX_MEMORY_BYTES": str(object_store_mib << 20)} if object_store_mib else {}
    rows = []

    def save() -> None:
        Path(out).write_text(json.dumps({"machine": {"cpus": os.cpu_count(), "platform": platform.platform()},
                                         "cap_gib": cap_gib, "object_store_mib": object_store_mib, "runs": rows},
                                        indent=1))

    datasets = [str(Path(d).resolve()) for d in datasets]
    for d in datasets:
        rows.append(validate_one(d, cap, work, capped_env))
        save()
    for algorithm in algorithms:
        for d in datasets:
            rows.append(train_one(d, algorithm, "streaming", updates, cap, work, capped_env))
            if dataset_size(d)["num_steps"] <= in_memory_up_to:
                rows.append(train_one(d, algorithm, "in_memory", updates, 0, work, {}))
            save()
    print(table(out))


def table(path: str) -> str:
    data = json.loads(Path(path).read_text())
    g = 2**30
    lines = ["| job | steps | parquet GiB | transitions GiB | mode | cap GiB | peak PSS GiB | cgroup peak GiB | OOM kills "
             "| spilled MiB | wall s | first update s | updates/s | final return |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in data["runs"]:
        capped = bool(r.get("cap_bytes"))
        cells = [r["algorithm"], f"{r['num_steps'] / 1e6:.0f}M", f"{r['parquet_bytes'] / g:.2f}",
                 f"{r['num_steps'] * 52 / g:.1f}",  # OfflineData.estimated_bytes: obs, next obs, action, reward, flags
                 r["mode"], f"{r['cap_bytes'] / g:.1f}" if capped else "none", f"{r['peak_pss_bytes'] / g:.2f}",
                 f"{r['cgroup_peak_bytes'] / g:.2f}" if capped else "—", str(r["cgroup_oom_kills"]) if capped else "—",
                 f"{r['spilled_mib']:.0f}", f"{r['wall_s']:.0f}"]
        if r["exit_code"] != 0:
            cells += [f"failed (exit {r['exit_code']})", "", ""]
        elif r["algorithm"] == "validate":
            cells += ["—", "—", "—"]
        else:
            cells += [f"{r['first_update_s']:.1f}", f"{r['updates_per_s']:.0f}", f"{r['final_eval_return']:.0f}"]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    m = sub.add_parser("make", help="write a Pendulum dataset of --steps steps")
    m.add_argument("--steps", type=int, required=True)
    m.add_argument("-o", "--output", required=True)
    m.add_argument("--seed", type=int, default=0)
    m.add_argument("--sigma", type=float, default=0.3, help="std of the Gaussian action noise")
    m.add_argument("--block", type=int, default=10_000, help="episodes simulated at once")
    m.add_argument("--overwrite", action="store_true")
    r = sub.add_parser("run", help="train on each dataset under the cap, measuring memory")
    r.add_argument("datasets", nargs="+")
    r.add_argument("--algorithms", default="bc,cql")
    r.add_argument("--cap-gib", type=float, default=2.5, help="memory cgroup limit of each job (0 = none)")
    r.add_argument("--object-store-mib", type=int, default=512,
                   help="object store of each capped job's Ray (RAY_DEFAULT_OBJECT_STORE_MAX_MEMORY_BYTES; 0 = Ray's default)")
    r.add_argument("--updates", type=int, default=8000)
    r.add_argument("--in-memory-up-to", type=int, default=0, metavar="STEPS",
                   help="also train the datasets of at most STEPS steps in-memory (uncapped), for the throughput ratio")
    r.add_argument("--out", default=str(REPO / "benchmarks" / "results" / "memory.json"))
    r.add_argument("--workdir", default="/tmp/offlinerl-memory")
    t = sub.add_parser("table", help="print the markdown table of a results file")
    t.add_argument("path")
    a = p.parse_args()
    if a.cmd == "make":
        make(a.steps, a.output, a.seed, a.sigma, a.block, a.overwrite)
    elif a.cmd == "run":
        run(a.datasets, a.algorithms.split(","), a.cap_gib, a.object_store_mib, a.updates, a.in_memory_up_to, a.out,
            a.workdir)
    else:
        print(table(a.path))


if __name__ == "__main__":
    main()
