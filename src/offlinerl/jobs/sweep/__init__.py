"""Sweeps: a grid of job-spec overrides × seeds, each point-and-seed one training job, run as Ray Tune trials.

    SWEEP/
        sweep.json            what was asked (job file, overrides, grid, seeds) and every trial's overrides
        trials/<name>/        one run directory per trial, exactly what ``offlinerl train`` writes
                              (``--vectorize``: trials/<point>/ is one ``num_seeds`` run, its seed-<s>/ the trials)
        trials/<name>.log     the trial's output
        trials/<name>.json    how and where it ran: one entry per attempt (Ray node, command, exit code)
        trials/<name>.lock    held while the trial's train process runs (a resumed trial waits for it)
        tune/                 Ray Tune's own experiment files (offlinerl never reads them back)
        summary.csv           per grid point: trials, mean and std of the final / best return and score
        summary.md            the same as a table
        summary.json          the same rows, the best grid point and the Ray nodes each trial ran on
        sweep.png             evaluation return against updates, mean ± std over seeds, one line per grid point

Ray Tune schedules the trials (``max_concurrent`` at a time, ``cpus_per_trial`` reserved for each, on
any node of the cluster it joins) and collects their metrics as they train. Each trial is an
``offlinerl train`` process joined to the same Ray cluster: a job of its own, so its Ray Data tasks
and learner actors are scheduled by Ray like any job's (not squeezed into the trial's reservation),
and it writes and resumes its run directory exactly as a single job does. A trial that fails is
retried once by Tune from its newest checkpoint (``train --resume``); ``resume_sweep`` continues an
interrupted sweep the same way, trial by trial, and reads only files of ours (JSON and our
checkpoints), never Tune's pickled experiment state.

``plan`` (the grid, the trials, ``sweep.json``), ``trials`` (one trial in a Tune worker; the driver) and
``summary`` (the tables and the plot).
"""

from offlinerl.jobs.sweep.plan import SWEEP_FILE, SweepSpec, Trial, parse_grid, parse_seeds, plan_trials
from offlinerl.jobs.sweep.summary import summarize
from offlinerl.jobs.sweep.trials import NotVectorizable, resume_sweep, run_sweep

__all__ = ["SweepSpec", "Trial", "parse_grid", "parse_seeds", "plan_trials", "run_sweep", "resume_sweep", "summarize",
           "SWEEP_FILE", "NotVectorizable"]
