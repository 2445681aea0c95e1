# throwaway: transformers' side of meangrad.c (same weights, same batch, N dropout draws)
import sys, numpy as np, torch
from transformers import BertForQuestionAnswering
model_dir, N, out = sys.argv[1], int(sys.argv[2]), sys.argv[3]
torch.set_num_threads(int(sys.argv[4]) if len(sys.argv) > 4 else 1)
raw = np.fromfile("/tmp/fd/batch.bin", dtype=np.int32)
B, T = raw[0], raw[1]; o = 2
ids = raw[o:o + B * T].reshape(B, T); o += B * T
ty = raw[o:o + B * T].reshape(B, T); o += B * T
mask = raw[o:o + B * T].reshape(B, T); o += B * T
st = raw[o:o + B]; en = raw[o + B:o + 2 * B]
m = BertForQuestionAnswering.from_pretrained(model_dir)
m.bert.embeddings.word_embeddings.padding_idx = None
print("dropout", m.config.hidden_dropout_prob, m.config.attention_probs_dropout_prob, m.config._attn_implementation, file=sys.stderr)
X = dict(input_ids=torch.tensor(ids, dtype=torch.long), token_type_ids=torch.tensor(ty, dtype=torch.long),
         attention_mask=torch.tensor(mask, dtype=torch.long), start_positions=torch.tensor(st, dtype=torch.long),
         end_positions=torch.tensor(en, dtype=torch.long))
params = dict(m.named_parameters())
sums = {k: torch.zeros_like(p, dtype=torch.float64) for k, p in params.items()}
sq = {k: 0.0 for k in params}
losses = []
m.train()
for k in range(N):
    torch.manual_seed(1000 + k)
    m.zero_grad(set_to_none=True)
    out_ = m(**X); out_.loss.backward(); losses.append(float(out_.loss))
    for name, p in params.items():
        g = p.grad.double() if p.grad is not None else torch.zeros_like(sums[name])
        sums[name] += g; sq[name] += float((g * g).sum())
m.eval(); m.zero_grad(set_to_none=True)
out_ = m(**X); out_.loss.backward()
res = {"N": N, "losses": losses, "eval_loss": float(out_.loss)}
for name, p in params.items():
    res["mean/" + name] = (sums[name] / N).numpy()
    res["eval/" + name] = p.grad.double().numpy() if p.grad is not None else np.zeros(p.shape)
    res["sq/" + name] = sq[name]
np.savez(out, **{k: np.asarray(v) for k, v in res.items()})
print("done", np.mean(losses), res["eval_loss"], file=sys.stderr)
