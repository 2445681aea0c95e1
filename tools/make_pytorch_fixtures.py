#!/usr/bin/env python3
"""Fixtures of tests/test_pytorch_checkpoint.c and seeds of tests/fuzz/fuzz_pytorch_checkpoint.c.

Valid archives are written by torch.save itself; for each, <name>.manifest lists the state
dict's tensors (name, dtype, shape) and <name>.expected holds their values as torch reads them
back (row-major, little-endian, concatenated in the manifest's order), which the C reader must
reproduce byte for byte.

Hostile archives are made by hand: a pickle that asks for os.system / builtins.eval /
__builtin__.exec (written as bytes or with pickle's own Pickler: nothing here is ever
unpickled, so nothing is executed), views outside their storage, shapes that overflow, a
missing storage entry, an unknown opcode, deep nesting, a big-endian byteorder, a truncated
zip, the pre-1.6 (non-zip) format.

Run with /usr/bin/python3 (torch 1.13): python3 tools/make_pytorch_fixtures.py
"""
import collections
import io
import os
import pickle
import shutil
import struct
import sys
import zipfile

import torch

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(ROOT, "tests", "data", "pytorch")
SEEDS = os.path.join(ROOT, "tests", "fuzz", "corpus", "pytorch_checkpoint")

DTYPE_NAMES = {torch.float32: "F32", torch.float16: "F16", torch.bfloat16: "BF16", torch.float64: "F64",
               torch.int64: "I64", torch.int32: "I32", torch.int16: "I16", torch.int8: "I8",
               torch.uint8: "U8", torch.bool: "BOOL"}


def state_dict():
    """Every dtype, a 0-d scalar, a transposed view, a slice with a storage offset, tied weights."""
    g = torch.Generator().manual_seed(31)
    sd = collections.OrderedDict()
    w = torch.randn(3, 4, generator=g)
    sd["w"] = w
    sd["w_t"] = w.t()                                       # same storage, strides (1, 4)
    sd["tied"] = w                                          # the same tensor under a second name
    base = torch.arange(10, dtype=torch.float32) * 0.5
    sd["slice"] = base[3:7]                                 # storage_offset 3
    sd["every_other"] = base[1::2]                          # stride 2
    sd["half"] = torch.randn(5, generator=g).half()
    sd["bf16"] = torch.randn(2, 3, generator=g).bfloat16()
    sd["f64"] = torch.randn(2, 2, generator=g, dtype=torch.float64)
    sd["i64"] = torch.tensor([-3, 0, 2**40], dtype=torch.int64)
    sd["scalar"] = torch.tensor(7, dtype=torch.int64)       # 0-d
    sd["i32"] = torch.tensor([1, -2], dtype=torch.int32)
    sd["i16"] = torch.tensor([300, -300], dtype=torch.int16)
    sd["i8"] = torch.tensor([-1, 5], dtype=torch.int8)
    sd["u8"] = torch.tensor([255, 1], dtype=torch.uint8)
    sd["mask"] = torch.tensor([True, False, True])
    sd["empty"] = torch.zeros(0, 3)
    sd["param"] = torch.nn.Parameter(torch.randn(2, generator=g))   # _rebuild_parameter
    return sd


def write_manifest(name, sd, path):
    """What torch.load reads back from path must be sd itself: that is what the C reader must give."""
    loaded = torch.load(path)
    loaded = loaded.get("model", loaded)
    assert list(loaded) == list(sd) and all(torch.equal(loaded[k], sd[k]) for k in sd), path
    with open(os.path.join(OUT, name + ".manifest"), "w") as m, open(os.path.join(OUT, name + ".expected"), "wb") as e:
        for key, t in sd.items():
            t = t.detach()
            m.write("%s %s %d%s\n" % (key, DTYPE_NAMES[t.dtype], t.dim(), "".join(" %d" % d for d in t.shape)))
            c = t.contiguous()
            if c.dtype == torch.bfloat16:
                c = c.view(torch.int16)
            e.write(c.numpy().tobytes())


def nvidia_checkpoint():
    """NVIDIA's run_pretraining.py layout: the model's state dict (with its _metadata) inside."""
    torch.manual_seed(3)
    model = torch.nn.Sequential(torch.nn.Linear(3, 2), torch.nn.LayerNorm(2))
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    model(torch.ones(1, 3)).sum().backward()
    opt.step()
    sd = model.state_dict()
    return sd, {"model": sd, "optimizer": opt.state_dict(), "master params": list(model.parameters()),
                "phase2": False, "epoch": 2, "files": ["a", "b"], "note": None, "lr": 1.5e-4,
                "big": 2**62, "neg": -(2**40), "nested": {"x": (1, 2.5, "s", [None, True])}, 3: "int key"}


