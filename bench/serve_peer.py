"""The server a CPU user would put up for sentence embeddings without bert.c, for
bench/run_serve_bench.sh: FastAPI on uvicorn (one process) over sentence-transformers (PyTorch,
fp32), with the cheap dynamic batching such a wrapper gets: an asyncio queue whose worker
takes what arrives within MAX_WAIT_MS (up to MAX_BATCH texts) and encodes it as one batch in a
thread, so the event loop keeps accepting requests meanwhile. Speaks text-embeddings-
inference's POST /embed ({"inputs": text or [texts]} -> [[floats]], normalised mean pooling,
the model folder's modules) and GET /health, as bert serve does.

    python bench/serve_peer.py MODEL_DIR PORT [THREADS] [MAX_WAIT_MS] [MAX_BATCH]"""
import asyncio
import json
import sys

import torch
import uvicorn
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, Response
from sentence_transformers import SentenceTransformer

MODEL_DIR, PORT = sys.argv[1], int(sys.argv[2])
THREADS = int(sys.argv[3]) if len(sys.argv) > 3 else 2
MAX_WAIT = (float(sys.argv[4]) if len(sys.argv) > 4 else 2.0) / 1000
MAX_BATCH = int(sys.argv[5]) if len(sys.argv) > 5 else 128

torch.set_num_threads(THREADS)
model = SentenceTransformer(MODEL_DIR, device="cpu")
model.max_seq_length = 256   # bert serve's default, and all-MiniLM-L6-v2's
app = FastAPI()
queue: asyncio.Queue = asyncio.Queue()


def encode(texts):
    with torch.inference_mode():
        return model.encode(texts, batch_size=len(texts), normalize_embeddings=True, convert_to_numpy=True)


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
        texts = [t for batch, _ in items for t in batch]
        try:
            vectors = await loop.run_in_executor(None, encode, texts)
        except Exception as e:  # every waiting request hears of it
            for _, fut in items:
                fut.set_exception(e)
            continue
        at = 0
        for batch, fut in items:
            fut.set_result(vectors[at:at + len(batch)])
            at += len(batch)


@app.on_event("startup")
async def start_batcher():
    asyncio.get_running_loop().create_task(batcher())


@app.get("/health")
async def health():
    return {"status": "ok"}


@app.post("/embed")
async def embed(request: Request):
    body = await request.json()
    inputs = body.get("inputs")
    texts = [inputs] if isinstance(inputs, str) else inputs
    if not texts or not all(isinstance(t, str) and t for t in texts):
        return JSONResponse({"error": "inputs: a text or a list of texts"}, status_code=400)
    fut = asyncio.get_running_loop().create_future()
    await queue.put((texts, fut))
    vectors = await fut
    return Response(json.dumps(vectors.tolist()), media_type="application/json")


if __name__ == "__main__":
    uvicorn.run(app, host="127.0.0.1", port=PORT, log_level="warning", access_log=False)
