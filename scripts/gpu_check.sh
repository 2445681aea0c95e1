#!/usr/bin/env bash
# The device check of the CUDA backend, for a session lent a GPU machine (the device tool): one
# command on a bare H100/H200 (CUDA, nvcc, gcc, PyTorch; none of Debian's libraries). Made here
# first: bash scripts/gpu_bundle.sh (./bert and the CUDA tests for any x86-64-v3 CPU, the CUDA
# backend, the Debian libraries they load, a small prepared corpus), then on the device, carrying
# .devbundle and build-cuda:
#   bash scripts/gpu_check.sh [all | peer_warm kernels compare speed peer minilm ...]   (default all:
#   over the 10 minutes a call may take; two calls: "peer_warm kernels compare speed" (~9 min), then
#   "minilm peer" on the same machine, still warm)
# PRETRAIN_CPU=0 skips the CPU side of the pre-training comparison (deterministic: compare with
# bench/results/gpu/reference/); PEER_FP32=1 adds PyTorch's fp32 (and TF32) eager runs.
# 1. kernels: every CUDA kernel against the CPU backend's on the same inputs (tests/cuda/)
# 2. compare: the same runs on --device cpu and --device cuda (bench's per-step losses of a small
#    model in fp32 and bf16; 60 pre-training steps on the prepared shards), side by side; the
#    data-parallel path through NCCL in a group of one (the checkpoints against the plain run's);
#    exact resume on the GPU and resumes across devices; 100 steps of bert-mini on the GPU
#    ($OUT/pretrain_mini_cuda.json: its curve against bench/results/gpu/reference/'s CPU one)
# 3. speed: bert bench --device cuda (bert-base and bert-large, fp32 and bf16)
# 4. peer: the same shapes in PyTorch + transformers on the same GPU (bench/bench_pytorch.py)
# peer_warm: torch.compile's compilations of the peer's shapes made in the background while section
#    2 runs (its rates then not timings; stopped 30 s after it, before 3), into caches a later call
#    on the same machine reads (.devcache/): the peer section's runs then load their compiled graphs
#    and kernels instead of spending a minute or more of device time each compiling them
# Logs go to $OUT (at most 8 files come back).
set -u
cd "$(dirname "$0")/.." || exit 1
# the scratch folder (the runs' outputs, the bundle's libraries): /tmp on the device;
# tests/check_gpu_script.sh's rehearsal gives its own
T=${GPU_CHECK_TMP:-/tmp}
OUT=${OUT:-$T/gpu_check}
WHAT=" ${*:-all} "   # one or more sections
mkdir -p "$OUT" $T/devlib
# PyTorch's sections alone (peer, peer_warm: the image's PyTorch) need nothing carried, so that a
# machine gone cold before the second call still runs the peer
if echo $WHAT | tr ' ' '\n' | grep -qvxE 'peer|peer_warm'; then
  for f in .devbundle/bert .devbundle/libs.tar.xz build-cuda/libbert_cuda.so; do
    [ -f "$f" ] || { echo "gpu_check: $f is missing: carry .devbundle and build-cuda (made by scripts/gpu_bundle.sh)" |
      tee "$OUT/device.txt"; exit 1; }
  done
fi
[ ! -f .devbundle/libs.tar.xz ] || tar -C $T/devlib -xJf .devbundle/libs.tar.xz
export LD_LIBRARY_PATH=$T/devlib/lib:/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export BERT_CUDA_LIB=$PWD/build-cuda/libbert_cuda.so
# NCCL for the collectives: the image's PyTorch wheel brings one (nvidia-nccl)
NCCL_DIR=$(python3 -c "import nvidia.nccl as n, os; print(os.path.join(list(n.__path__)[0], 'lib'))" 2>/dev/null || true)
if [ -n "$NCCL_DIR" ] && [ -f "$NCCL_DIR/libnccl.so.2" ] && [ -z "${BERT_NCCL_LIB:-}" ]; then
  export BERT_NCCL_LIB=$NCCL_DIR/libnccl.so.2
