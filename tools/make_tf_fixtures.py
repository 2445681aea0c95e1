"""Writes the TensorFlow checkpoint (TensorBundle) fixtures of tests/test_tf_checkpoint.c
under tests/data/tf/, with TensorFlow itself as the writer and the reference:

  v1/model.ckpt.*     tf.compat.v1.train.Saver over variables named like Google's BERT
                      release (float32, float16, bfloat16, float64, int64, int32, an empty one)
  v2/ckpt.*           tf.train.Checkpoint.write (TF2; holds the string tensor
                      _CHECKPOINTABLE_OBJECT_GRAPH, which the reader skips)
  sharded/model.ckpt.*  a Saver(sharded=True) checkpoint of variables on two CPU devices:
                      two data files, model.ckpt.data-0000{0,1}-of-00002
  small_blocks/model.ckpt.*  v1's index rewritten with 96-byte data blocks and a restart
                      every 2 entries (TF writes 256 KiB blocks, so a small checkpoint has one):
                      several data blocks and restart points; TensorFlow reads it back below to v1's
                      values, so the test checks it against v1/expected.txt
  <ckpt>/expected.txt one line per tensor TensorFlow lists (string tensors left out):
                      name, our dtype name, shape (comma-separated, "-" for a scalar), .npy file
  <ckpt>/<k>.npy      the tensor's values as TensorFlow reads them (bfloat16 stored as uint16:
                      the test compares bytes)
  hostile/*.ckpt.*    one-entry checkpoints written here that TensorFlow would refuse: a
                      shape whose element count overflows int64, an entry size that does not
                      match its shape, a partitioned (sliced) entry, a big-endian header.
                      Other hostile files (truncation, bad magic, crc, compression, short or
                      missing data) are made by the test from v1's files.
  tests/fuzz/corpus/tf_checkpoint/*  the fuzz target's seeds: each checkpoint above as one
                      input (4-byte little-endian index length, the .index, the data shard)

Run from the repository root:  .venv/bin/python tools/make_tf_fixtures.py"""
import os
import shutil
import struct

import numpy as np
import tensorflow as tf

OUT = "tests/data/tf"
MAGIC = 0xDB4775248B80FB57
OUR_DTYPE = {tf.float32: "F32", tf.float16: "F16", tf.bfloat16: "BF16", tf.float64: "F64",
             tf.int64: "I64", tf.int32: "I32"}


# ---- crc32c (Castagnoli, reflected 0x82F63B78) and LevelDB's mask ----
def _crc_table():
    t = []
    for i in range(256):
        c = i
        for _ in range(8):
            c = (c >> 1) ^ 0x82F63B78 if c & 1 else c >> 1
        t.append(c)
    return t


CRC_TABLE = _crc_table()


def crc32c(data):
    c = 0xFFFFFFFF
    for b in data:
        c = CRC_TABLE[(c ^ b) & 0xFF] ^ (c >> 8)
    return c ^ 0xFFFFFFFF


def mask(c):
    return (((c >> 15) | (c << 17)) + 0xA282EAD8) & 0xFFFFFFFF


assert crc32c(b"123456789") == 0xE3069283


# ---- varints, SSTable reading and writing ----
def varint(v):
    out = bytearray()
    while v >= 0x80:
        out.append((v & 0x7F) | 0x80)
        v >>= 7
    out.append(v)
    return bytes(out)


def get_varint(buf, pos):
    v = shift = 0
    while True:
        b = buf[pos]
        pos += 1
        v |= (b & 0x7F) << shift
        shift += 7
        if b < 0x80:
            return v, pos


def block_entries(block):
    (n_restarts,) = struct.unpack_from("<I", block, len(block) - 4)
    end = len(block) - 4 * (1 + n_restarts)
    pos, key, out = 0, b"", []
    while pos < end:
        shared, pos = get_varint(block, pos)
        non_shared, pos = get_varint(block, pos)
        vlen, pos = get_varint(block, pos)
        key = key[:shared] + block[pos:pos + non_shared]
        pos += non_shared
        out.append((key, block[pos:pos + vlen]))
        pos += vlen
    return out


def read_block(f, off, size):
    blk = f[off:off + size + 5]
    assert blk[size] == 0 and struct.unpack_from("<I", blk, size + 1)[0] == mask(crc32c(blk[:size + 1]))
    return blk[:size]


def table_entries(data):
    footer = data[-48:]
    assert struct.unpack_from("<Q", footer, 40)[0] == MAGIC
    _, pos = get_varint(footer, 0)
    _, pos = get_varint(footer, pos)
    ioff, pos = get_varint(footer, pos)
    isize, pos = get_varint(footer, pos)
    out = []
    for _, handle in block_entries(read_block(data, ioff, isize)):
        off, p = get_varint(handle, 0)
        size, _ = get_varint(handle, p)
        out += block_entries(read_block(data, off, size))
    return out


