#!/bin/bash
# the whole split (8 articles, 2 epochs, lr 1e-4, seed 1) with dropout off on both sides, from one start
# (MiniLM + a torch-drawn qa_outputs head, config with both dropout rates 0: out/nodrop_exp/model)
cd /work/main
E=out/nodrop_full; M=out/nodrop_exp/model
SQ=/work/shared/data/squad/v1.1/dev-v1.1.json
PF=out/squad_compare/squad_compare_split8/first_16_articles.json
B=out/squad_compare/squad_compare_split8/bert
$B squad --init_checkpoint $M --vocab_file $M/vocab.txt --do_lower_case --do_train --train_file $SQ --train_articles 8 --num_train_epochs 2 --learning_rate 1e-4 --train_batch_size 32 --seed 1 --threads 2 --output_dir $E/bertc/model --log_freq 10 > $E/bertc.train.log 2>&1
$B squad --init_checkpoint $E/bertc/model --vocab_file $M/vocab.txt --do_lower_case --do_predict --predict_file $PF --predict_skip_articles 8 --do_eval --threads 2 --output_dir $E/bertc > $E/bertc.predict.log 2>&1
$B squad_eval $E/bertc/predict_articles.json $E/bertc/predictions.json > $E/bertc.eval.json
OMP_NUM_THREADS=2 .venv-bf16peer/bin/python -W ignore bench/hf_squad_finetune.py --train_file $SQ --train_articles 8 --predict_file $SQ --predict_skip_articles 8 --predict_articles 8 --model $M --output_dir $E/hf --seed 1 --epochs 2 --batch 32 --lr 1e-4 --threads 2 --bert $B --log_freq 10 --step_log $E/hf.steps.jsonl --train_pad_row > $E/hf.json 2> $E/hf.log
echo done > $E/done
