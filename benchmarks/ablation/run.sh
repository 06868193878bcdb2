#!/usr/bin/env bash
# The strengthening ablation (benchmarks/RESULTS.md, "Strengthening"): one `smug-opt bench run`
# per (setting, backend set), each in its own results folder, then `python table.py`.
# usage: run.sh paper|mnist   (each stream is sequential: one job at a time)
set -u
cd "$(dirname "$0")"
ALL=highs,cpsat,mip-cbc,pulp-cbc,z3
declare -A PIECES=(
  [all]=all
  [no-fixings]=cuts,tables,implied,components
  [no-cuts]=fixings,tables,implied,components
  [no-tables]=fixings,cuts,implied,components
  [no-implied]=fixings,cuts,tables,components
  [no-components]=fixings,cuts,tables,implied
)

run() {  # run SUITE FILTER LIMIT OUTDIR SETTING BACKENDS
  local suite=$1 filter=$2 limit=$3 out=$4 setting=$5 backends=$6
  local flags=(--no-strengthen)
  [ "$setting" != off ] && flags=(--strengthen --strengthen-pieces "${PIECES[$setting]}")
  nice -n 10 smug-opt bench run --suite "$suite" --filter "$filter" --backends "$backends" \
    --time-limit "$limit" "${flags[@]}" --out "$out/$setting" --quiet
}

case "${1:-}" in
  paper)
    D=../results/ablation-nobias-60s F='nobias-g0-k3000-s*'
    for s in off all; do run paper-scale "$F" 60 $D $s $ALL; done
    for s in no-fixings no-cuts no-tables no-implied no-components; do run paper-scale "$F" 60 $D $s highs; done
    D=../results/ablation-gamma05-60s F='*g0.5-k3000-s0'
    for s in off all; do run paper-scale "$F" 60 $D $s highs,cpsat; done
    ;;
  mnist)
    D=../results/ablation-mnist-fl-10s F='cnn-d?-c1-k[15]00-g0.[59]'
    for s in off all; do run mnist-first-layer "$F" 10 $D $s $ALL; done
    for s in no-fixings no-cuts no-tables no-implied no-components; do run mnist-first-layer "$F" 10 $D $s highs,cpsat; done
    ;;
  *) echo "usage: $0 paper|mnist" >&2; exit 2 ;;
esac
