#!/usr/bin/env bash
# Inference on real length distributions, bert.c and its peers side by side in one run:
# `bert bench_infer` (fp32, --bf16 where the CPU has avx512_bf16, --int8 where it has VNNI
# or AMX: padded / dynamic / packed) and bench/infer_peers.py (PyTorch 2.x + transformers fp32
# and bf16 autocast, ONNX Runtime fp32 and int8 (quantize_dynamic), OpenVINO fp32, bf16 and
# int8 (NNCF): padded / dynamic; none of them packs), on the same
# batches in the same order (lengths: bench/infer_lengths.py, equal to bert.c's; the table
# checks it), batch 1 and batch 32, bert-base with random weights, 2 threads each:
#   MRPC dev (GLUE, max_seq 128): 408 rows; batch 1 on the first GLUE_LATENCY of them
#   fixed shapes (DATASETS=fixed): every sequence FIXED_SEQ (128) long, max(GLUE_LATENCY,
#     4 x BATCH) of them (bert.c's fixed shapes); padded only (dynamic and packed are the same)
#   SQuAD v1.1 dev (max_seq 384): a subset of SQUAD_FEATURES features, written to
#     bench/.cache/ and read by both sides (bert.c has no limit on the large batch's count):
#     runs of SQUAD_BLOCK consecutive questions spread evenly over the file (its lengths
#     from every article, and the file order's runs of questions on one paragraph, which
#     keep a batch's lengths alike; SQUAD_BLOCK=0: the first questions only); its length
#     statistics are printed next to the whole file's: at batch 32 dynamic padding computes
#     1.476 rows per real token on the default 512 features, 1.479 on the whole file, but
#     1.405 on 128, so smaller samples understate what packing saves. Batch 1 on its first
#     SQUAD_LATENCY.
# Implementations alternate per dataset, each in its own process. Then the tables
# (bench/infer_table.py). Estimated 30-35 minutes for bert-base on 2 quiet cores (SQuAD at
# 384 is most of it; SQUAD_FEATURES=256 SQUAD_LATENCY=64 halves that part); time it only on
# a quiet machine (`uptime`: load average below ~1.2). On a busy one (load 4 on 2 cores) the
# bert-base smoke run below with DATASETS=squad SQUAD_FEATURES=64 SQUAD_LATENCY=4
# MAX_BATCHES=2 took 20 minutes (most of it the peers' warm-up batches at 384).
#
#   bench/run_infer_bench.sh
#   PRESET=bert-base THREADS=2 BATCH=32           (defaults shown)
#   GLUE_LATENCY=256 SQUAD_FEATURES=512 SQUAD_LATENCY=128 SQUAD_BLOCK=32
#   DATASETS="glue squad"                         which datasets (of fixed glue squad)
#   FIXED_SEQ=128                                 the fixed shapes' sequence length
#   PEERS="pytorch-fp32 pytorch-bf16 ort-fp32 openvino-fp32 openvino-bf16"
#                                                 (also ort-int8 openvino-int8: int8 peers)
#   BERTC_PRECISIONS="fp32 bf16 int8"             bert.c's, of those the CPU has
#   NO_BERTC=1                                    peers only
#   GLUE_TASK=mrpc GLUE_DIR=../shared/data/glue/MRPC SQUAD_FILE=../shared/data/squad/v1.1/dev-v1.1.json
#   VOCAB=data/vocab/bert-base-uncased-vocab.txt
#   PEER_PYTHON=.venv-bf16peer/bin/python         torch 2.x + transformers (bench/setup_bf16_peer_env.sh),
#                                                 plus onnxruntime, openvino, onnx (installed if missing)
#   RESULTS=file                                  JSON lines (default out/infer_bench_<time>.jsonl)
#   OMP_WAIT_POLICY=passive                       on a shared, loaded machine: libgomp's spin-wait cost
#                                                 bert.c up to 14x at batch 1 at load 6 on 2 cores
#                                                 (bench/results/int8_speed/noise_check_*.jsonl)
#   WARMUP=2                                      untimed batches first, every side (the first ones
#                                                 replayed); WARMUP=GLUE_LATENCY at batch 1 has every
#                                                 length seen once first (a server's steady state)
#   MAX_BATCHES=N                                 peers time only N batches per measurement (smoke
#                                                 runs; the table then warns that batches differ)
# A smoke run of the whole pipeline in a minute or two:
#   PRESET=bert-tiny GLUE_LATENCY=8 SQUAD_FEATURES=64 SQUAD_LATENCY=8 bench/run_infer_bench.sh
set -euo pipefail
cd "$(dirname "$0")/.."
PRESET=${PRESET:-bert-base}; THREADS=${THREADS:-2}; BATCH=${BATCH:-32}
GLUE_LATENCY=${GLUE_LATENCY:-256}; FIXED_SEQ=${FIXED_SEQ:-128}; SQUAD_FEATURES=${SQUAD_FEATURES:-512}; SQUAD_LATENCY=${SQUAD_LATENCY:-128}
SQUAD_BLOCK=${SQUAD_BLOCK:-32}; WARMUP=${WARMUP:-2}
DATASETS=${DATASETS:-glue squad}
PEERS=${PEERS:-pytorch-fp32 pytorch-bf16 ort-fp32 openvino-fp32 openvino-bf16}
shared=$(cd .. && pwd)/shared
[ -d "$shared" ] || shared=/work/shared
GLUE_TASK=${GLUE_TASK:-mrpc}; GLUE_DIR=${GLUE_DIR:-$shared/data/glue/MRPC}
SQUAD_FILE=${SQUAD_FILE:-$shared/data/squad/v1.1/dev-v1.1.json}
VOCAB=${VOCAB:-data/vocab/bert-base-uncased-vocab.txt}
PEER_PYTHON=${PEER_PYTHON:-.venv-bf16peer/bin/python}
[ -x ./bert ] || { echo "run_infer_bench: build first (make)" >&2; exit 1; }
[ -x "$PEER_PYTHON" ] || { echo "run_infer_bench: no $PEER_PYTHON; run bench/setup_bf16_peer_env.sh" >&2; exit 1; }
if ! "$PEER_PYTHON" -c "import onnxruntime, openvino, onnx" 2>/dev/null; then
  echo "run_infer_bench: installing onnxruntime, openvino, onnx into $PEER_PYTHON's venv" >&2
  "$PEER_PYTHON" -m pip install -q onnxruntime openvino onnx
