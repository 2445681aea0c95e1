/* Shard-folder data loader: see dataloader.h. */
#include "train/dataloader.h"

#include <dirent.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "core/rng.h"
#include "data/hdf5_shard.h"
#include "data/pyrandom.h"

/* libhdf5 is not used from two threads at once here (Debian's build is thread-safe, others
 * need not be): the prefetch thread and an evaluation pass take turns. */
static pthread_mutex_t hdf5_lock = PTHREAD_MUTEX_INITIALIZER;

typedef struct {
    int sorted_index;         /* which file (index into the sorted list); -1: empty slot */
    PretrainingShard shard;
    uint32_t *order;          /* row order */
    int32_t mask_id;          /* dynamic masking: the [MASK] id learnt from this file */
    int rc;
    BertError err;
} LoadedFile;

typedef struct {
    DataLoader *l;
    LoadedFile *slot;
    long epoch;
} PrefetchJob;

struct DataLoader {
    LoaderOptions o;
    char **files;             /* sorted paths */
    int nfiles, files_per_epoch;
    uint32_t *epoch_order;    /* this epoch's shuffled file indices */
    long order_epoch;         /* the epoch epoch_order belongs to */
    LoaderPosition pos;
    LoadedFile cur, next;
    pthread_t thread;
    bool thread_running;
    PrefetchJob job;
    /* the batch's arrays */
    int32_t *ids, *types, *mask, *positions, *labels, *nsp;
    int32_t *scratch;         /* dynamic masking: one sequence's candidate positions */
};

/* ---- files ---- */

/* The regular files with the filter in their names, sorted (NVIDIA: files.sort()); hidden
 * names (bert.c's temporaries) and others' NAME.tmp.PID are never shards. */
static int list_files(DataLoader *l, BertError *err) {
    if (list_dir_files(l->o.dir, l->o.name_filter, NULL, &l->files, &l->nfiles, err) != 0)
        return bert_fail(err, "cannot open the shard folder %s", l->o.dir);
    if (!l->nfiles) return bert_fail(err, "no shard files with '%s' in their names in %s", l->o.name_filter, l->o.dir);
    return 0;
}

/* NVIDIA: files.sort(); random.Random(seed + epoch).shuffle(files). */
static void plan_epoch(DataLoader *l, long epoch) {
    for (int i = 0; i < l->nfiles; i++) l->epoch_order[i] = (uint32_t)i;
    if (l->o.training) {
        PyRandom r;
        pyrandom_seed(&r, (int64_t)l->o.seed + epoch);
        pyrandom_shuffle(&r, l->epoch_order, (size_t)l->nfiles, sizeof(uint32_t));
    }
    l->order_epoch = epoch;
}

/* The sorted index of file k of `epoch` for this rank. */
static int file_of(DataLoader *l, long epoch, int k) {
    if (l->order_epoch != epoch) plan_epoch(l, epoch);
    long which = ((long)k * l->o.world_size + l->o.rank) % l->nfiles;
    return (int)l->epoch_order[which];
}

/* ---- loading and checking one file ---- */

static int check_shard(const DataLoader *l, const char *path, const PretrainingShard *s, BertError *err) {
    return pretraining_shard_validate(s, path, l->o.max_seq_length, l->o.max_predictions, l->o.vocab_size, err);
}

/* Slots in use: up to the first position 0 (NVIDIA's rule; [CLS] is never masked). */
static int used_slots(const int32_t *positions, int P) {
    int k = 0;
    while (k < P && positions[k] != 0) k++;
    return k;
}

/* The id most often found at masked positions: [MASK] (80% of them hold it). */
static int learn_mask_id(const DataLoader *l, const char *path, const PretrainingShard *s, int32_t *mask_id,
                         BertError *err) {
    int *count = xcalloc((size_t)l->o.vocab_size, sizeof(int));
    const int T = s->max_seq_length, P = s->max_predictions_per_seq;
    for (size_t r = 0; r < s->n; r++) {
        const int32_t *pos = s->masked_lm_positions + r * (size_t)P;
        for (int k = 0, used = used_slots(pos, P); k < used; k++) count[s->input_ids[r * (size_t)T + (size_t)pos[k]]]++;
    }
    int best = -1;
    for (int v = 0; v < l->o.vocab_size; v++)
        if (count[v] > 0 && (best < 0 || count[v] > count[best])) best = v;
    free(count);
    if (best < 0) return bert_fail(err, "%s has no masked tokens to learn the [MASK] id from", path);
    *mask_id = best;
    return 0;
}

