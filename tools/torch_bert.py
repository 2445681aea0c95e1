"""A plain PyTorch BERT written to HuggingFace's BertForPreTraining architecture and tensor
names: the independent reference that bert.c's model is checked against
(tools/make_model_fixture.py) and a peer for benchmarks. Needs only torch (Debian's
python3-torch); no transformers.

state_dict() names match HF exactly (bert.embeddings.word_embeddings.weight, ...,
cls.predictions.transform.dense.weight, cls.predictions.bias, cls.seq_relationship.weight);
the MLM decoder weight is tied to the word embeddings, as in HF, and is not a separate entry.

The MLM head is evaluated only at the masked positions (NVIDIA's recipe), which is the same
arithmetic as HF's full-sequence head followed by selecting the labelled rows.
"""
import math
from dataclasses import dataclass, asdict

import torch
import torch.nn as nn
import torch.nn.functional as F


@dataclass
class BertConfig:
    vocab_size: int = 30522
    hidden_size: int = 768
    num_hidden_layers: int = 12
    num_attention_heads: int = 12
    intermediate_size: int = 3072
    hidden_act: str = "gelu"
    max_position_embeddings: int = 512
    type_vocab_size: int = 2
    layer_norm_eps: float = 1e-12
    hidden_dropout_prob: float = 0.1
    attention_probs_dropout_prob: float = 0.1
    initializer_range: float = 0.02

    def to_dict(self):
        return asdict(self)


PRESETS = {  # name: (layers, hidden, heads)
    "bert-tiny": (2, 128, 2),
    "bert-mini": (4, 256, 4),
    "bert-small": (4, 512, 8),
    "bert-medium": (8, 512, 8),
    "bert-base": (12, 768, 12),
    "bert-large": (24, 1024, 16),
}


def preset(name):
    layers, hidden, heads = PRESETS[name]
    return BertConfig(hidden_size=hidden, num_hidden_layers=layers, num_attention_heads=heads,
                      intermediate_size=4 * hidden)


def activation(name):
    if name == "gelu":
        return lambda x: F.gelu(x)
    if name in ("gelu_new", "gelu_pytorch_tanh"):
        # HF's NewGELUActivation: 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))
        return lambda x: 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * torch.pow(x, 3.0))))
    raise ValueError(f"unknown hidden_act {name!r}")


