"""The server a CPU user would put up without bert.c, for bench/run_serve_bench.sh: FastAPI on
uvicorn (one process) over PyTorch fp32, with the cheap dynamic batching such a wrapper gets:
an asyncio queue whose worker takes what arrives within MAX_WAIT_MS (up to MAX_BATCH inputs)
and runs it as one batch in a thread, so the event loop keeps accepting requests meanwhile.
Speaks bert serve's endpoints for TASK, and GET /health:
  embed     text-embeddings-inference's POST /embed ({"inputs": text or [texts]} -> [[floats]]):
            sentence-transformers over the folder's modules (normalised mean pooling)
  classify  TEI's POST /predict ({"inputs": text, [a, b] or a list of them} -> [{"score",
            "label"}] highest first): transformers' AutoModelForSequenceClassification, pairs as
            its tokenizer joins them, max_seq_length 128, softmax
  qa        POST /v1/qa ({"question", "context"} -> {"answer", "start", "end", "score"}):
            AutoModelForQuestionAnswering over the context's windows (384 tokens, stride 128,
            the question cut to 64 tokens), the best span of at most 30 tokens among the 20 top
            starts and ends, as HuggingFace's course and its removed question-answering
            pipeline do (transformers 5 has no such pipeline)

    python bench/serve_peer.py MODEL_DIR PORT [THREADS] [MAX_WAIT_MS] [MAX_BATCH] [TASK]"""
import asyncio
import json
import sys

import numpy as np
import torch
import uvicorn
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, Response

MODEL_DIR, PORT = sys.argv[1], int(sys.argv[2])
THREADS = int(sys.argv[3]) if len(sys.argv) > 3 else 2
MAX_WAIT = (float(sys.argv[4]) if len(sys.argv) > 4 else 2.0) / 1000
MAX_BATCH = int(sys.argv[5]) if len(sys.argv) > 5 else 128
TASK = sys.argv[6] if len(sys.argv) > 6 else "embed"

torch.set_num_threads(THREADS)
app = FastAPI()
queue: asyncio.Queue = asyncio.Queue()

if TASK == "embed":
    from sentence_transformers import SentenceTransformer
    st_model = SentenceTransformer(MODEL_DIR, device="cpu")
    st_model.max_seq_length = 256   # bert serve's default, and all-MiniLM-L6-v2's

    def compute(texts):
        return list(st_model.encode(texts, batch_size=len(texts), normalize_embeddings=True, convert_to_numpy=True))
else:
    from transformers import AutoModelForQuestionAnswering, AutoModelForSequenceClassification, AutoTokenizer
    tokenizer = AutoTokenizer.from_pretrained(MODEL_DIR)
    model = (AutoModelForSequenceClassification if TASK == "classify" else AutoModelForQuestionAnswering) \
        .from_pretrained(MODEL_DIR).eval()
    labels = [model.config.id2label[k] for k in range(model.config.num_labels)]

if TASK == "classify":
    def compute(pairs):
        enc = tokenizer([a for a, _ in pairs], [b for _, b in pairs] if any(b for _, b in pairs) else None,
                        padding=True, truncation=True, max_length=128, return_tensors="pt")
        with torch.inference_mode():
            probs = model(**enc).logits.softmax(-1).numpy()
        return [sorted(({"score": float(p[k]), "label": labels[k]} for k in range(len(labels))),
                       key=lambda x: -x["score"]) for p in probs]
