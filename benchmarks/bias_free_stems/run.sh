#!/usr/bin/env bash
# The bias-free stems ablation (README.md here): `smug-opt bench run --backend auto` at 60 s on
# the suite's hard instances (7x7/2 stems, keras ResNet50/DenseNet121), once per setting of the
# strengthening, one job at a time; then `python table.py results/on results/off`.
# usage: run.sh [OUT]   (default: results)
set -u
cd "$(dirname "$0")"
OUT=${1:-results}
declare -A PIECES=([on]=all [off]=fixings,cuts,tables,implied,components)  # off: no integer_rows
for setting in on off; do
  for filter in 'conv7*' 'keras-[RD]*'; do
    echo "$setting $filter start: $(uptime)" >> "$OUT/load.txt"
    nice -n 10 smug-opt bench run --suite bias-free-stems --filter "$filter" --backend auto \
      --time-limit 60 --strengthen --strengthen-pieces "${PIECES[$setting]}" --out "$OUT/$setting" --quiet
  done
done
echo "end: $(uptime)" >> "$OUT/load.txt"