fi
BERT=.devbundle/bert
want() { [[ "$WHAT" == *" all "* || "$WHAT" == *" $1 "* ]]; }
# torch.compile's caches (inductor's graphs, Triton's kernels) inside the repository's ignored
# .devcache/, which stays on a machine between calls while it is warm, as .devbundle does
export TORCHINDUCTOR_CACHE_DIR=$PWD/.devcache/inductor TRITON_CACHE_DIR=$PWD/.devcache/triton
# The peer's compiled runs (bench/bench_pytorch.py flags), in the order the issue's targets need
# them (bert-large phase 1 first; run 2 measured bert-base's 64 x 128), each "preset|flags"
PEER_COMPILED=("bert-large|--batch 64 --seq 128" "bert-base|--batch 16 --seq 512 --preds 80"
               "bert-large|--batch 16 --seq 512 --preds 80" "bert-base|--batch 64 --seq 128"
               "bert-base|--batch 16 --seq 512 --preds 80 --pad_fraction 0.114")
peer_flags() { echo "--preset ${1%%|*} ${1#*|} --precision bf16 --compile"; }
# the seconds since the start after each section (for planning a call within its 10 minutes)
took() { echo "gpu_check: $1 done at ${SECONDS}s" | tee -a "$OUT/device.txt"; }
{ date -u; nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv; nvcc --version | tail -n 1
  lscpu | grep -E 'Model name|^CPU\(s\)'; $BERT --version; echo "NCCL: ${BERT_NCCL_LIB:-libnccl.so.2 from the library path}"
  } > "$OUT/device.txt" 2>&1
cat "$OUT/device.txt"

