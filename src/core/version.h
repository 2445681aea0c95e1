/* bert.c's version, shown by `bert --version` with the build it was compiled as. */
#ifndef BERT_VERSION_H
#define BERT_VERSION_H

#define BERT_VERSION "0.1.0"

#endif
