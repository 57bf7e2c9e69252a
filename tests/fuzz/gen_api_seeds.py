#!/usr/bin/env python3
"""Writes seed inputs for the API fuzz targets: tests/fuzz/corpus/api_<family>/gen-*.

An input is a config byte followed by ops: one byte picks the op (its index in
Driver::run's table), the bytes after it are its arguments. Arguments are drawn
mostly from small values, so that `Input::chance()` (byte % n == 0) rarely
fires and ids / lengths stay plausible, which drives requests through begin,
chunked extends, decodes and finish and fills the tree before the fuzzer
starts mutating. Deterministic (fixed seed): rerunning rewrites the same files.

  python3 tests/fuzz/gen_api_seeds.py
"""
import os
import random

# Indices into Driver::run's op table (api_fuzz_driver.cpp).
BEGIN, EXTEND, DECODE, FINISH, RETRACT, QUERY = 0, 1, 2, 3, 4, 5
MATCH, INSERT, LOCK, UNLOCK, EVICT, EVENTS, RESET = 9, 10, 11, 12, 13, 14, 15
MATCH_MAMBA, INSERT_MAMBA, INSERT_SWA = 16, 17, 18
REQ_ALLOC, REQ_FREE, REQ_WRITE, REQ_READ, REQ_BATCH, REQ_LAST = 19, 20, 21, 22, 23, 24
ALLOC, FREE, KV_EXTEND, KV_DECODE, SWA_OPS, GROUP, BACKUP, MERGE, MAMBA = 25, 26, 27, 28, 29, 30, 31, 32, 33

COMMON = [BEGIN] * 6 + [EXTEND] * 6 + [DECODE] * 5 + [FINISH] * 3 + [RETRACT, QUERY, MATCH, MATCH, LOCK, UNLOCK,
                                                                      EVICT, EVENTS, REQ_ALLOC, REQ_WRITE, REQ_READ,
                                                                      REQ_BATCH, REQ_LAST]
DIRECT = [ALLOC] * 3 + [FREE, FREE, INSERT, INSERT, KV_EXTEND, KV_DECODE, GROUP, BACKUP, MERGE]
EXTRA = {"mha": [], "mla": [RESET], "swa": [SWA_OPS, SWA_OPS, INSERT_SWA, INSERT_SWA], "hybrid": [MAMBA, MAMBA, MATCH_MAMBA, INSERT_MAMBA, INSERT_MAMBA]}
# Config bytes: the targets decode them (api_fuzz_<family>.cpp); bit patterns chosen for variety.
CONFIGS = {"mha": [0, 1, 2, 4, 5, 9, 73, 146], "mla": [0, 1, 2, 3, 10, 20, 40],
           "swa": [0, 1, 2, 3, 7, 18, 20], "hybrid": [0, 1, 2, 3, 6, 8]}


def arg(rng):
    return rng.choice([1, 1, 2, 3, 5, 7, 11]) if rng.random() < 0.8 else rng.randrange(256)


def program(rng, family, config, length):
    ops = COMMON + EXTRA[family] + (DIRECT if rng.random() < 0.7 else [])
    out = bytearray([config])
    while len(out) < length:
        out.append(rng.choice(ops))
        out.extend(arg(rng) for _ in range(rng.randrange(3, 10)))
    return bytes(out[:length])


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    rng = random.Random(20261125)
    for family, configs in CONFIGS.items():
        folder = os.path.join(here, "corpus", "api_" + family)
        os.makedirs(folder, exist_ok=True)
        for i, config in enumerate(configs):
            for j, length in enumerate((96, 320)):
                with open(os.path.join(folder, "gen-%02d-%d" % (i, j)), "wb") as f:
                    f.write(program(rng, family, config, length))


if __name__ == "__main__":
    main()