class BertEmbeddings(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.word_embeddings = nn.Embedding(c.vocab_size, c.hidden_size)
        self.position_embeddings = nn.Embedding(c.max_position_embeddings, c.hidden_size)
        self.token_type_embeddings = nn.Embedding(c.type_vocab_size, c.hidden_size)
        self.LayerNorm = nn.LayerNorm(c.hidden_size, eps=c.layer_norm_eps)
        self.dropout = nn.Dropout(c.hidden_dropout_prob)

    def forward(self, input_ids, token_type_ids):
        T = input_ids.shape[1]
        pos = torch.arange(T, device=input_ids.device).unsqueeze(0)
        x = self.word_embeddings(input_ids) + self.token_type_embeddings(token_type_ids) + self.position_embeddings(pos)
        return self.dropout(self.LayerNorm(x))


class BertSelfAttention(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.heads = c.num_attention_heads
        self.head_dim = c.hidden_size // c.num_attention_heads
        self.query = nn.Linear(c.hidden_size, c.hidden_size)
        self.key = nn.Linear(c.hidden_size, c.hidden_size)
        self.value = nn.Linear(c.hidden_size, c.hidden_size)
        self.dropout = nn.Dropout(c.attention_probs_dropout_prob)

    def split(self, x):
        B, T, _ = x.shape
        return x.view(B, T, self.heads, self.head_dim).permute(0, 2, 1, 3)

    def forward(self, x, additive_mask):
        q, k, v = self.split(self.query(x)), self.split(self.key(x)), self.split(self.value(x))
        scores = torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(self.head_dim) + additive_mask
        probs = self.dropout(torch.softmax(scores, dim=-1))
        ctx = torch.matmul(probs, v).permute(0, 2, 1, 3).contiguous()
        return ctx.view(x.shape)


class BertSelfOutput(nn.Module):  # also serves as BertOutput (the FFN's second half)
    def __init__(self, c, in_features):
        super().__init__()
        self.dense = nn.Linear(in_features, c.hidden_size)
        self.LayerNorm = nn.LayerNorm(c.hidden_size, eps=c.layer_norm_eps)
        self.dropout = nn.Dropout(c.hidden_dropout_prob)

    def forward(self, h, residual):
        return self.LayerNorm(self.dropout(self.dense(h)) + residual)


class BertAttention(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.self = BertSelfAttention(c)
        self.output = BertSelfOutput(c, c.hidden_size)

    def forward(self, x, additive_mask):
        return self.output(self.self(x, additive_mask), x)


class BertIntermediate(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.dense = nn.Linear(c.hidden_size, c.intermediate_size)
        self.act = activation(c.hidden_act)

    def forward(self, x):
        return self.act(self.dense(x))


class BertLayer(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.attention = BertAttention(c)
        self.intermediate = BertIntermediate(c)
        self.output = BertSelfOutput(c, c.intermediate_size)

    def forward(self, x, additive_mask):
        a = self.attention(x, additive_mask)
        return self.output(self.intermediate(a), a)


class BertEncoder(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.layer = nn.ModuleList([BertLayer(c) for _ in range(c.num_hidden_layers)])

    def forward(self, x, additive_mask):
        for layer in self.layer:
            x = layer(x, additive_mask)
        return x


class BertPooler(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.dense = nn.Linear(c.hidden_size, c.hidden_size)

    def forward(self, x):
        return torch.tanh(self.dense(x[:, 0]))


class BertModel(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.embeddings = BertEmbeddings(c)
        self.encoder = BertEncoder(c)
        self.pooler = BertPooler(c)

    def forward(self, input_ids, token_type_ids, attention_mask):
        # HF's additive mask: 0 for real tokens, the dtype's minimum for padding.
        additive = (1.0 - attention_mask[:, None, None, :].float()) * torch.finfo(torch.float32).min
        seq = self.encoder(self.embeddings(input_ids, token_type_ids), additive)
        return seq, self.pooler(seq)


class BertPredictionHeadTransform(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.dense = nn.Linear(c.hidden_size, c.hidden_size)
        self.act = activation(c.hidden_act)
        self.LayerNorm = nn.LayerNorm(c.hidden_size, eps=c.layer_norm_eps)

    def forward(self, x):
        return self.LayerNorm(self.act(self.dense(x)))


class BertLMPredictionHead(nn.Module):
    def __init__(self, c, word_embeddings):
        super().__init__()
        self.transform = BertPredictionHeadTransform(c)
        self.bias = nn.Parameter(torch.zeros(c.vocab_size))
        self.word_embeddings = [word_embeddings]  # tied decoder; a list keeps it out of state_dict

    def forward(self, x):
        return F.linear(self.transform(x), self.word_embeddings[0].weight, self.bias)


class BertPreTrainingHeads(nn.Module):
    def __init__(self, c, word_embeddings):
        super().__init__()
        self.predictions = BertLMPredictionHead(c, word_embeddings)
        self.seq_relationship = nn.Linear(c.hidden_size, 2)


class BertForPreTraining(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.config = c
        self.bert = BertModel(c)
        self.cls = BertPreTrainingHeads(c, self.bert.embeddings.word_embeddings)
        self.init_weights()

    def init_weights(self):
        std = self.config.initializer_range
        for mod in self.modules():
            if isinstance(mod, (nn.Linear, nn.Embedding)):
                nn.init.trunc_normal_(mod.weight, std=std, a=-2 * std, b=2 * std)
                if isinstance(mod, nn.Linear):
                    nn.init.zeros_(mod.bias)
            elif isinstance(mod, nn.LayerNorm):
                nn.init.ones_(mod.weight)
                nn.init.zeros_(mod.bias)

    def forward(self, input_ids, token_type_ids, attention_mask, masked_positions=None,
                masked_labels=None, next_sentence_labels=None):
        """Returns (loss or None, mlm_logits [B*P, V] or None, nsp_logits [B, 2]).
        Loss = mean CE over masked slots whose label != -1, plus mean NSP CE."""
        seq, pooled = self.bert(input_ids, token_type_ids, attention_mask)
        nsp_logits = self.cls.seq_relationship(pooled)
        mlm_logits = None
        loss = None
        if masked_positions is not None:
            H = seq.shape[-1]
            gathered = torch.gather(seq, 1, masked_positions.long().unsqueeze(-1).expand(-1, -1, H))
            mlm_logits = self.cls.predictions(gathered.reshape(-1, H))
            if masked_labels is not None:
                loss = F.cross_entropy(mlm_logits, masked_labels.reshape(-1).long(), ignore_index=-1)
        if next_sentence_labels is not None:
            nsp = F.cross_entropy(nsp_logits, next_sentence_labels.long())
            loss = nsp if loss is None else loss + nsp
        return loss, mlm_logits, nsp_logits

    def adamw_param_groups(self, weight_decay):
        """BERT/NVIDIA grouping: no weight decay for biases and LayerNorm parameters."""
        decay, no_decay = [], []
        for name, p in self.named_parameters():
            (no_decay if name.endswith("bias") or "LayerNorm" in name else decay).append(p)
        return [{"params": decay, "weight_decay": weight_decay}, {"params": no_decay, "weight_decay": 0.0}]
