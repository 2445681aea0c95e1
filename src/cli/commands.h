/* One function per `bert` subcommand; each lives in its own cli/cmd_<name>.c.
 * argv[0] is the first argument after the subcommand name. Returns the exit status. */
#ifndef BERT_COMMANDS_H
#define BERT_COMMANDS_H

int cmd_tokenize(int argc, char **argv);
int cmd_bench_allreduce(int argc, char **argv);
int cmd_vocab(int argc, char **argv);
int cmd_format(int argc, char **argv);
int cmd_shard(int argc, char **argv);
int cmd_sentences(int argc, char **argv);
int cmd_create_pretraining_data(int argc, char **argv);
int cmd_prepare(int argc, char **argv);
int cmd_train_demo(int argc, char **argv);
int cmd_bench(int argc, char **argv);
int cmd_plot(int argc, char **argv);
int cmd_pretrain(int argc, char **argv);
int cmd_glue(int argc, char **argv);
int cmd_ner(int argc, char **argv);
int cmd_classify(int argc, char **argv);
int cmd_embed(int argc, char **argv);
int cmd_serve(int argc, char **argv);
int cmd_convert(int argc, char **argv);
int cmd_squad(int argc, char **argv);
int cmd_bench_infer(int argc, char **argv);
int cmd_check_shards(int argc, char **argv);
int cmd_squad_eval(int argc, char **argv);

#endif
