#!/usr/bin/env bash
# One-GPU check: both throughput benchmarks and a 5-minute Sebulba Atari
# PPO run with Cleanba's settings, then ONE table (env steps/s, frames/s, seconds per update
# and per stage, peak device memory), then a determinism check (two Anakin CartPole runs of
# one seed with --config.deterministic=True: the same metrics?). Every step has a timeout
# (at most 18 minutes in all).
#
# The machine needs JAX with CUDA; packages it lacks come from a folder of wheels
# (--wheels=DIR, kept out of git), installed with pip --no-index into /tmp/site. No network.
# --cpu runs the same steps on the CPU at tiny sizes (1-3 minutes), to test this script.
# --steps=LIST runs only those of anakin,sebulba,run,det (default: all) and keeps what the
# others left in --out, so the check can be split over several commands (on one H200 the
# steps took about 160, 110+, 300 and 45 s: more than one 10-minute command; see
# docs/performance.md, "On one GPU"). The table covers every step found in --out.
# Python: $PYTHON, else python3 (with --cpu: .venv/bin/python where the checkout has one).
# Logs, JSON and the run directory go to --out (default /tmp/podracer-gpu-check).
set -euo pipefail

usage() {
  echo "usage: bash benchmarks/gpu_check.sh [--wheels=DIR] [--cpu] [--steps=LIST] [--out=DIR] [--run_s=SECONDS]"
}

WHEELS=""
CPU=0
STEPS="anakin,sebulba,run,det"
OUT="/tmp/podracer-gpu-check"
RUN_S=""
for arg in "$@"; do
  case "$arg" in
    --wheels=*) WHEELS="${arg#--wheels=}" ;;
    --cpu) CPU=1 ;;
    --steps=*) STEPS="${arg#--steps=}" ;;
    --out=*) OUT="${arg#--out=}" ;;
    --run_s=*) RUN_S="${arg#--run_s=}" ;;
    -h | --help) usage; exit 0 ;;
    *) echo "unknown argument: $arg" >&2; usage >&2; exit 2 ;;
  esac
done

for step in ${STEPS//,/ }; do
  case "$step" in
    anakin | sebulba | run | det) ;;
    *) echo "--steps: unknown step '$step' (anakin, sebulba, run, det)" >&2; exit 2 ;;
  esac
done

cd "$(dirname "$0")/.."  # the repository root: python -m finds the packages here
# $PYTHON if set; else python3 (the machine's JAX with CUDA), or with --cpu the checkout's
# .venv where there is one (the CPU machine it is tested on).
if [[ -z "${PYTHON:-}" ]]; then
  PYTHON=python3
  if (( CPU )) && [[ -x .venv/bin/python ]]; then PYTHON=.venv/bin/python; fi
fi

