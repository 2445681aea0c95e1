#!/bin/bash
# both sides from the same start (torch-drawn head), dropout 0, 100 steps on the 8-article split
cd /work/main
while pgrep -f "/tmp/wt/bert squad" >/dev/null; do sleep 5; done
E=out/nodrop_exp; M=$E/model
./bert squad --init_checkpoint $M --vocab_file $M/vocab.txt --do_lower_case --do_train --train_file /work/shared/data/squad/v1.1/dev-v1.1.json --train_articles 8 --max_steps 100 --learning_rate 1e-4 --train_batch_size 32 --seed 1 --threads 2 --output_dir $E/bertc --log_freq 10 --json-summary $E/bertc.jsonl > $E/bertc.log 2>&1
OMP_NUM_THREADS=2 .venv-bf16peer/bin/python -W ignore bench/hf_squad_finetune.py --train_file /work/shared/data/squad/v1.1/dev-v1.1.json --train_articles 8 --predict_file out/squad_compare/squad_compare_split8/first_16_articles.json --predict_skip_articles 8 --model $M --output_dir $E/hf --seed 1 --threads 2 --max_steps 100 --lr 1e-4 --log_freq 10 --step_log $E/hf.jsonl --train_pad_row --predict_articles 1 > $E/hf.out 2> $E/hf.log
echo done > $E/done