fi
precisions=(fp32)
if grep -q avx512_bf16 /proc/cpuinfo; then precisions+=(bf16); else
  echo "run_infer_bench: no avx512_bf16 here: bert.c fp32 only (the peers' bf16 rows run emulated or not at all)" >&2
  PEERS=$(echo "$PEERS" | tr ' ' '\n' | grep -v bf16 | xargs)
fi
if grep -qwE 'avx512_vnni|avx_vnni|amx_int8' /proc/cpuinfo; then precisions+=(int8); else
  echo "run_infer_bench: no VNNI / AMX here: no bert.c int8 (it would run, slowly); the int8 peers still run" >&2
fi
if [ -n "${BERTC_PRECISIONS:-}" ]; then  # the asked ones, of those the CPU has
  precisions=($(for p in "${precisions[@]}"; do [[ " $BERTC_PRECISIONS " == *" $p "* ]] && echo "$p"; done))
fi
mkdir -p out bench/.cache
results=${RESULTS:-out/infer_bench_$(date -u +%Y%m%d_%H%M%S).jsonl}
load_start=$(cut -d' ' -f1-3 /proc/loadavg)
export OMP_NUM_THREADS=$THREADS   # (OMP_WAIT_POLICY etc. pass through as set)

tag() {  # adds "precision": $1 to bert.c's JSON lines on stdin
  /usr/bin/python3 -c '
import json, sys
for line in sys.stdin:
    if line.startswith("{"):
        d = json.loads(line); d["precision"] = sys.argv[1]; d["threads"] = int(sys.argv[2]); d["preset"] = sys.argv[3]
        print(json.dumps(d), flush=True)' "$1" "$THREADS" "$PRESET"
}

peer_extra=()   # the peers' flags beyond bert.c's length source (fixed shapes)
run_dataset() {  # latency_sequences, then the length source's flags
  local latency=$1; shift
  local src=("$@" --vocab_file "$VOCAB")
  if [ "${NO_BERTC:-0}" != 1 ]; then
    for prec in "${precisions[@]}"; do
      echo "== bert.c $prec: ${src[*]}" >&2
      local extra=(); [ "$prec" = fp32 ] || extra=(--"$prec")
      ./bert bench_infer "${src[@]}" --preset "$PRESET" --batch "$BATCH" --latency_sequences "$latency" \
        --threads "$THREADS" --warmup "$WARMUP" --json "${extra[@]}" | tag "$prec" | tee -a "$results" >&2
    done
  fi
  for impl in $PEERS; do
    "$PEER_PYTHON" bench/infer_peers.py "${src[@]}" ${peer_extra[@]+"${peer_extra[@]}"} --preset "$PRESET" --batch "$BATCH" --latency_sequences "$latency" \
      --threads "$THREADS" --warmup "$WARMUP" --impls "$impl" --max_batches "${MAX_BATCHES:-0}" | tee -a "$results" >&2
  done
}

lengths_info=()
for ds in $DATASETS; do
  case $ds in
    fixed)
      lengths_info+=("fixed: every sequence $FIXED_SEQ tokens long")
      peer_extra=(--fixed_shapes)
      run_dataset "$GLUE_LATENCY" --max_seq_length "$FIXED_SEQ"
      peer_extra=() ;;
    glue)
      lengths_info+=("$("$PEER_PYTHON" bench/infer_lengths.py --glue_task "$GLUE_TASK" --data_dir "$GLUE_DIR" \
                        --vocab_file "$VOCAB" --batch "$BATCH")")
      run_dataset "$GLUE_LATENCY" --glue_task "$GLUE_TASK" --data_dir "$GLUE_DIR" ;;
    squad)
      subset=bench/.cache/squad_${SQUAD_FEATURES}_features_block${SQUAD_BLOCK}.json
      [ -s "$subset" ] || "$PEER_PYTHON" bench/infer_lengths.py --squad_file "$SQUAD_FILE" --vocab_file "$VOCAB" \
                            --subset_features "$SQUAD_FEATURES" --subset_block "$SQUAD_BLOCK" --subset_out "$subset"
      for f in "$subset" "$SQUAD_FILE"; do
        lengths_info+=("$("$PEER_PYTHON" bench/infer_lengths.py --squad_file "$f" --vocab_file "$VOCAB" --batch "$BATCH")")
      done
      run_dataset "$SQUAD_LATENCY" --squad_file "$subset" ;;
    *) echo "run_infer_bench: unknown dataset '$ds' (fixed, glue, squad)" >&2; exit 2 ;;
  esac
done

echo "conditions: $(date -u '+%Y-%m-%d %H:%M UTC'), $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), $(nproc) cores," \
     "avx512_bf16: $(grep -q avx512_bf16 /proc/cpuinfo && echo yes || echo no), $PRESET, $THREADS threads," \
     "load average $load_start at start, $(cut -d' ' -f1-3 /proc/loadavg) at end"
printf 'lengths: %s\n' "${lengths_info[@]}"
/usr/bin/python3 bench/infer_table.py "$results" || echo "(infer_table: the implementations did not all run the same batches)"
echo "(raw results: $results)"