def build_block(entries, restart_interval):
    out, restarts, prev = bytearray(), [], b""
    for i, (k, v) in enumerate(entries):
        shared = 0
        if i % restart_interval == 0:
            restarts.append(len(out))
        else:
            while shared < min(len(k), len(prev)) and k[shared] == prev[shared]:
                shared += 1
        out += varint(shared) + varint(len(k) - shared) + varint(len(v)) + k[shared:] + v
        prev = k
    if not restarts:
        restarts = [0]
    for r in restarts:
        out += struct.pack("<I", r)
    return bytes(out + struct.pack("<I", len(restarts)))


def put_block(out, block):
    handle = varint(len(out)) + varint(len(block))
    out += block + b"\0" + struct.pack("<I", mask(crc32c(block + b"\0")))
    return handle


def write_table(path, entries, block_bytes=1 << 18, restart_interval=16):
    """An SSTable as TensorFlow's table_builder lays it out: data blocks cut once they reach
    block_bytes, an empty metaindex block, the index block (last key of each data block ->
    handle), the 48-byte footer."""
    out, index, cur = bytearray(), [], []
    for k, v in entries:
        cur.append((k, v))
        if len(build_block(cur, restart_interval)) >= block_bytes:
            index.append((k, put_block(out, build_block(cur, restart_interval))))
            cur = []
    if cur:
        index.append((cur[-1][0], put_block(out, build_block(cur, restart_interval))))
    meta = put_block(out, build_block([], 1))
    idx = put_block(out, build_block(index, 1))
    footer = (meta + idx).ljust(40, b"\0") + struct.pack("<Q", MAGIC)
    with open(path, "wb") as f:
        f.write(bytes(out) + footer)


# ---- the tiny protobufs of the bundle ----
def pb_varint(field, v):
    return varint(field << 3) + varint(v & 0xFFFFFFFFFFFFFFFF)


def pb_bytes(field, b):
    return varint(field << 3 | 2) + varint(len(b)) + b


def header_proto(num_shards=1, big_endian=False):
    version = pb_varint(1, 1)
    return pb_varint(1, num_shards) + (pb_varint(2, 1) if big_endian else b"") + pb_bytes(3, version)


def entry_proto(dtype, shape, offset, size, crc, slices=False):
    shape_pb = b"".join(pb_bytes(2, pb_varint(1, d)) for d in shape)
    out = pb_varint(1, dtype) + pb_bytes(2, shape_pb) + pb_varint(4, offset) + pb_varint(5, size)
    out += varint(6 << 3 | 5) + struct.pack("<I", crc)
    if slices:
        out += pb_bytes(7, pb_bytes(1, pb_bytes(1, pb_varint(1, 0) + pb_varint(2, 2))))
    return out


# ---- the checkpoints ----
def expected(prefix, folder):
    """Writes expected.txt and the .npy files from TensorFlow's own reading of prefix."""
    reader = tf.train.load_checkpoint(prefix)
    dtypes = reader.get_variable_to_dtype_map()
    lines = []
    for k, name in enumerate(sorted(dtypes)):
        if dtypes[name] not in OUR_DTYPE:
            continue
        value = np.asarray(reader.get_tensor(name))
        if dtypes[name] == tf.bfloat16:
            value = value.view(np.uint16)
        np.save(os.path.join(folder, f"{k}.npy"), np.ascontiguousarray(value))
        shape = ",".join(str(d) for d in value.shape) or "-"
        lines.append(f"{name}\t{OUR_DTYPE[dtypes[name]]}\t{shape}\t{k}.npy\n")
    with open(os.path.join(folder, "expected.txt"), "w") as f:
        f.writelines(lines)
    return len(lines)


def ramp(shape, scale, offset=0.0):
    n = int(np.prod(shape))
    return ((np.arange(n, dtype=np.float64) - n / 3) * scale + offset).reshape(shape)


def write_v1(folder):
    tf.compat.v1.disable_eager_execution()
    g = tf.Graph()
    with g.as_default():
        v = tf.compat.v1.get_variable
        specs = [
            ("bert/embeddings/word_embeddings", ramp([12, 8], 0.01), tf.float32),
            ("bert/embeddings/LayerNorm/gamma", ramp([8], 0.1, 1.0), tf.float32),
            ("bert/embeddings/LayerNorm/beta", ramp([8], -0.05), tf.float32),
            ("bert/encoder/layer_0/attention/self/query/kernel", ramp([8, 8], 0.003), tf.float32),
            ("bert/encoder/layer_0/attention/self/query/bias", ramp([8], 0.02), tf.float32),
            ("cls/predictions/output_bias", ramp([12], 0.5), tf.float16),
            ("bert/pooler/dense/kernel_bf16", ramp([2, 3], 0.75), tf.bfloat16),
            ("bert/double_precision", ramp([4], 1e-3), tf.float64),
            ("bert/int32_counts", ramp([5], 7.0).astype(np.int64), tf.int32),
            ("bert/empty", np.zeros([0, 4]), tf.float32),
        ]
        for name, value, dtype in specs:
            v(name, initializer=tf.constant(value, dtype=dtype))
        v("global_step", initializer=tf.constant(123456789012, dtype=tf.int64), trainable=False)
        saver = tf.compat.v1.train.Saver()
        with tf.compat.v1.Session(graph=g) as sess:
            sess.run(tf.compat.v1.global_variables_initializer())
            saver.save(sess, os.path.join(folder, "model.ckpt"), write_meta_graph=False,
                       write_state=False)
    tf.compat.v1.enable_eager_execution()