static void row_order(const DataLoader *l, long epoch, int sorted_index, uint32_t *order, size_t n) {
    for (size_t i = 0; i < n; i++) order[i] = (uint32_t)i;
    if (!l->o.training) return;
    const uint64_t key = rng_key(rng_key(l->o.seed ^ 0x6f72646572ULL, (uint64_t)epoch), (uint64_t)sorted_index);
    for (size_t i = n; i-- > 1;) {   /* Fisher-Yates; j uniform in [0, i] by multiply-shift */
        size_t j = (size_t)(((uint64_t)rng_bits32(key, (uint32_t)i) * (i + 1)) >> 32);
        uint32_t t = order[i];
        order[i] = order[j], order[j] = t;
    }
}

static void file_release(LoadedFile *f) {
    pretraining_shard_free(&f->shard);
    free(f->order);
    f->order = NULL, f->sorted_index = -1;
}

static void file_load(DataLoader *l, LoadedFile *f, int sorted_index, long epoch) {
    const char *path = l->files[sorted_index];
    f->sorted_index = sorted_index, f->order = NULL;
    pthread_mutex_lock(&hdf5_lock);
    f->rc = hdf5_shard_load(path, &f->shard, &f->err);
    pthread_mutex_unlock(&hdf5_lock);
    if (f->rc == 0) f->rc = check_shard(l, path, &f->shard, &f->err);
    if (f->rc == 0 && l->o.dynamic_masking) f->rc = learn_mask_id(l, path, &f->shard, &f->mask_id, &f->err);
    if (f->rc == 0) {
        f->order = xmalloc(sizeof(uint32_t) * f->shard.n);
        row_order(l, epoch, sorted_index, f->order, f->shard.n);
    } else {
        pretraining_shard_free(&f->shard);
    }
}

static void *prefetch_main(void *p) {
    PrefetchJob *j = p;
    file_load(j->l, j->slot, j->slot->sorted_index, j->epoch);
    return NULL;
}

static void join_prefetch(DataLoader *l) {
    if (l->thread_running) pthread_join(l->thread, NULL);
    l->thread_running = false;
}

/* The file after position (epoch, k), loaded in the background. */
static void start_prefetch(DataLoader *l, long epoch, int k) {
    if (++k >= l->files_per_epoch) {
        if (!l->o.training) return;   /* an evaluation pass ends here */
        k = 0, epoch++;
    }
    file_release(&l->next);
    l->next.sorted_index = file_of(l, epoch, k);
    l->job = (PrefetchJob){l, &l->next, epoch};
    /* the row order depends on the epoch: remember it with the slot */
    if (pthread_create(&l->thread, NULL, prefetch_main, &l->job) == 0) l->thread_running = true;
    else prefetch_main(&l->job);
}

/* Makes file k of `epoch` current (from the prefetch when it has it). */
static int open_position(DataLoader *l, long epoch, int k, BertError *err) {
    join_prefetch(l);
    int wanted = file_of(l, epoch, k);
    file_release(&l->cur);
    if (l->next.sorted_index == wanted && l->job.epoch == epoch) {
        l->cur = l->next;
        l->next.sorted_index = -1, l->next.order = NULL;
        memset(&l->next.shard, 0, sizeof l->next.shard);
    } else {
        file_release(&l->next);
        file_load(l, &l->cur, wanted, epoch);
    }
    if (l->cur.rc != 0) {
        *err = l->cur.err;
        l->cur.sorted_index = -1;
        return -1;
    }
    start_prefetch(l, epoch, k);
    return 0;
}

/* ---- batches ---- */

