"""Fixtures for token classification (tests/test_ner.c).

1. tests/data/model/heads_token.safetensors: HuggingFace's BertForTokenClassification
   re-written on the encoder of tools/torch_bert.py (no pooler; dropout, then classifier
   Linear H -> N on every token; CrossEntropyLoss with ignore_index -100, the mean over the
   labelled tokens), run in float64 from float32 weights, eval mode. Weights (HF names),
   inputs, expected logits [B, T, N], loss and "grad.<name>" for every parameter. One padding
   token is labelled (HF computes its loss like any other's).
   Run with /usr/bin/python3 (torch).

2. tests/data/ner/seqeval_cases.json: crafted and random tag sequences with seqeval's
   micro-averaged precision, recall, F1 (and accuracy_score), in its default mode (conlleval's
   chunk rules) and its strict mode with the IOB2 and IOBES schemes. Needs seqeval
   (pip install seqeval; PYTHONPATH may point at it) and numpy.

3. tests/data/ner/{train,dev,test}.txt: a small CoNLL corpus for `bert ner` end to end
   (tests/test_ner.c): sentences from templates with person and place names, CoNLL-2003's
   four columns in train.txt, two in dev.txt, the test file with one sentence untagged.

Run: /usr/bin/python3 tools/make_ner_fixtures.py head conll
     PYTHONPATH=/path/to/seqeval /work/main/.venv/bin/python tools/make_ner_fixtures.py metric"""
import json
import os
import random
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.join(HERE, "..")


def make_head():
    import numpy as np
    import torch
    import torch.nn.functional as F
    sys.path.insert(0, HERE)
    import safetensors_io  # noqa: E402
    import torch_bert  # noqa: E402

    class TokenModel(torch.nn.Module):
        def __init__(self, cfg, num_labels):
            super().__init__()
            self.bert = torch_bert.BertModel(cfg)
            del self.bert.pooler   # BertForTokenClassification: add_pooling_layer=False
            self.classifier = torch.nn.Linear(cfg.hidden_size, num_labels)

        def forward(self, ids, types, mask, labels):
            additive = (1.0 - mask[:, None, None, :].to(self.bert.embeddings.word_embeddings.weight.dtype)) * \
                torch.finfo(torch.float32).min
            seq = self.bert.encoder(self.bert.embeddings(ids, types), additive)
            logits = self.classifier(seq)   # dropout is the identity in eval mode
            loss = F.cross_entropy(logits.view(-1, logits.size(-1)), labels.view(-1), ignore_index=-100)
            return loss, logits

    seed, NL = 8, 5
    torch.manual_seed(seed)
    cfg = torch_bert.BertConfig(vocab_size=211, hidden_size=48, num_hidden_layers=2, num_attention_heads=4,
                                intermediate_size=96, hidden_act="gelu", max_position_embeddings=24, type_vocab_size=2,
                                layer_norm_eps=1e-12, initializer_range=0.02)
    model = TokenModel(cfg, NL)
    with torch.no_grad():
        for n, p in model.named_parameters():
            p.copy_(torch.randn_like(p) * (0.05 if n.endswith("bias") else 0.1) + (1.0 if "LayerNorm.weight" in n else 0))
    weights = {k: v.detach().numpy().astype(np.float32) for k, v in model.state_dict().items()}
    model = model.double().eval()
    rng = np.random.default_rng(seed)
    B, T = 4, 16
    lengths = [16, 12, 9, 14]
    mask = np.zeros((B, T), np.int64)
    for b, n in enumerate(lengths):
        mask[b, :n] = 1
    ids = rng.integers(3, cfg.vocab_size, size=(B, T))
    ids[mask == 0] = 0
    types = np.zeros((B, T), np.int64)
    labels = rng.integers(0, NL, size=(B, T))
    labels[rng.random((B, T)) < 0.3] = -100   # later word pieces, [CLS], [SEP]
    labels[mask == 0] = -100
    labels[2, 11] = 3                          # a labelled padding token: in the loss, as in HF
    labels[1, :] = -100
    labels[1, 4] = 1                           # a sequence with one labelled token
    t = lambda a: torch.from_numpy(np.ascontiguousarray(a))  # noqa: E731
    loss, logits = model(t(ids), t(types), t(mask), t(labels))
    model.zero_grad()
    loss.backward()
    tensors = dict(weights)
    tensors.update({"input.input_ids": ids.astype(np.int32), "input.token_type_ids": types.astype(np.int32),
                    "input.attention_mask": mask.astype(np.int32), "input.token_labels": labels.astype(np.int32)})
    tensors["expect.logits0"] = logits.detach().numpy().astype(np.float32)
    tensors["expect.loss"] = np.array([loss.item()], np.float32)
    for n, p in model.named_parameters():
        tensors["grad." + n] = p.grad.numpy().astype(np.float32)
    path = os.path.join(ROOT, "tests", "data", "model", "heads_token.safetensors")
    safetensors_io.write(path, tensors, {"format": "pt", "generator": "tools/make_ner_fixtures.py", "num_labels": NL})
    print(path, "loss", loss.item())


