#!/usr/bin/env bash
# Quick start on a fresh Debian machine: install dependencies, build, and run the main job
# on the bundled default data (a few minutes on 2 cores):
#   1. bert prepare   the bundled public-domain books (data/corpus/books) -> formatted text
#                     -> sentence shards -> phase-1 (seq 128, 20 predictions) and phase-2
#                     (seq 512, 80 predictions) HDF5 shards in NVIDIA's layout, in prepared/;
#   2. bert pretrain  phase 1 of a small BERT on those shards (LAMB, PolyWarmUp schedule,
#                     2 micro-batches accumulated per step, held-out evaluation, checkpoints),
#                     then phase 2 from phase 1's checkpoint, into pretrain_out/;
#   3. bert plot      the loss, accuracy and learning-rate curves -> pretrain_out/curves.svg.
# The checkpoints (pretrain_out/ckpt_<step>/model.safetensors + config.json) use
# HuggingFace's names: BertForPreTraining.from_pretrained loads them.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
make -j"$(nproc)"
echo
echo "== bert prepare: bundled books -> pre-training shards (prepared/) =="
./bert prepare --output_dir prepared
P1=prepared/hdf5_lower_case_1_seq_len_128_max_pred_20_masked_lm_prob_0.15_random_seed_12345_dupe_factor_5/bookscorpus
P2=prepared/hdf5_lower_case_1_seq_len_512_max_pred_80_masked_lm_prob_0.15_random_seed_12345_dupe_factor_5/bookscorpus
OUT=pretrain_out
rm -rf "$OUT"
echo
echo "== bert pretrain, phase 1: bert-tiny, seq 128, LAMB =="
./bert pretrain --input_dir "$P1" --bert_model bert-tiny --output_dir "$OUT" \
    --train_batch_size 64 --gradient_accumulation_steps 2 --max_steps 300 \
    --learning_rate 5e-3 --warmup_proportion 0.1 --num_steps_per_checkpoint 100 \
    --log_freq 25 --eval_steps 100 --eval_batches 20 --json-summary "$OUT/phase1.json"
echo
echo "== bert pretrain, phase 2: seq 512, from phase 1's checkpoint =="
./bert pretrain --input_dir "$P2" --bert_model bert-tiny --output_dir "$OUT" \
    --max_seq_length 512 --max_predictions_per_seq 80 \
    --phase2 --phase1_end_step 300 --resume_from_checkpoint \
    --train_batch_size 16 --gradient_accumulation_steps 2 --max_steps 40 \
    --learning_rate 2e-3 --warmup_proportion 0.1 --num_steps_per_checkpoint 20 \
    --log_freq 10 --eval_steps 20 --eval_batches 5 --json-summary "$OUT/phase2.json"
echo
./bert plot "$OUT/phase1.json" "$OUT/phase2.json" --title "bert-tiny on the bundled books" -o "$OUT/curves.svg"