/* Google's masking, drawn anew: undo the stored masks, pick 15% of the tokens (not [CLS]
 * or [SEP]), 80/10/10. Writes the row's ids, slots and labels. */
static void dynamic_mask_row(DataLoader *l, const LoadedFile *f, size_t row, int32_t *ids, int32_t *pos,
                             int32_t *lab) {
    const int T = l->o.max_seq_length, P = l->o.max_predictions;
    const int32_t *stored_pos = f->shard.masked_lm_positions + row * (size_t)P;
    const int32_t *stored_ids = f->shard.masked_lm_ids + row * (size_t)P;
    for (int k = 0, used = used_slots(stored_pos, P); k < used; k++) ids[stored_pos[k]] = stored_ids[k];
    int len = 0;
    for (int t = 0; t < T; t++) len = f->shard.input_mask[row * (size_t)T + (size_t)t] ? t + 1 : len;
    const int32_t cls = ids[0], sep = len > 0 ? ids[len - 1] : -1;
    int ncand = 0;
    for (int t = 0; t < len; t++)
        if (ids[t] != cls && ids[t] != sep) l->scratch[ncand++] = t;
    const uint64_t key = rng_key(rng_key(l->o.seed ^ 0x6d61736bULL, (uint64_t)l->pos.epoch),
                                 ((uint64_t)f->sorted_index << 32) | row);
    uint32_t counter = 0;
    int want = (int)nearbyint(len * 0.15);   /* Python's round(): halves to even, as nearbyint by default */
    want = want < 1 ? 1 : want;
    want = want > P ? P : want;
    want = want > ncand ? ncand : want;
    for (int i = 0; i < want; i++) {   /* partial Fisher-Yates: the first `want` of a random order */
        int j = i + (int)(((uint64_t)rng_bits32(key, counter++) * (uint64_t)(ncand - i)) >> 32);
        int32_t t = l->scratch[i];
        l->scratch[i] = l->scratch[j], l->scratch[j] = t;
    }
    /* ascending positions, as Google sorts the masked tokens */
    for (int i = 1; i < want; i++)
        for (int j = i; j > 0 && l->scratch[j - 1] > l->scratch[j]; j--) {
            int32_t t = l->scratch[j];
            l->scratch[j] = l->scratch[j - 1], l->scratch[j - 1] = t;
        }
    for (int k = 0; k < P; k++) pos[k] = 0, lab[k] = -1;
    for (int k = 0; k < want; k++) {
        const int t = l->scratch[k];
        pos[k] = t, lab[k] = ids[t];
        const uint32_t r = rng_bits32(key, counter++) % 10;
        if (r < 8) ids[t] = f->mask_id;
        else if (r == 8) ids[t] = (int32_t)(((uint64_t)rng_bits32(key, counter++) * (uint64_t)l->o.vocab_size) >> 32);
    }
}

static void fill_row(DataLoader *l, int b, size_t row) {
    const int T = l->o.max_seq_length, P = l->o.max_predictions;
    const PretrainingShard *s = &l->cur.shard;
    int32_t *ids = l->ids + (size_t)b * T, *pos = l->positions + (size_t)b * P, *lab = l->labels + (size_t)b * P;
    for (int t = 0; t < T; t++) {
        size_t i = row * (size_t)T + (size_t)t;
        ids[t] = s->input_ids[i], l->types[(size_t)b * T + t] = s->segment_ids[i];
        l->mask[(size_t)b * T + t] = s->input_mask[i];
    }
    l->nsp[b] = s->next_sentence_labels[row];
    if (l->o.dynamic_masking) {
        dynamic_mask_row(l, &l->cur, row, ids, pos, lab);
        return;
    }
    const int32_t *sp = s->masked_lm_positions + row * (size_t)P, *si = s->masked_lm_ids + row * (size_t)P;
    const int used = used_slots(sp, P);
    for (int k = 0; k < P; k++) pos[k] = k < used ? sp[k] : 0, lab[k] = k < used ? si[k] : -1;
}

