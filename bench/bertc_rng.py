"""src/core/rng.h in Python: bert.c's keys, counter hash and shuffle, for the peers that
reproduce bert.c's draws (bench/finetune_peers.py: its batch order; bench/bertc_masks.py: its
dropout masks). check_rng() compares with values printed by the C code."""
import sys

import numpy as np

M32, M64 = (1 << 32) - 1, (1 << 64) - 1


def splitmix64(x):
    x = (x + 0x9E3779B97F4A7C15) & M64
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & M64
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & M64
    return x ^ (x >> 31)


def rng_key(seed, stream):
    return splitmix64(splitmix64(seed & M64) ^ splitmix64((stream + 0x632BE59BD9B4E019) & M64))


def hash32(x):
    x ^= x >> 16
    x = (x * 0x7FEB352D) & M32
    x ^= x >> 15
    x = (x * 0x846CA68B) & M32
    return x ^ (x >> 16)


def bits32(key, counter):
    return hash32((hash32((counter ^ key) & M32) + (key >> 32)) & M32)


def shuffled(n, key):
    """glue_run.c / squad_run.c shuffle(): Fisher-Yates from the top."""
    order = list(range(n))
    for i in range(n - 1, 0, -1):
        j = bits32(key, i) % (i + 1)
        order[i], order[j] = order[j], order[i]
    return order


def check_rng():
    """Values printed by a C program including src/core/rng.h (gcc, x86-64)."""
    ok = (rng_key(1, 0) == 4526406653003451538 and rng_key(42, 1) == 9920616184565843241
          and bits32(rng_key(1, 0), 7) == 3516767107
          and shuffled(3668, rng_key(1, 0))[:8] == [2785, 622, 2563, 2027, 989, 2847, 513, 3405]
          and shuffled(1000, rng_key(42, 0))[:8] == [131, 48, 850, 348, 134, 709, 155, 499]
          and shuffled(3668, rng_key(1, 1))[:8] == [1916, 3596, 3385, 3538, 1071, 1723, 3238, 1341])
    if not ok:
        sys.exit("bertc_rng: the port of src/core/rng.h gives other values than the C code")


def bits32_array(key, n):
    """bits32(key, counter) for counters 0 .. n-1 as a uint32 array (numpy's uint32 products wrap
    as C's do), for masks of millions of elements."""
    x = np.arange(n, dtype=np.uint32)
    x ^= np.uint32(key & M32)
    _hash32_inplace(x)
    x += np.uint32(key >> 32)
    return _hash32_inplace(x)


def _hash32_inplace(x):
    x ^= x >> np.uint32(16)
    x *= np.uint32(0x7FEB352D)
    x ^= x >> np.uint32(15)
    x *= np.uint32(0x846CA68B)
    x ^= x >> np.uint32(16)
    return x


def dropout_threshold(p):
    """rng_dropout_threshold: an element is kept when its 32 bits reach this (p as a float32)."""
    t = float(np.float32(p)) * 4294967296.0
    return M32 if t >= 4294967295.0 else int(t)