# Crafted cases: (name, true sentences, predicted sentences); each runs in every mode whose
# scheme accepts its tags.
CRAFTED = [
    ("exact", [["B-PER", "I-PER", "O", "B-LOC"]], [["B-PER", "I-PER", "O", "B-LOC"]]),
    ("all O", [["O", "O"], ["O"]], [["O", "O"], ["O"]]),
    ("nothing predicted", [["B-PER", "O"]], [["O", "O"]]),
    ("nothing true", [["O", "O"]], [["B-MISC", "O"]]),
    ("broken: I without B", [["B-PER", "I-PER", "O"]], [["I-PER", "I-PER", "O"]]),
    ("broken: I after O mid-entity", [["B-ORG", "I-ORG", "I-ORG"]], [["B-ORG", "O", "I-ORG"]]),
    ("adjacent: B B", [["B-PER", "B-PER", "O"]], [["B-PER", "I-PER", "O"]]),
    ("adjacent: B I B I", [["B-PER", "I-PER", "B-PER", "I-PER"]], [["B-PER", "I-PER", "B-PER", "I-PER"]]),
    ("nested: another type inside", [["B-ORG", "I-ORG", "I-ORG", "I-ORG"]], [["B-ORG", "I-LOC", "I-ORG", "I-ORG"]]),
    ("type switch without B", [["B-PER", "I-PER", "B-LOC"]], [["B-PER", "I-LOC", "I-LOC"]]),
    ("entity at the sentence end", [["O", "B-LOC"], ["I-LOC", "O"]], [["O", "B-LOC"], ["B-LOC", "O"]]),
    ("across sentences", [["B-PER", "I-PER"], ["I-PER"]], [["B-PER", "I-PER"], ["I-PER"]]),
    ("bare B and I", [["B", "I", "O", "B"]], [["B", "I", "O", "I"]]),
    ("multi-dash type", [["B-PER-X", "I-PER-X", "O"]], [["B-PER-X", "I-PER-X", "O"]]),
    ("long", [["O", "B-PER", "I-PER", "O", "B-LOC", "O", "B-ORG", "I-ORG", "I-ORG", "O", "B-MISC"],
              ["B-LOC", "I-LOC", "O", "O"]],
     [["O", "B-PER", "O", "O", "B-LOC", "I-LOC", "B-ORG", "I-ORG", "I-ORG", "O", "B-PER"],
      ["B-LOC", "I-LOC", "O", "B-LOC"]]),
    ("bioes exact", [["S-PER", "O", "B-LOC", "I-LOC", "E-LOC"]], [["S-PER", "O", "B-LOC", "I-LOC", "E-LOC"]]),
    ("bioes: B I without E", [["B-LOC", "I-LOC", "E-LOC", "O"]], [["B-LOC", "I-LOC", "I-LOC", "O"]]),
    ("bioes: E alone", [["S-LOC", "O", "B-PER", "E-PER"]], [["E-LOC", "O", "E-PER", "E-PER"]]),
    ("bioes: adjacent S S", [["S-PER", "S-PER", "S-LOC"]], [["S-PER", "S-PER", "B-LOC"]]),
    ("bioes: B E type mismatch", [["B-PER", "E-PER", "O"]], [["B-PER", "E-LOC", "O"]]),
    ("bioes: I after E", [["B-ORG", "E-ORG", "O"]], [["B-ORG", "E-ORG", "I-ORG"]]),
    ("bioes: nested", [["B-ORG", "I-ORG", "I-ORG", "E-ORG"]], [["B-ORG", "S-LOC", "I-ORG", "E-ORG"]]),
    ("bioes: B B E", [["B-PER", "B-PER", "E-PER"]], [["B-PER", "B-PER", "E-PER"]]),
]


def prefixes_of(sentences):
    return {tag[0] for s in sentences for tag in s}