int loader_next(DataLoader *l, BertBatch *batch, BertError *err) {
    int rows = 0;
    for (; rows < l->o.micro_batch; rows++) {
        while (l->cur.sorted_index < 0 || (size_t)l->pos.offset >= l->cur.shard.n) {
            long epoch = l->pos.epoch;
            int k = l->cur.sorted_index < 0 ? l->pos.file : l->pos.file + 1;
            if (k >= l->files_per_epoch) {
                if (!l->o.training) goto pass_ended;   /* evaluation: the rows there are */
                k = 0, epoch++;
            }
            if (open_position(l, epoch, k, err) != 0) return -1;
            l->pos = (LoaderPosition){epoch, k, 0};
        }
        fill_row(l, rows, l->cur.order[l->pos.offset++]);
    }
pass_ended:
    if (rows == 0) return 0;
    *batch = bert_pretraining_batch(rows, l->o.max_seq_length, l->o.max_predictions, l->ids, l->types, l->mask, l->positions,
                         l->labels, l->nsp);
    return 1;
}

/* ---- open, position ---- */

int loader_open(DataLoader **out, const LoaderOptions *o, BertError *err) {
    *out = NULL;
    if (o->micro_batch < 1 || o->max_seq_length < 2 || o->max_predictions < 0 || o->vocab_size < 1)
        return bert_fail(err, "data loader: bad batch %d / seq %d / predictions %d / vocab %d", o->micro_batch,
                         o->max_seq_length, o->max_predictions, o->vocab_size);
    if (o->world_size < 1 || o->rank < 0 || o->rank >= o->world_size)
        return bert_fail(err, "data loader: rank %d of %d", o->rank, o->world_size);
    DataLoader *l = xcalloc(1, sizeof *l);
    l->o = *o;
    l->cur.sorted_index = l->next.sorted_index = -1;
    if (list_files(l, err) != 0) {
        loader_close(l);
        return -1;
    }
    l->files_per_epoch = (l->nfiles + o->world_size - 1) / o->world_size;
    l->epoch_order = xmalloc(sizeof(uint32_t) * (size_t)l->nfiles);
    plan_epoch(l, 0);
    const size_t BT = (size_t)o->micro_batch * o->max_seq_length, BP = (size_t)o->micro_batch * o->max_predictions;
    l->ids = xcalloc(BT, 4), l->types = xcalloc(BT, 4), l->mask = xcalloc(BT, 4);
    l->positions = xcalloc(BP + 1, 4), l->labels = xcalloc(BP + 1, 4), l->nsp = xcalloc((size_t)o->micro_batch, 4);
    l->scratch = xcalloc((size_t)o->max_seq_length, 4);
    *out = l;
    return 0;
}

void loader_close(DataLoader *l) {
    if (!l) return;
    join_prefetch(l);
    file_release(&l->cur), file_release(&l->next);
    for (int i = 0; i < l->nfiles; i++) free(l->files[i]);
    free(l->files), free(l->epoch_order);
    free(l->ids), free(l->types), free(l->mask), free(l->positions), free(l->labels), free(l->nsp), free(l->scratch);
    free(l);
}

LoaderPosition loader_position(const DataLoader *l) { return l->pos; }

int loader_seek(DataLoader *l, const LoaderPosition *p, BertError *err) {
    if (p->epoch < 0 || p->file < 0 || p->file >= l->files_per_epoch || p->offset < 0)
        return bert_fail(err, "data position (epoch %ld, file %d, offset %ld) is outside this folder's %d files "
                              "per epoch", p->epoch, p->file, p->offset, l->files_per_epoch);
    if (open_position(l, p->epoch, p->file, err) != 0) return -1;
    if ((size_t)p->offset > l->cur.shard.n)
        return bert_fail(err, "data position: offset %ld past the %zu sequences of %s", p->offset, l->cur.shard.n,
                         l->files[l->cur.sorted_index]);
    l->pos = *p;
    return 0;
}

int loader_rewind(DataLoader *l, BertError *err) {
    LoaderPosition start = {0, 0, 0};
    return loader_seek(l, &start, err);
}

int loader_file_count(const DataLoader *l) { return l->nfiles; }