# peer_warm: started after the kernels section (whose CPU side takes the 16 cores, and whose
# tests' timeouts would read as failures), alongside compare; two lanes (bert-large's two shapes,
# bert-base's three), one shape at a time each: at most ~40 GB of the GPU a lane, 4 compile threads
WARM_PIDS=()
warm_lane() {   # warm_lane INDEX... (of PEER_COMPILED)
  for i in "$@"; do
    local c=${PEER_COMPILED[$i]} t0=$SECONDS status
    # two timed steps after one warm-up: any second compilation the peer's run makes is made here too
    TORCHINDUCTOR_COMPILE_THREADS=4 timeout 240 python3 bench/bench_pytorch.py --device cuda --attn sdpa \
      --steps 2 --warmup 1 $(peer_flags "$c") > "$T/peer_warm_$i.log" 2>&1
    status=$?
    echo "gpu_check: peer_warm ${c%%|*} ${c#*|}: exit $status after $((SECONDS - t0))s" >> $T/peer_warm.log
    [ $status = 0 ] || tail -n 3 "$T/peer_warm_$i.log" >> $T/peer_warm.log
  done
}
start_warm() {
  [[ "$WHAT" == *" peer_warm "* ]] || return 0
  rm -f $T/peer_warm.log
  echo "gpu_check: peer_warm started at ${SECONDS}s" > $T/peer_warm.log
  warm_lane 0 2 & WARM_PIDS+=($!)
  warm_lane 1 3 4 & WARM_PIDS+=($!)
}
# a process and everything it started, children first
process_tree() {
  local child
  for child in $(ps -o pid= --ppid "$1" 2>/dev/null); do process_tree "$child"; done
  echo "$1"
}
# before anything is timed: the compilations end, given WARM_GRACE more seconds (default 30) at
# most (the call's 10 minutes are the speed section's first: what is unfinished is compiled in the
# peer section as without peer_warm), and every process they started is gone (the GPU's memory free)
stop_warm() {
  [ ${#WARM_PIDS[@]} -gt 0 ] || return 0
  local until=$((SECONDS + ${WARM_GRACE:-30})) pids lane
  while [ "$SECONDS" -lt "$until" ] && kill -0 "${WARM_PIDS[@]}" 2>/dev/null; do sleep 2; done
  if kill -0 "${WARM_PIDS[@]}" 2>/dev/null; then
    echo "gpu_check: peer_warm stopped at ${SECONDS}s, unfinished" >> $T/peer_warm.log
    pids=$(for lane in "${WARM_PIDS[@]}"; do process_tree "$lane"; done)
    kill $pids 2>/dev/null
    pkill -f '_inductor[./]compile_worker'   # a worker pool its python left behind, if any
    until=$((SECONDS + 10))
    while [ "$SECONDS" -lt "$until" ] && kill -0 $pids 2>/dev/null; do sleep 1; done
    kill -9 $pids 2>/dev/null
    pkill -9 -f '_inductor[./]compile_worker'
  fi
  wait "${WARM_PIDS[@]}" 2>/dev/null
  WARM_PIDS=()
  cat $T/peer_warm.log | tee -a "$OUT/device.txt"
}

if want kernels; then
  for t in $(find build-cuda -maxdepth 1 -name 'test_cuda_*' ! -name '*.d' | sort); do
    echo "== $t"
    OMP_NUM_THREADS=16 timeout 150 "$t" "$BERT_CUDA_LIB" 2>&1
    echo "== $t exit $?"
  done > "$OUT/kernels.log" 2>&1
  # the fused attention forward (BERT_CUDA_ATTENTION=fused: opt-in until these pass with it)
  for t in build-cuda/test_cuda_attention build-cuda/test_cuda_model; do
    echo "== $t with BERT_CUDA_ATTENTION=fused"
    BERT_CUDA_ATTENTION=fused OMP_NUM_THREADS=16 timeout 150 "$t" "$BERT_CUDA_LIB" 2>&1
    echo "== $t with BERT_CUDA_ATTENTION=fused exit $?"
  done >> "$OUT/kernels.log" 2>&1
  # the products through cuBLASLt, backward too, each shape's fastest of 4 algorithms (the speed
  # section's tuned lines)
  { echo "== build-cuda/test_cuda_linear with BERT_CUDA_LT_BACKWARD=1 BERT_CUDA_LT_ALGOS=4"
    BERT_CUDA_LT_BACKWARD=1 BERT_CUDA_LT_ALGOS=4 OMP_NUM_THREADS=16 timeout 150 build-cuda/test_cuda_linear \
      "$BERT_CUDA_LIB" 2>&1
    echo "== build-cuda/test_cuda_linear with BERT_CUDA_LT_BACKWARD=1 BERT_CUDA_LT_ALGOS=4 exit $?"
  } >> "$OUT/kernels.log" 2>&1
  grep -E '^== |passed|FAIL|fail' "$OUT/kernels.log" | tail -n 40
  # a library kept from an earlier, verified version (.devbundle/v1, optional) runs the rest
  # when a test of this one fails
  if grep -qE '^== [^ ]+ exit [1-9]' "$OUT/kernels.log" && [ -f .devbundle/v1/libbert_cuda.so ]; then
    echo "a CUDA test failed: the checks below run .devbundle/v1/libbert_cuda.so" | tee -a "$OUT/kernels.log"
    export BERT_CUDA_LIB=$PWD/.devbundle/v1/libbert_cuda.so
  fi
  took kernels
fi

start_warm
if want compare; then
  {
    [ ${#WARM_PIDS[@]} -gt 0 ] && echo "(peer_warm compiles PyTorch's runs beside this section: its rates are not timings)"
    for prec in "" --bf16; do
      for dev in cpu cuda; do
        echo "== bench bert-mini $prec --device $dev"
        timeout 120 $BERT bench --preset bert-mini --mode train --batch 16 --seq 128 --steps 8 --warmup 0 \
          --sgemm_peak 1 --device $dev $prec 2>&1 | grep -E 'train step|train |error|bert bench:'
      done
    done
    P1=$(ls -d .devbundle/prep/hdf5_lower_case_1_seq_len_128*/*/ | head -n 1)
    # pretrain_tiny DEVICE OUT [flags]: bert-tiny, 60 steps of 64 sequences (2 x 32), into OUT
    pretrain_tiny() {
      local dev=$1 out=$2
      shift 2
      timeout 200 $BERT pretrain --input_dir "$P1" --bert_model bert-tiny --output_dir "$out" \
        --train_batch_size 64 --gradient_accumulation_steps 2 --max_steps 60 --learning_rate 5e-3 \
        --warmup_proportion 0.1 --num_steps_per_checkpoint 30 --log_freq 10 --eval_steps 60 --eval_batches 10 \
        --disable_progress_bar --device "$dev" "$@" 2>&1 | grep -vE '^\s*$'
    }
    # same_checkpoint A B: the two step-60 checkpoints' weights and optimizer state, byte for byte
    same_checkpoint() {
      for f in model.safetensors optimizer.safetensors; do
        if cmp -s "$1/ckpt_60/$f" "$2/ckpt_60/$f"; then echo "  $f: the same bytes as $1's"
        else echo "  $f: DIFFERS from $1's"; fi
      done
    }
    for dev in $([ "${PRETRAIN_CPU:-1}" = 0 ] && echo cuda || echo cpu cuda); do
      echo "== pretrain bert-tiny 60 steps --device $dev"
      rm -rf "$T/pt_$dev"
      pretrain_tiny $dev "$T/pt_$dev" | tee "$T/pt_$dev.log" | tail -n 20
    done
    # the data-parallel path on one GPU: NCCL in a group of one. fp32 buckets: a mean over one
    # process is the gradient itself, so the same bytes as the plain run; a bf16 wire rounds
    # every gradient to 8 bits (its final loss within ~1e-3 of the plain run's)
    for v in "per_micro|" "post_sharded|--allreduce_post_accumulation --shard_optimizer --bucket_cap_mb 1" \
             "bf16_wire|--allreduce_post_accumulation --allreduce_post_accumulation_bf16"; do
      name=${v%%|*}
      echo "== pretrain bert-tiny 60 steps --device cuda through NCCL in a group of one: $name"
      rm -rf "$T/pt_nccl_$name"
      BERT_DATA_PARALLEL_ALONE=1 pretrain_tiny cuda "$T/pt_nccl_$name" ${v#*|} > "$T/pt_nccl_$name.log"
      grep -E 'data parallel|step 60/|final loss|rror|bert:|NCCL' "$T/pt_nccl_$name.log" | head -n 6
      # a library without collectives (the fallback after a failed kernel test) would take MPI's path
      grep -q 'through the GPU.s collectives (NCCL)' "$T/pt_nccl_$name.log" ||
        echo "  FAIL: this run did not go through NCCL"
      if [ "$name" = bf16_wire ]; then   # rounded gradients: the final loss, not the bytes
        echo "  final loss $(grep -o 'final loss [0-9.]*' "$T/pt_nccl_$name.log") against the plain run's $(grep -o 'final loss [0-9.]*' $T/pt_cuda.log)"
      else
        same_checkpoint $T/pt_cuda "$T/pt_nccl_$name"
      fi
    done
    echo "== exact resume on the GPU: 30 steps, then resumed to 60"
    rm -rf $T/pt_resume
    pretrain_tiny cuda $T/pt_resume --steps_this_run 30 | grep -E 'final loss|rror' | head -n 3
    pretrain_tiny cuda $T/pt_resume --resume_from_checkpoint | grep -E 'resum|step 60/|final loss|rror' | head -n 4
    same_checkpoint $T/pt_cuda $T/pt_resume
    echo "== resumed across devices: 30 steps on one, 30 on the other (final losses against the GPU's straight run)"
    for pair in "cpu cuda" "cuda cpu"; do
      set -- $pair
      rm -rf "$T/pt_$1_$2"
      pretrain_tiny $1 "$T/pt_$1_$2" --steps_this_run 30 | grep -E 'rror' | head -n 3
      echo "  $1 then $2: $(pretrain_tiny $2 "$T/pt_$1_$2" --resume_from_checkpoint | grep -E 'final loss|rror' | head -n 2)"
    done
    echo "  the GPU's straight run: $(grep -h 'final loss' $T/pt_cuda.log | tail -n 1)"
    # mixed precision: bf16, and fp16 with dynamic loss scaling (the CPU's references of these and of
    # the fp32 runs above: bench/results/gpu/reference/, made with --device cpu)
    for prec in --bf16 --fp16; do
      for dev in $([ "${PRETRAIN_CPU:-1}" = 0 ] && echo cuda || echo cpu cuda); do
        echo "== pretrain bert-tiny 60 steps $prec --device $dev"
        rm -rf "$T/pt_$dev$prec"
        pretrain_tiny $dev "$T/pt_$dev$prec" $prec | grep -E 'step (10|30|60)/|final loss|rror' | head -n 5
      done
    done
    # TF32 (the GPU's only): its losses within TF32's rounding of the fp32 run's above
    echo "== pretrain bert-tiny 60 steps --tf32 --device cuda (against the fp32 run's: $(grep -h 'final loss' $T/pt_cuda.log | tail -n 1))"
    rm -rf $T/pt_cuda_tf32
    pretrain_tiny cuda $T/pt_cuda_tf32 --tf32 | grep -E 'step (10|30|60)/|final loss|rror' | head -n 5
    echo "== pretrain bert-mini 100 steps --device cuda (curve: $OUT/pretrain_mini_cuda.json)"
    rm -rf $T/pt_mini
    timeout 200 $BERT pretrain --input_dir "$P1" --bert_model bert-mini --output_dir $T/pt_mini \
      --train_batch_size 64 --gradient_accumulation_steps 2 --max_steps 100 --learning_rate 2e-3 \
      --warmup_proportion 0.1 --num_steps_per_checkpoint 100 --log_freq 1 --eval_steps 100 --eval_batches 10 \
      --disable_progress_bar --json-summary "$OUT/pretrain_mini_cuda.json" --device cuda 2>&1 | tail -n 4
    # fine-tuning and embeddings from the CUDA run's checkpoint, on both devices
    CKPT=$T/pt_cuda/ckpt_60
    for task in MRPC STS-B; do
      [ -d .devbundle/glue/$task ] || continue
      for dev in cpu cuda; do
        echo "== glue $task 40 steps from the pre-trained bert-tiny --device $dev"
        rm -rf "$T/glue_${task}_$dev"
        timeout 120 $BERT glue --task_name "$task" --data_dir .devbundle/glue/$task --init_checkpoint $CKPT \
          --output_dir "$T/glue_${task}_$dev" --do_train --do_eval --max_seq_length 128 --train_batch_size 32 \
          --max_steps 40 --learning_rate 1e-4 --log_freq 10 --device $dev 2>&1 | grep -vE '^\s*$' | tail -n 6
      done
    done
    # SQuAD from the same checkpoint on both devices (the repository's 26-question subset: training,
    # prediction and the official metrics), and bench_infer on the GPU (the rest of the commands)
    for dev in cpu cuda; do
      echo "== squad 20 steps from the pre-trained bert-tiny --device $dev"
      rm -rf "$T/squad_$dev"
      timeout 120 $BERT squad --init_checkpoint $CKPT --output_dir "$T/squad_$dev" \
        --train_file tests/data/squad/subset_v1.json --predict_file tests/data/squad/subset_v1.json --do_train \
        --do_predict --do_eval --max_seq_length 128 --doc_stride 64 --train_batch_size 16 --max_steps 20 \
        --learning_rate 1e-4 --device $dev 2>&1 | grep -E 'final loss|official|rror' | tail -n 3
    done
    echo "== bench_infer bert-base --bf16 --device cuda, batch 32, seq 128"
    timeout 120 $BERT bench_infer --preset bert-base --batch 32 --max_seq_length 128 --latency_sequences 64 \
      --device cuda --bf16 2>&1 | tail -n 3
    head -n 200 .devbundle/glue/MRPC/dev.tsv | cut -f4 > $T/sentences.txt 2>/dev/null
    for dev in cpu cuda; do
      timeout 60 $BERT embed --init_checkpoint $CKPT --device $dev --output $T/embed_$dev.npy < $T/sentences.txt \
        2>&1 | tail -n 1
    done
    python3 -c "import numpy as n; a=n.load('$T/embed_cpu.npy'); b=n.load('$T/embed_cuda.npy'); \
print('== embed', a.shape, 'cpu vs cuda: max |diff|', float(abs(a-b).max()), 'min cosine', float((a*b).sum(1).min()))"
    # the server on each device: the same sentences as /v1/embeddings requests, four at once
    rm -f $T/serve_cpu.json $T/serve_cuda.json
    for dev in cpu cuda; do
      timeout 120 bash tests/cuda/serve_embed.sh "$BERT" $CKPT $dev $T/sentences.txt $T/serve_$dev.json ||
        echo "== serve --device $dev failed"
    done
    python3 -c "import json, numpy as n; a=n.array(json.load(open('$T/serve_cpu.json'))); \
b=n.array(json.load(open('$T/serve_cuda.json'))); print('== serve /v1/embeddings', a.shape, 'in 4 requests at once, cpu vs cuda: max |diff|', float(abs(a-b).max()))"
  } > "$OUT/compare.log" 2>&1
  cat "$OUT/compare.log"
  took compare
fi

stop_warm
if want speed; then
  {
    # in the order of what matters most, should the call run out of its 10 minutes
    for preset in bert-base bert-large; do
      for prec in "" --bf16; do
        echo "== bench $preset $prec --device cuda, batch 64, seq 128"
        timeout 150 $BERT bench --preset $preset --batch 64 --seq 128 --steps 10 --warmup 2 --device cuda \
          $prec 2>&1 | grep -vE 'step [0-9]'
      done
    done
    echo "== bench bert-base --bf16 --device cuda with BERT_CUDA_ATTENTION=fused, batch 64, seq 128"
    BERT_CUDA_ATTENTION=fused timeout 150 $BERT bench --preset bert-base --batch 64 --seq 128 --steps 10 --warmup 2 \
      --device cuda --bf16 2>&1 | grep -E '^(gemm|train|inference)|error|bert bench'
    echo "== bench bert-base --bf16 --device cuda, batch 16, seq 512 (phase 2's shape)"
    timeout 150 $BERT bench --preset bert-base --batch 16 --seq 512 --preds 80 --steps 10 --warmup 2 --device cuda \
      --bf16 2>&1 | grep -E '^(gemm|train|inference)'
    # where the fused attention's recomputed probabilities save most (16 bytes per score element)
    echo "== bench bert-base --bf16 --device cuda with BERT_CUDA_ATTENTION=fused, batch 16, seq 512"
    BERT_CUDA_ATTENTION=fused timeout 150 $BERT bench --preset bert-base --batch 16 --seq 512 --preds 80 --steps 10 \
      --warmup 2 --device cuda --bf16 2>&1 | grep -E '^(gemm|train|inference)|error|bert bench'
    echo "== bench bert-large --bf16 --device cuda, batch 16, seq 512 (phase 2's shape)"
    timeout 150 $BERT bench --preset bert-large --batch 16 --seq 512 --preds 80 --steps 10 --warmup 2 --device cuda \
      --bf16 2>&1 | grep -E '^(gemm|train|inference)'
    # the bundled corpus's phase-2 shards are 11.4% padding (phase 1's: 0.04%): bert.c skips it,
    # PyTorch computes it (the peer section runs the same mix)
    echo "== bench bert-base --bf16 --device cuda, batch 16, seq 512, 11.4% padding (the bundled phase-2 shards' mix)"
    timeout 150 $BERT bench --preset bert-base --batch 16 --seq 512 --preds 80 --pad_fraction 0.114 --steps 10 \
      --warmup 2 --device cuda --bf16 2>&1 | grep -E '^(gemm|train|inference)'
    # each product of the step alone (the forms the model calls; variants: a 16-bit result
    # against an fp32 one, the weight gradient alone): which fall short of the peak (~12 s)
    echo "== products: bench bert-base --bf16 --device cuda --gemm_shapes, batch 64, seq 128"
    timeout 100 $BERT bench --preset bert-base --batch 64 --seq 128 --device cuda --bf16 --gemm_shapes 2>&1 |
      grep -E '^products|error|bert bench'
    echo "== kernel profile: bench bert-base --bf16 --device cuda, batch 64, seq 128"
    timeout 150 $BERT bench --preset bert-base --batch 64 --seq 128 --steps 3 --warmup 1 --mode train --device cuda \
      --bf16 --kernel_profile 2>&1 | grep -E '^(gemm|kernels|train)|error|bert bench'
    # and with the fused attention, where its tests passed above (the profile the next speed work reads)
    if grep -q '^== build-cuda/test_cuda_attention with BERT_CUDA_ATTENTION=fused exit 0' "$OUT/kernels.log" 2>/dev/null &&
      grep -q '^== build-cuda/test_cuda_model with BERT_CUDA_ATTENTION=fused exit 0' "$OUT/kernels.log"; then
      echo "== kernel profile: bench bert-base --bf16 --device cuda with BERT_CUDA_ATTENTION=fused, batch 64, seq 128"
      BERT_CUDA_ATTENTION=fused timeout 100 $BERT bench --preset bert-base --batch 64 --seq 128 --steps 3 --warmup 1 \
        --mode train --device cuda --bf16 --kernel_profile 2>&1 | grep -E '^(gemm|kernels|train)|error|bert bench'
    fi
    # the same with every product on cuBLASLt (the backward's too) and each shape's fastest of its
    # 8 best algorithms (timed), and the step with that and the fused attention
    echo "== products with BERT_CUDA_LT_BACKWARD=1 BERT_CUDA_LT_ALGOS=8: bench bert-base --bf16 --device cuda --gemm_shapes"
    BERT_CUDA_LT_BACKWARD=1 BERT_CUDA_LT_ALGOS=8 timeout 100 $BERT bench --preset bert-base --batch 64 --seq 128 \
      --device cuda --bf16 --gemm_shapes 2>&1 | grep -E '^products|error|bert bench'
    echo "== bench bert-base --bf16 --device cuda with BERT_CUDA_ATTENTION=fused BERT_CUDA_LT_BACKWARD=1 BERT_CUDA_LT_ALGOS=8"
    BERT_CUDA_ATTENTION=fused BERT_CUDA_LT_BACKWARD=1 BERT_CUDA_LT_ALGOS=8 timeout 150 $BERT bench --preset bert-base \
      --batch 64 --seq 128 --steps 10 --warmup 2 --device cuda --bf16 2>&1 | grep -E '^(gemm|train|inference)|error|bert bench'
    if [ -f .devbundle/v1/libbert_cuda.so ] && [ "$BERT_CUDA_LIB" != "$PWD/.devbundle/v1/libbert_cuda.so" ]; then
      echo "== bench bert-base --bf16 --device cuda with .devbundle/v1's library (the baseline), batch 64, seq 128"
      BERT_CUDA_LIB=$PWD/.devbundle/v1/libbert_cuda.so timeout 150 $BERT bench --preset bert-base --batch 64 \
        --seq 128 --steps 10 --warmup 2 --device cuda --bf16 2>&1 | grep -E '^(gemm|train|inference)|error|lacks|bert bench'
    fi
    echo "== bench bert-base --bf16 --device cuda with BERT_CUDA_ATTENTION=fused BERT_CUDA_LT_OUT16=0, batch 64, seq 128"
    BERT_CUDA_ATTENTION=fused BERT_CUDA_LT_OUT16=0 timeout 150 $BERT bench --preset bert-base --batch 64 --seq 128 \
      --steps 10 --warmup 2 --device cuda --bf16 2>&1 | grep -E '^(gemm|train|inference)|error|bert bench'
    # NVIDIA's "TF32" (the recipe's fp32 on Ampere and later): fp32 with TF32 products
    echo "== bench bert-base --tf32 --device cuda, batch 64, seq 128"
    timeout 150 $BERT bench --preset bert-base --batch 64 --seq 128 --steps 10 --warmup 2 --device cuda --tf32 \
      2>&1 | grep -E '^(gemm|train|inference|precision)|error|bert bench'
    echo "== kernel profile: bench bert-base --bf16 --device cuda, inference, batch 64, seq 128"
    timeout 150 $BERT bench --preset bert-base --batch 64 --seq 128 --steps 3 --warmup 1 --mode infer --device cuda \
      --bf16 --kernel_profile 2>&1 | grep -E '^(gemm|kernels|inference)|error|bert bench'
  } > "$OUT/speed.log" 2>&1
  cat "$OUT/speed.log"
  took speed
fi

# 5. minilm: all-MiniLM-L6-v2 fine-tuned on MRPC on the GPU (.devminilm, made by gpu_bundle.sh; a call
#    of its own: with the rest it is over the 64 MiB a call; carrying .devminilm alone right after the
#    first call, whose .devbundle and build-cuda a warm machine keeps, else also .devbundle/bert,
#    .devbundle/libs.tar.xz and build-cuda/libbert_cuda.so), against the CPU's three seeds in
#    bench/results/gpu/reference/glue_mrpc_minilm_cpu.log
if [[ "$WHAT" == *" minilm "* ]] || { want all && [ -d .devminilm ]; }; then
  {
    mkdir -p $T/devminilm && cp .devminilm/model/*.json .devminilm/model/vocab.txt $T/devminilm/
    xz -dc .devminilm/model/model.safetensors.xz > $T/devminilm/model.safetensors
    for seed in 1 2 3; do
      echo "== glue MRPC all-MiniLM-L6-v2 (bf16 weights, MRPC's rows), 3 epochs, seed $seed --device cuda"
      rm -rf "$T/glue_minilm_$seed"
      timeout 120 $BERT glue --task_name MRPC --data_dir .devminilm/glue --init_checkpoint $T/devminilm \
        --output_dir "$T/glue_minilm_$seed" --do_train --do_eval --max_seq_length 128 --train_batch_size 32 \
        --learning_rate 5e-5 --num_train_epochs 3 --seed $seed --log_freq 50 --device cuda 2>&1 | grep -vE '^\s*$' | tail -n 5
    done
  } > "$OUT/minilm.log" 2>&1
  cat "$OUT/minilm.log"
  took minilm
fi

if want peer; then
  # the issue's targets are bf16 training against PyTorch's best, torch.compile, on every shape:
  # compiled runs of bert-base and bert-large at 64 x 128 and 16 x 512 (~1.5 min each, less where
  # peer_warm compiled them earlier on this machine), then bert-base eager; PEER_FP32=1 adds the
  # fp32 eager runs of run 2's table
  peer() {   # peer "what" flags...
    local what=$1
    shift
    echo "== pytorch $what"
    timeout 200 python3 bench/bench_pytorch.py --device cuda --attn sdpa --steps 10 --warmup 2 "$@" 2>&1 |
      grep -E '^(train|inference)|rror'
  }
  {
    for c in "${PEER_COMPILED[@]}"; do
      peer "${c%%|*} bf16 torch.compile, ${c#*|}$([[ $c == *pad_fraction* ]] && echo ' (computed: PyTorch pads)')" \
        $(peer_flags "$c")
    done
    peer "bert-base bf16 eager, batch 64, seq 128" --preset bert-base --precision bf16 --batch 64 --seq 128
    for preset in $([ "${PEER_FP32:-0}" = 1 ] && echo bert-base bert-large); do
      peer "$preset fp32 eager, batch 64, seq 128" --preset $preset --precision fp32 --batch 64 --seq 128
    done
    [ "${PEER_FP32:-0}" = 1 ] && peer "bert-base tf32 eager, batch 64, seq 128" --preset bert-base --precision tf32 \
      --batch 64 --seq 128
  } > "$OUT/peer.log" 2>&1
  cat "$OUT/peer.log"
  took peer
fi
