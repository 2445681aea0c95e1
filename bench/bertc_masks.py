"""bert.c's dropout masks and batch order inside a transformers BertForQuestionAnswering (or a
BertForTokenClassification: its classifier's dropout too), so that
both sides can train under dropout with the same random draws and be compared step by step
(bench/squad_parity.sh; `hf_squad_finetune.py --bertc_masks`).

bert.c's masks are a pure function of (key, element counter) (src/core/rng.h): a fine-tuning
micro-batch k gets the key rng_key(rng_key(seed, 0xF17E), k) (src/train/finetune.c); each
dropout site s of it the key rng_key(that, s), with s = 0 for the embeddings and
1 + 3 * layer + {0: attention probabilities, 1: attention output, 2: feed-forward output}
(src/model/bert_internal.h). An element is kept when rng_bits32(site key, counter) reaches
p * 2^32 and then scaled by 1 / (1 - p) (float32). Counters: a hidden state's element (row, c) of
the [B * T, H] batch is row * H + c; an attention probability (b, head, i, j) is
((b * heads + head) * T + i) * T + j (src/kernels/kernels_cpu.c). The epoch's feature order is
bert.c's Fisher-Yates shuffle keyed by rng_key(seed, epoch) (src/tasks/squad_run.c).

Written from those definitions (the C code is the reference); if this file and bert.c disagree,
the step-1 losses of the two sides differ, which is what squad_parity.sh would show.
"""
import numpy as np
import torch
from torch import nn

from bertc_rng import bits32_array, check_rng, dropout_threshold, rng_key, shuffled


def bertc_dropout(x, p, key):
    """x (any shape, counters in x's row-major order) with bert.c's mask for key applied."""
    if p <= 0:
        return x
    keep = torch.from_numpy(bits32_array(key, x.numel()) >= np.uint32(dropout_threshold(p))).view(x.shape)
    scale = float(np.float32(1.0) / (np.float32(1.0) - np.float32(p)))
    return torch.where(keep, x * scale, torch.zeros((), dtype=x.dtype))


class BertcMasks:
    """Installs bert.c's masks in model (a BertForQuestionAnswering loaded with
    attn_implementation="eager"); call next_micro_batch() before each training forward, and
    take each epoch's feature order from epoch_order()."""

    def __init__(self, model, seed):
        import transformers.models.bert.modeling_bert as mb
        check_rng()
        self.seed, self.micro_batch, self.key = seed, -1, None
        bert = model.bert
        self._site(bert.embeddings, "dropout", 0)
        for layer_index, layer in enumerate(bert.encoder.layer):
            self._site(layer.attention.output, "dropout", 2 + 3 * layer_index)
            self._site(layer.output, "dropout", 3 + 3 * layer_index)
            layer.attention.self.bertc_site = 1 + 3 * layer_index
        if hasattr(model, "classifier") and hasattr(model, "dropout"):
            # a token classifier's dropout over every row (bert_forward.c: classifier_dropout_site,
            # after the last layer's sites; counters row * H + c as for the hidden states)
            self._site(model, "dropout", 1 + 3 * len(bert.encoder.layer))
        masks, eager = self, mb.eager_attention_forward

        def attention(module, query, key, value, attention_mask, scaling=None, dropout=0.0, **kwargs):
            if not module.training or dropout <= 0:
                return eager(module, query, key, value, attention_mask, scaling=scaling, dropout=0.0, **kwargs)
            w = torch.matmul(query, key.transpose(2, 3)) * scaling
            if attention_mask is not None:
                w = w + attention_mask
            w = nn.functional.softmax(w, dim=-1)
            w = bertc_dropout(w, dropout, masks.site_key(module.bertc_site))
            return torch.matmul(w, value).transpose(1, 2).contiguous(), w
        mb.eager_attention_forward = attention

    def site_key(self, site):
        return rng_key(self.key, site)

    def _site(self, owner, name, site):
        masks, p = self, getattr(owner, name).p

        class Site(nn.Module):
            def forward(self, x):
                return bertc_dropout(x, p, masks.site_key(site)) if self.training else x
        setattr(owner, name, Site())

    def epoch_order(self, n, epoch):
        """bert.c's order of n features in epoch (0, 1, ...)."""
        return shuffled(n, rng_key(self.seed, epoch))

    def next_micro_batch(self):
        self.micro_batch += 1
        self.key = rng_key(rng_key(self.seed, 0xF17E), self.micro_batch)
