#!/bin/bash
# bert.c, dropout on (0.1), the whole split (8 articles, 2 epochs, lr 1e-4, seed 1), starting from
# MiniLM + the qa_outputs head torch drew in bench/squad_parity.sh (torch.manual_seed(7)) instead of bert.c's draw
cd /work/main
E=out/headexp; M=out/torchhead_model
SQ=/work/shared/data/squad/v1.1/dev-v1.1.json
PF=out/squad_compare/squad_compare_split8/first_16_articles.json
B=out/squad_compare/squad_compare_split8/bert
$B squad --init_checkpoint $M --vocab_file $M/vocab.txt --do_lower_case --do_train --train_file $SQ --train_articles 8 --num_train_epochs 2 --learning_rate 1e-4 --train_batch_size 32 --seed 1 --threads 2 --output_dir $E/bertc/model --log_freq 10 > $E/bertc.train.log 2>&1
$B squad --init_checkpoint $E/bertc/model --vocab_file $M/vocab.txt --do_lower_case --do_predict --predict_file $PF --predict_skip_articles 8 --do_eval --threads 2 --output_dir $E/bertc > $E/bertc.predict.log 2>&1
$B squad_eval $E/bertc/predict_articles.json $E/bertc/predictions.json > $E/bertc.eval.json
