"""Count the cross-check on a seeded sample of random kernels (the numbers in docs/regions.md):

    python tests/race_corpus/stats.py 2000 1      # N kernels, seed

Uses the same grammar, checker verdict and sanitizer runs as tests/test_race_corpus.py.
"""
from __future__ import annotations

import os
import random
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from test_race_corpus import checker_verdict, sanitizer_races  # noqa: E402

from race_corpus import randgen as R  # noqa: E402


def sample(rnd: random.Random) -> R.Spec:
    def aff():
        return R.Affine(rnd.choice(["gid", "tid"]), rnd.choice([0, 1, 2, -1]), rnd.choice([0, 1, 2]),
                        rnd.choice([-1, 0, 1, 2]))

    def taff():
        return R.Affine("tid", rnd.choice([0, 1, 2, -1]), 0, rnd.choice([-1, 0, 1, 2, 8]))

    part, loop, write = rnd.choice(sorted(R.PARTS)), rnd.choice([0, 0, 1, 2, 3]), aff()
    read, guard = rnd.choice([None, aff()]), rnd.choice([None, None, 2, 5])
    shared = (taff(), taff(), rnd.random() < .5, rnd.choice([None, 1, 4, 8]))
    return R.Spec(part, loop, write, read, guard, rnd.choice([None, shared]))


def main(n: int, seed: int) -> dict:
    rnd = random.Random(seed)
    c = dict(tried=0, accepted=0, racing=0, unsound=0, clean_rejected=0)
    for _ in range(n):
        spec = sample(rnd)
        a, r = checker_verdict(spec), sanitizer_races(spec)
        c["tried"] += 1
        c["accepted"] += a
        c["racing"] += r
        c["unsound"] += a and r
        c["clean_rejected"] += not a and not r
        if a and r:
            print("UNSOUND", spec)
    return c


if __name__ == "__main__":
    print(main(int(sys.argv[1]) if len(sys.argv) > 1 else 2000, int(sys.argv[2]) if len(sys.argv) > 2 else 1))