# ---- archives made by hand ----

class Storage:
    def __init__(self, key, cls, numel):
        self.key, self.cls, self.numel = key, cls, numel


class Tensor:
    """Pickles as torch does: _rebuild_tensor_v2(storage, offset, size, stride, False, OrderedDict())."""
    def __init__(self, storage, offset, size, stride):
        self.args = (storage, offset, tuple(size), tuple(stride), False, collections.OrderedDict())

    def __reduce__(self):
        return (torch._utils._rebuild_tensor_v2, self.args)


class Evil:
    """What a malicious checkpoint holds: a call of os.system on unpickling (never unpickled here)."""
    def __reduce__(self):
        return (os.system, ("echo pwned",))


class StoragePickler(pickle.Pickler):
    def persistent_id(self, obj):
        if isinstance(obj, Storage):
            return ("storage", obj.cls, obj.key, "cpu", obj.numel)
        return None


def dumps(obj):
    buf = io.BytesIO()
    StoragePickler(buf, protocol=2).dump(obj)
    return buf.getvalue()


def put(z, name, data, compress=False):
    """An entry with a fixed date, so that the fixtures come out the same on every run."""
    info = zipfile.ZipInfo(name, date_time=(2020, 1, 1, 0, 0, 0))
    info.compress_type = zipfile.ZIP_DEFLATED if compress else zipfile.ZIP_STORED
    z.writestr(info, data)


def write_archive(path, pkl, entries=(), prefix="archive", compress_pickle=False):
    with zipfile.ZipFile(path, "w") as z:
        put(z, prefix + "/data.pkl", pkl, compress_pickle)
        for name, data in entries:
            put(z, prefix + "/" + name, data)
        put(z, prefix + "/version", b"3\n")


def global_call(module, name):
    """A protocol-2 pickle of {'model': module.name('echo pwned')}, as raw bytes."""
    arg = b"echo pwned"
    return (b"\x80\x02}(X\x05\x00\x00\x00model" + b"c" + module.encode() + b"\n" + name.encode() + b"\n"
            + b"X" + struct.pack("<I", len(arg)) + arg + b"\x85Ru.")


def one_tensor(path, offset, size, stride, numel=4, entry_bytes=None, key="0", cls=None):
    st = Storage(key, cls or torch.FloatStorage, numel)
    pkl = dumps({"w": Tensor(st, offset, size, stride)})
    data = b"\0" * (4 * numel if entry_bytes is None else entry_bytes)
    write_archive(path, pkl, [("data/0", data)])


