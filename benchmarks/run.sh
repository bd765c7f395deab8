#!/usr/bin/env bash
# Issue 10 benchmarks, one command from a clean checkout:
#
#     bash benchmarks/run.sh                 # prints the three reports
#     BENCH_OUT=/tmp/bench bash benchmarks/run.sh   # also writes sweep_speed.json, vs_llm_analysis.json, startup.json
#     BENCH_INSTRUCTIONS=1 bash benchmarks/run.sh   # also counts each start's instructions (needs valgrind)
#
# Creates, when missing: .venv with tokenmath (pip install -e .) and benchmarks/.venv-llm-analysis with
# llm-analysis from the package registry (network needed once). Every timing runs pinned to one core (taskset -c 0,
# when available: other programs sharing the machine then move a start-up less); wall times are medians of repeated
# runs, CPU times are printed beside them.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
VENV=${TOKENMATH_VENV:-.venv}
if [ ! -x "$VENV/bin/tokenmath" ]; then
  echo "== creating $VENV with tokenmath (pip install -e .)"
  [ -x "$VENV/bin/python" ] || "$PY" -m venv "$VENV"
  "$VENV/bin/python" -m pip install --quiet -e .
fi
PIN=()
if command -v taskset >/dev/null 2>&1; then PIN=(taskset -c 0); fi
json() { if [ -n "${BENCH_OUT:-}" ]; then mkdir -p "$BENCH_OUT"; echo "--json $BENCH_OUT/$1"; fi; }

echo "== 1. sweep speed: configurations per second of one tokenmath.sweep call (one core)"
${PIN[@]+"${PIN[@]}"} "$VENV/bin/python" benchmarks/sweep_speed.py $(json sweep_speed.json)
echo
echo "== 2. tokenmath vs llm-analysis: the same 1,000 configurations in one process (one core)"
${PIN[@]+"${PIN[@]}"} "$VENV/bin/python" benchmarks/vs_llm_analysis.py $(json vs_llm_analysis.json)
echo
echo "== 3. start-up of the command line (one core)"
# BENCH_INSTRUCTIONS=1: also the instructions each start executes (valgrind), which other programs do not move
${PIN[@]+"${PIN[@]}"} "$VENV/bin/python" benchmarks/startup.py $(json startup.json) ${BENCH_INSTRUCTIONS:+--instructions}