# --- packages --------------------------------------------------------------------------
if [[ -n "$WHEELS" ]]; then
  shopt -s nullglob
  wheels=("$WHEELS"/*.whl)
  shopt -u nullglob
  if (( ${#wheels[@]} == 0 )); then
    echo "no wheels (*.whl) in --wheels=$WHEELS" >&2
    exit 1
  fi
  "$PYTHON" -m pip install -q --no-index --no-deps --upgrade --target /tmp/site "${wheels[@]}"
  export PYTHONPATH="/tmp/site${PYTHONPATH:+:$PYTHONPATH}"
fi
missing=()
for module in jax numpy absl six envpool gymnax flax optax orbax.checkpoint ml_collections \
    tensorboardX chex; do
  "$PYTHON" -c "import $module" >/dev/null 2>&1 || missing+=("$module")
done
if (( ${#missing[@]} > 0 )); then
  echo "missing Python modules: ${missing[*]} (pass --wheels=DIR with their wheels)" >&2
  exit 1
fi

# --- sizes -----------------------------------------------------------------------------
# Steps and their time limits (s); the run stops on its own timer (SIGTERM: it checkpoints
# and exits 143), the others should finish well inside theirs.
if (( CPU )); then
  export JAX_PLATFORMS=cpu
  TITLE="CPU check (--cpu: tiny sizes, not a GPU measurement)"
  ANAKIN_S=150; SEBULBA_S=150; RUN_S="${RUN_S:-90}"; DET_S=120
  ANAKIN_ARGS=(--num_envs=4,16 --num_steps=16 --repeats=1 --min_env_s=0.1
               --first_update_configs=cartpole_ppo --num_seeds=1,4 --profile_envs=0
               --recurrent=gru --recurrent_envs=16)
  SEBULBA_ARGS=(--splits=shared --num_envs=4 --num_actor_threads=2 --num_steps=8
                --num_epochs=1 --num_minibatches=2 --updates=2)
  # 2 threads x 2 envs x 8 steps; 6 updates, so the run ends by itself.
  RUN_ARGS=(--config.num_envs=4 --config.num_steps=8 --config.num_minibatches=2
            --config.num_epochs=1 --config.total_env_steps=192 --config.log_every=1)
else
  TITLE="GPU check (one GPU: Sebulba actors and learner share device 0)"
  # Limits from one H200: the Anakin step took 159 s for 2 sizes and the first update (with 64
  # envs, 3 agent counts and a recurrent table it passed 150 s at the first size); the
  # Sebulba benchmark compiles three learner programs (over 110 s).
  ANAKIN_S=240; SEBULBA_S=300; RUN_S="${RUN_S:-300}"; DET_S=120
  ANAKIN_ARGS=(--num_envs=2048,16384 --first_update_configs=cartpole_ppo
               --num_seeds=1,1024 --recurrent= --profile_envs=0 --repeats=2)
  # Cleanba's rollout: 2 actor threads x 64 envs x 128 steps, 4 epochs x 4 minibatches.
  SEBULBA_ARGS=(--splits=shared --num_envs=128 --num_actor_threads=2 --num_steps=128
                --num_epochs=4 --num_minibatches=4 --updates=4)
  # configs/atari_ppo.py as it is (Cleanba's settings, 50M steps): the timer ends it.
  RUN_ARGS=(--config.log_every=5)
fi

mkdir -p "$OUT"
# wants STEP: whether --steps names STEP; its earlier outputs are removed, others are kept.
wants() {
  [[ ",$STEPS," == *",$1,"* ]] || return 1
  local names=("$1")
  [[ "$1" == det ]] && names=(det_a det_b)
  for n in "${names[@]}"; do rm -rf "${OUT:?}/$n" "$OUT/$n".rc "$OUT/$n".mem.json "$OUT/$n".log; done
  [[ "$1" == anakin ]] && rm -f "$OUT/anakin.json"
  return 0
}

# run_step NAME LIMIT_S MODULE ARGS...: python -m MODULE ARGS under `timeout`, with its peak
# device memory noted; output to $OUT/NAME.log, "exit-code limit seconds" to $OUT/NAME.rc.
run_step() {
  local name="$1" limit="$2" module="$3"
  shift 3
  local start=$SECONDS rc=0
  echo "[$name] python -m $module (limit ${limit} s; log $OUT/$name.log)"
  timeout --preserve-status -s TERM -k 20 "$limit" \
    "$PYTHON" -m benchmarks.gpu_check_table measure --memory_out="$OUT/$name.mem.json" \
    "$module" "$@" >"$OUT/$name.log" 2>&1 || rc=$?
  echo "$rc $limit $((SECONDS - start))" >"$OUT/$name.rc"
  echo "[$name] exit $rc after $((SECONDS - start)) s"
}

if wants anakin; then
  run_step anakin "$ANAKIN_S" benchmarks.anakin_throughput "${ANAKIN_ARGS[@]}" \
    --json_out="$OUT/anakin.json"
fi
if wants sebulba; then
  run_step sebulba "$SEBULBA_S" benchmarks.sebulba_throughput "${SEBULBA_ARGS[@]}"
fi
if wants run; then
  run_step run "$RUN_S" sebulba.main --config=configs/atari_ppo.py --workdir="$OUT/run" \
    --fresh "${RUN_ARGS[@]}"
fi
# Determinism: two Anakin CartPole runs of one seed with XLA's deterministic GPU ops
# (--config.deterministic=True); their metrics must agree, clock keys aside.
if wants det; then
  for name in det_a det_b; do
    run_step "$name" "$DET_S" anakin.main --config=configs/cartpole_ppo.py \
      --workdir="$OUT/$name" --fresh --config.deterministic=True \
      --config.total_env_steps=51200 --config.log_every=10
  done
fi

"$PYTHON" -m benchmarks.gpu_check_table table --out="$OUT" --title="$TITLE"
"$PYTHON" -m benchmarks.gpu_check_table same "$OUT/det_a" "$OUT/det_b"