elif TASK == "qa":
    def best_span(start, end, offsets, seq_ids):
        best = None
        for s in np.argsort(start)[::-1][:20]:
            for e in np.argsort(end)[::-1][:20]:
                if seq_ids[s] != 1 or seq_ids[e] != 1 or e < s or e - s + 1 > 30:
                    continue
                score = start[s] + end[e]
                if best is None or score > best[0]:
                    best = (score, offsets[s][0], offsets[e][1])
        return best

    def compute(items):
        questions = [q[:1000] for q, _ in items]
        enc = tokenizer(questions, [c for _, c in items], truncation="only_second", max_length=384, stride=128,
                        return_overflowing_tokens=True, return_offsets_mapping=True, padding=True,
                        return_tensors="pt")
        owner, offsets = enc.pop("overflow_to_sample_mapping").tolist(), enc.pop("offset_mapping").tolist()
        seq_ids = [enc.sequence_ids(w) for w in range(len(owner))]
        with torch.inference_mode():
            out = model(**enc)
        start, end = out.start_logits.numpy(), out.end_logits.numpy()
        answers = [None] * len(items)
        for w, i in enumerate(owner):
            span = best_span(start[w], end[w], offsets[w], seq_ids[w])
            if span and (answers[i] is None or span[0] > answers[i][0]):
                ps, pe = np.exp(start[w] - start[w].max()), np.exp(end[w] - end[w].max())
                answers[i] = (span[0], span[1], span[2], float(ps.max() / ps.sum() * pe.max() / pe.sum()))
        return [{"answer": items[i][1][a[1]:a[2]], "start": a[1], "end": a[2], "score": a[3]} if a
                else {"answer": "", "start": 0, "end": 0, "score": 0.0} for i, a in enumerate(answers)]


async def batcher():
    loop = asyncio.get_running_loop()
    while True:
        items = [await queue.get()]
        deadline = loop.time() + MAX_WAIT
        while sum(len(t) for t, _ in items) < MAX_BATCH:
            try:
                items.append(await asyncio.wait_for(queue.get(), max(0.0, deadline - loop.time())))
            except asyncio.TimeoutError:
                break
        inputs = [t for batch, _ in items for t in batch]
        try:
            results = await loop.run_in_executor(None, compute, inputs)
        except Exception as e:  # every waiting request hears of it
            for _, fut in items:
                fut.set_exception(e)
            continue
        at = 0
        for batch, fut in items:
            fut.set_result(results[at:at + len(batch)])
            at += len(batch)


async def submit(inputs):
    fut = asyncio.get_running_loop().create_future()
    await queue.put((inputs, fut))
    return await fut


@app.on_event("startup")
async def start_batcher():
    asyncio.get_running_loop().create_task(batcher())


@app.get("/health")
async def health():
    return {"status": "ok"}


def bad(msg):
    return JSONResponse({"error": msg}, status_code=400)


@app.post("/embed")
async def embed(request: Request):
    inputs = (await request.json()).get("inputs")
    texts = [inputs] if isinstance(inputs, str) else inputs
    if TASK != "embed" or not texts or not all(isinstance(t, str) and t for t in texts):
        return bad("inputs: a text or a list of texts (TASK embed)")
    vectors = await submit(texts)
    return Response(json.dumps([v.tolist() for v in vectors]), media_type="application/json")


@app.post("/predict")
async def predict(request: Request):
    inputs = (await request.json()).get("inputs")
    one = isinstance(inputs, str) or (isinstance(inputs, list) and inputs and isinstance(inputs[0], str))
    items = [inputs] if one else inputs
    pairs = [(x, None) if isinstance(x, str) else (x[0], x[1] if len(x) > 1 else None) for x in items or []]
    if TASK != "classify" or not pairs:
        return bad("inputs: a text, a pair [a, b] or a list of them (TASK classify)")
    scores = await submit(pairs)
    return Response(json.dumps(scores[0] if one else scores), media_type="application/json")


@app.post("/v1/qa")
async def qa(request: Request):
    body = await request.json()
    q, c = body.get("question"), body.get("context")
    if TASK != "qa" or not isinstance(q, str) or not isinstance(c, str) or not q or not c:
        return bad("question and context: texts (TASK qa)")
    return Response(json.dumps((await submit([(q, c)]))[0]), media_type="application/json")


if __name__ == "__main__":
    uvicorn.run(app, host="127.0.0.1", port=PORT, log_level="warning", access_log=False)
