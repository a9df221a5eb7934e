#!/usr/bin/env python3
"""DiskSim's own SSD workload `ssd-rw5m` (ssdmodel/valid/ssd-rw5m.parv) as a
DiskSim ASCII trace, drawn the way DiskSim's synthetic generator draws it
(src/disksim_synthio.c): one device of 7,018,904 sectors in blocks of 8
(blocking factor), every request a write at a uniform block, its size
ceil(int(exp(mean 8 sectors)) / 8) blocks (0 or past the end: drawn again),
arrivals 0-1 ms apart (uniform). Not DiskSim's random stream, so the same
statistics, not the same requests.

    gen-ssd-rw-trace.py REQUESTS SEED > trace.disksim
"""
import random
import sys

SECTORS = 7018904
BLOCK = 8
BLOCKS = SECTORS // BLOCK


def main():
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 5_000_000
    rng = random.Random(int(sys.argv[2]) if len(sys.argv) > 2 else 1)
    out = sys.stdout
    t = 0.0
    lines = []
    for _ in range(n):
        t += rng.uniform(0.0, 1.0)
        while True:
            blk = int(rng.random() * BLOCKS)
            cnt = (int(rng.expovariate(1.0 / 8.0)) + BLOCK - 1) // BLOCK
            if cnt > 0 and blk + cnt < BLOCKS:
                break
        lines.append(f"{t:.6f} 0 {blk * BLOCK} {cnt * BLOCK} 0\n")
        if len(lines) >= 65536:
            out.writelines(lines)
            lines.clear()
    out.writelines(lines)


if __name__ == "__main__":
    main()
