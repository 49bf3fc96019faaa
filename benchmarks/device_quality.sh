#!/usr/bin/env bash
# Quality sweep for benchmarks/README.md on a machine with many cores and one GPU:
# BC, CQL and IQL on the three shipped datasets, 3 seeds each (+ one alternative setting
# per CQL/IQL pipeline, seed 0), all side by side. CQL and IQL run on the GPU, BC on CPU.
#   OUT=/tmp/q bash benchmarks/device_quality.sh
set -u
OUT=${OUT:-/tmp/quality}
mkdir -p "$OUT" /tmp/qlogs
export OMP_NUM_THREADS=1 PYTHONUNBUFFERED=1
jobs=/tmp/qjobs.txt; : > $jobs
alt_cql() { case $1 in cartpole) echo "cql_weight=0.2";; *) echo "cql_weight=1.0";; esac; }
for ds in pendulum cartpole double-pendulum; do
  for seed in 0 1 2; do
    echo "jobs/$ds-iql.yaml --algorithm bc --seed $seed --device cpu" >> $jobs
    echo "jobs/$ds-cql.yaml --seed $seed --device ${GPU:-cuda}" >> $jobs
    echo "jobs/$ds-iql.yaml --seed $seed --device ${GPU:-cuda}" >> $jobs
  done
  echo "jobs/$ds-cql.yaml --seed 0 --device ${GPU:-cuda} --set $(alt_cql $ds)" >> $jobs
  echo "jobs/$ds-iql.yaml --seed 0 --device ${GPU:-cuda} --set beta=10.0" >> $jobs
done
n=0
while read -r line; do
  n=$((n + 1))
  ( timeout ${JOB_TIMEOUT:-480} python3 benchmarks/quality.py run $line ${EXTRA:-} --out "$OUT/results.jsonl" > /tmp/qlogs/job$n.log 2>&1
    echo "job$n rc=$? :: $line" >> /tmp/qlogs/status.txt ) &
done < $jobs
wait
cp /tmp/qlogs/status.txt "$OUT/status.txt"
tar czf "$OUT/logs.tar.gz" -C /tmp qlogs
python3 benchmarks/quality.py table "$OUT/results.jsonl" > "$OUT/table.md" 2>&1
cat "$OUT/table.md" "$OUT/status.txt"