def make_metric():
    import warnings
    from seqeval.metrics import accuracy_score, f1_score, precision_score, recall_score
    from seqeval.scheme import IOB2, IOBES
    warnings.simplefilter("ignore")
    schemes = {"strict-iob2": (IOB2, set("BIO")), "strict-iobes": (IOBES, set("BIOES"))}

    def score(mode, y_true, y_pred):
        kw = {}
        if mode != "default":
            kw = {"mode": "strict", "scheme": schemes[mode][0]}
        return {"precision": precision_score(y_true, y_pred, **kw), "recall": recall_score(y_true, y_pred, **kw),
                "f1": f1_score(y_true, y_pred, **kw), "accuracy": accuracy_score(y_true, y_pred)}

    def modes_for(sentences):
        p = prefixes_of(sentences)
        return ["default"] + [m for m, (_, allowed) in schemes.items() if p <= allowed]

    cases = []
    for name, y_true, y_pred in CRAFTED:
        for mode in modes_for(y_true + y_pred):
            cases.append({"name": name, "mode": mode, "true": y_true, "pred": y_pred, **score(mode, y_true, y_pred)})
    rng = random.Random(34)
    for i in range(40):   # random sequences: every transition the rules distinguish
        bioes = i % 2 == 1
        prefixes = "BIOES" if bioes else "BIO"
        types = ["PER", "LOC"]

        def tag():
            p = rng.choice(prefixes)
            return "O" if p == "O" else p + "-" + rng.choice(types)

        n_sent = rng.randint(1, 3)
        lens = [rng.randint(1, 8) for _ in range(n_sent)]
        y_true = [[tag() for _ in range(n)] for n in lens]
        y_pred = [[tag() for _ in range(n)] for n in lens]
        for mode in ["default", "strict-iobes" if bioes else "strict-iob2"]:
            cases.append({"name": "random %d" % i, "mode": mode, "true": y_true, "pred": y_pred,
                          **score(mode, y_true, y_pred)})
    path = os.path.join(ROOT, "tests", "data", "ner", "seqeval_cases.json")
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        f.write('{"generator": "tools/make_ner_fixtures.py metric (seqeval)",\n "cases": [\n')
        f.write(",\n".join(json.dumps(c, separators=(",", ":")) for c in cases))   # a case a line
        f.write("\n]}\n")
    print(path, len(cases), "cases")


PEOPLE = [["John", "Smith"], ["Mary"], ["Peter", "Blackburn"], ["Anna", "Lee"], ["David"], ["Sarah", "Jones"]]
PLACES = [["Paris"], ["New", "York"], ["London"], ["Berlin"], ["Tokyo"], ["Los", "Angeles"]]
TEMPLATES = [["{P}", "lives", "in", "{L}", "."], ["{P}", "went", "to", "{L}", "yesterday", "."],
             ["In", "{L}", ",", "{P}", "met", "{P}", "."], ["The", "weather", "was", "nice", "."],
             ["{P}", "visited", "{L}", "and", "{L}", "."]]


def conll_sentences(rng, n):
    out = []
    for _ in range(n):
        words = []
        for w in rng.choice(TEMPLATES):
            if w in ("{P}", "{L}"):
                name, kind = (rng.choice(PEOPLE), "PER") if w == "{P}" else (rng.choice(PLACES), "LOC")
                words += [(x, ("B-" if i == 0 else "I-") + kind) for i, x in enumerate(name)]
            else:
                words.append((w, "O"))
        out.append(words)
    return out


def make_conll():
    rng = random.Random(34)
    d = os.path.join(ROOT, "tests", "data", "ner")
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, "train.txt"), "w") as f:
        f.write("-DOCSTART- -X- -X- O\n\n")
        for k, sent in enumerate(conll_sentences(rng, 24)):
            if k == 12:
                f.write("-DOCSTART- -X- -X- O\n\n")
            f.write("".join("%s NN B-NP %s\n" % wt for wt in sent) + "\n")
    with open(os.path.join(d, "dev.txt"), "w") as f:
        f.write("".join("".join("%s %s\n" % wt for wt in s) + "\n" for s in conll_sentences(rng, 8)))
    test = conll_sentences(rng, 5)
    with open(os.path.join(d, "test.txt"), "w") as f:
        for k, s in enumerate(test):
            f.write("".join(("%s\n" % w) if k == 4 else ("%s\t%s\n" % (w, t)) for w, t in s) + "\n")
    print(d, "train/dev/test")


if __name__ == "__main__":
    what = sys.argv[1:] or ["head", "metric", "conll"]
    if "head" in what:
        make_head()
    if "metric" in what:
        make_metric()
    if "conll" in what:
        make_conll()