def write_sharded(folder):
    tf.compat.v1.disable_eager_execution()
    g = tf.Graph()
    with g.as_default():
        with tf.device("/cpu:0"):
            tf.compat.v1.get_variable("bert/shard0/kernel", initializer=tf.constant(ramp([2, 3], 0.25), tf.float32))
        with tf.device("/cpu:1"):
            tf.compat.v1.get_variable("bert/shard1/bias", initializer=tf.constant(ramp([5], 0.5), tf.float64))
        saver = tf.compat.v1.train.Saver(sharded=True)
        config = tf.compat.v1.ConfigProto(device_count={"CPU": 2}, allow_soft_placement=False)
        with tf.compat.v1.Session(graph=g, config=config) as sess:
            sess.run(tf.compat.v1.global_variables_initializer())
            saver.save(sess, os.path.join(folder, "model.ckpt"), write_meta_graph=False, write_state=False)
    tf.compat.v1.enable_eager_execution()
    assert sorted(os.listdir(folder))[1] == "model.ckpt.data-00001-of-00002"


def write_v2(folder):
    module = tf.Module()
    module.kernel = tf.Variable(ramp([3, 4], 0.125), dtype=tf.float32)
    module.bias = tf.Variable(ramp([4], 0.5), dtype=tf.float16)
    tf.train.Checkpoint(model=module).write(os.path.join(folder, "ckpt"))


def write_small_blocks(src, folder):
    for name in os.listdir(src):
        if name.startswith("model.ckpt.data"):
            shutil.copy(os.path.join(src, name), os.path.join(folder, name))
    with open(os.path.join(src, "model.ckpt.index"), "rb") as f:
        entries = table_entries(f.read())
    write_table(os.path.join(folder, "model.ckpt.index"), entries, block_bytes=96, restart_interval=2)


def write_hostile(folder):
    data = b"\x01\x02\x03\x04\x05\x06\x07\x08"
    crc = mask(crc32c(data))
    cases = {
        "overflow": entry_proto(1, [1 << 40, 1 << 40, 4], 0, 8, crc),
        "size_mismatch": entry_proto(1, [3], 0, 8, crc),
        "partitioned": entry_proto(1, [2], 0, 8, crc, slices=True),
        "big_endian": entry_proto(1, [2], 0, 8, crc),
    }
    for name, entry in cases.items():
        header = header_proto(big_endian=name == "big_endian")
        prefix = os.path.join(folder, name + ".ckpt")
        write_table(prefix + ".index", [(b"", header), (b"bert/x", entry)])
        with open(prefix + ".data-00000-of-00001", "wb") as f:
            f.write(data)


def write_fuzz_seeds(folder):
    shutil.rmtree(folder, ignore_errors=True)
    os.makedirs(folder)
    seeds = {"v1": "v1/model.ckpt", "v2": "v2/ckpt", "small_blocks": "small_blocks/model.ckpt"}
    seeds.update({n: f"hostile/{n}.ckpt" for n in ["overflow", "size_mismatch", "partitioned", "big_endian"]})
    for name, prefix in seeds.items():
        with open(os.path.join(OUT, prefix + ".index"), "rb") as f:
            index = f.read()
        with open(os.path.join(OUT, prefix + ".data-00000-of-00001"), "rb") as f:
            data = f.read()
        with open(os.path.join(folder, name), "wb") as f:
            f.write(struct.pack("<I", len(index)) + index + data)


def main():
    shutil.rmtree(OUT, ignore_errors=True)
    for d in ["v1", "v2", "sharded", "small_blocks", "hostile"]:
        os.makedirs(os.path.join(OUT, d))
    write_v1(os.path.join(OUT, "v1"))
    write_sharded(os.path.join(OUT, "sharded"))   # graph mode, like v1: before eager work
    write_v2(os.path.join(OUT, "v2"))
    write_small_blocks(os.path.join(OUT, "v1"), os.path.join(OUT, "small_blocks"))
    write_hostile(os.path.join(OUT, "hostile"))
    for folder, prefix in [("v1", "model.ckpt"), ("v2", "ckpt"), ("sharded", "model.ckpt")]:
        n = expected(os.path.join(OUT, folder, prefix), os.path.join(OUT, folder))
        print(f"{folder}: {n} tensors")
    write_fuzz_seeds("tests/fuzz/corpus/tf_checkpoint")
    # TensorFlow reads the re-blocked index to the same values: our SSTable writer is sound.
    a = tf.train.load_checkpoint(os.path.join(OUT, "v1", "model.ckpt"))
    b = tf.train.load_checkpoint(os.path.join(OUT, "small_blocks", "model.ckpt"))
    for name in a.get_variable_to_shape_map():
        assert np.array_equal(a.get_tensor(name), b.get_tensor(name)), name


if __name__ == "__main__":
    main()