def hostile(out):
    p = lambda n: os.path.join(out, n)
    write_archive(p("os_system.pt"), global_call("os", "system"))
    write_archive(p("builtins_eval.pt"), global_call("builtins", "eval"))
    write_archive(p("builtin_exec.pt"), global_call("__builtin__", "exec"))
    # The malicious object next to a good state dict: refused wherever it is.
    torch.save({"model": collections.OrderedDict(w=torch.ones(2)), "extra": Evil()}, p("evil_extra.pt"))
    one_tensor(p("outside.pt"), 2, [3], [1])                       # elements 2..4 of 4
    one_tensor(p("outside_stride.pt"), 0, [2, 2], [3, 1])          # reaches element 4 of 4
    one_tensor(p("overflow.pt"), 0, [2**31, 2**31, 2**31], [1, 1, 1])
    one_tensor(p("negative.pt"), 0, [-1], [1])
    one_tensor(p("wrong_size.pt"), 0, [4], [1], entry_bytes=12)   # 4 floats need 16 bytes
    st = Storage("1", torch.FloatStorage, 4)
    write_archive(p("missing_storage.pt"), dumps({"w": Tensor(st, 0, [4], [1])}), [("data/0", b"\0" * 16)])
    write_archive(p("unknown_opcode.pt"), b"\x80\x02}\xff.")
    write_archive(p("deep_marks.pt"), b"\x80\x02" + b"(" * 100000 + b"t" * 100000 + b".", compress_pickle=True)
    write_archive(p("deep_lists.pt"), b"\x80\x02" + b"]" * 100000 + b"a" * 99999 + b".", compress_pickle=True)
    write_archive(p("no_stop.pt"), b"\x80\x02}q\x00")
    write_archive(p("no_state_dict.pt"), pickle.dumps({"epoch": 3, "files": []}, protocol=2))
    a, b = Tensor(Storage("0", torch.FloatStorage, 1), 0, [1], [1]), Tensor(Storage("0", torch.FloatStorage, 1), 0, [1], [1])
    pkl = dumps(collections.OrderedDict([("dupA_", a), ("dupB_", b)])).replace(b"dupB_", b"dupA_")
    write_archive(p("duplicate.pt"), pkl, [("data/0", b"\0" * 4)])
    good = open(p("plain.pt"), "rb").read()
    open(p("truncated.pt"), "wb").write(good[: len(good) // 2])
    with zipfile.ZipFile(p("plain.pt")) as src, zipfile.ZipFile(p("big_endian.pt"), "w") as dst:
        for info in src.infolist():
            dst.writestr(info, src.read(info))
        put(dst, src.namelist()[0].split("/")[0] + "/byteorder", b"big")
    torch.save(collections.OrderedDict(w=torch.ones(2)), p("legacy.pt"), _use_new_zipfile_serialization=False)


def little_endian_copy(src_path, dst_path):
    """plain.pt with the byteorder entry newer torch writes (and a new prefix), deflated storages."""
    with zipfile.ZipFile(src_path) as src, zipfile.ZipFile(dst_path, "w") as dst:
        for info in src.infolist():
            put(dst, "renamed/" + info.filename.split("/", 1)[1], src.read(info), compress=True)
        put(dst, "renamed/byteorder", b"little")


def fuzz_state_dict():
    """Eight storages of 64 bytes each, keys 0..7: what the fuzz target's wrapper provides."""
    g = torch.Generator().manual_seed(5)
    sd = collections.OrderedDict()
    sd["w"] = torch.randn(4, 4, generator=g)
    sd["w_t"] = sd["w"].t()
    sd["h"] = torch.randn(32, generator=g).half()
    sd["b"] = torch.randn(2, 16, generator=g).bfloat16()
    sd["d"] = torch.randn(8, generator=g, dtype=torch.float64)
    sd["i"] = torch.arange(8)
    sd["slice"] = torch.arange(16, dtype=torch.float32)[3:9]
    sd["u8"] = torch.arange(64, dtype=torch.uint8).reshape(8, 8)[:, ::2]
    sd["p"] = torch.nn.Parameter(torch.randn(16, generator=g))
    return sd


def pickle_seeds(out):
    """data.pkl of archives whose storages are all 64 bytes, for the fuzz target's wrapper."""
    sd = fuzz_state_dict()
    objs = {"plain": (sd, 2), "proto4": (sd, 4),
            "nvidia": ({"model": sd, "optimizer": {"state": {0: {"step": 3}}, "param_groups": [{"lr": 1e-3, "params": [0, 1]}]},
                        "epoch": 2, "files": ["a", "b"], "note": None}, 2)}
    tmp = os.path.join(out, "tmp.pt")
    for name, (obj, proto) in objs.items():
        torch.save(obj, tmp, pickle_protocol=proto)
        with zipfile.ZipFile(tmp) as z:
            sizes = [i.file_size for i in z.infolist() if "/data/" in i.filename]
            assert len(sizes) == 8 and set(sizes) == {64}, sizes
            pkl = z.read([n for n in z.namelist() if n.endswith("/data.pkl")][0])
        open(os.path.join(out, name + ".pkl"), "wb").write(pkl)
    os.remove(tmp)
    open(os.path.join(out, "os_system.pkl"), "wb").write(global_call("os", "system"))


def main():
    if os.path.isdir(OUT):
        shutil.rmtree(OUT)
    os.makedirs(OUT)
    sd = state_dict()
    torch.save(sd, os.path.join(OUT, "plain.pt"))
    write_manifest("plain", sd, os.path.join(OUT, "plain.pt"))
    torch.save(sd, os.path.join(OUT, "proto4.pt"), pickle_protocol=4)
    little_endian_copy(os.path.join(OUT, "plain.pt"), os.path.join(OUT, "little.pt"))
    model_sd, ck = nvidia_checkpoint()
    torch.save(ck, os.path.join(OUT, "nvidia.pt"))
    write_manifest("nvidia", model_sd, os.path.join(OUT, "nvidia.pt"))
    hostile(OUT)
    if os.path.isdir(SEEDS):
        shutil.rmtree(SEEDS)
    os.makedirs(SEEDS)
    for n in ["plain.pt", "nvidia.pt", "proto4.pt", "os_system.pt", "outside.pt", "overflow.pt",
              "duplicate.pt", "unknown_opcode.pt", "missing_storage.pt"]:
        shutil.copy(os.path.join(OUT, n), os.path.join(SEEDS, n))
    pickle_seeds(SEEDS)
    print("wrote", len(os.listdir(OUT)), "files to", OUT, file=sys.stderr)


if __name__ == "__main__":
    main()
