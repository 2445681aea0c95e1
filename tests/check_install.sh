#!/usr/bin/env bash
# `make install` as a user of the library meets it: installed into a scratch root, a C program
# (tests/data/install/use_bert.c) compiled from another folder with the installed headers and
# `pkg-config --cflags --libs bert`, run on a model folder; the installed program runs there too.
source "$(dirname "$0")/check_common.sh"
check "make install into a scratch root" make --no-print-directory install DESTDIR="$root" PREFIX=/opt/bert
check "headers, library and bert.pc in place" test -f "$root/opt/bert/include/bert/model/bert.h" \
    -a -f "$root/opt/bert/lib/libbert.a" -a -f "$root/opt/bert/lib/pkgconfig/bert.pc" \
    -a ! -e "$root/opt/bert/include/bert/model/bert_internal.h"
export PKG_CONFIG_PATH="$root/opt/bert/lib/pkgconfig"   # prefix: where DESTDIR put it
mkdir -p "$root/work"
check "a C program compiles against the installed library" sh -c \
    "cd '$root/work' && cc -std=c11 -O1 '$repo/tests/data/install/use_bert.c' \$(pkg-config --define-variable=prefix=$root/opt/bert --cflags --libs bert) -o use_bert"
check "and runs a model" sh -c "cd '$root/work' && ./use_bert '$repo/tests/data/checkpoints/hf' | grep -q 'hidden 16, \[CLS\] output\[0\] finite'"
check "the installed program runs from another folder" sh -c "cd '$root/work' && '$root/opt/bert/bin/bert' --version | grep -q bert"
summary
