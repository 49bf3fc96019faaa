"""Jobs: specs (YAML files: ``spec``), the one job loop (``loop``), run directories (``run_dir``), the
``train`` and ``finetune`` drivers, model selection by OPE (``selection``) and sweeps (``sweep``)."""
