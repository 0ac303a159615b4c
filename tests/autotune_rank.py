"""One "rank" of the autotuning tests, run as its own interpreter:

    python tests/autotune_rank.py MARKER SLEEP_S [KIND M N K GROUPS]

resolves one call's kernel with DGEMM_AUTOTUNE on through `dgemm.autotune.spec_for_call`, with
a stand-in timer (the seam the tuner offers; no GPU): it appends a line to MARKER, sleeps
SLEEP_S and calls the cost model's last candidate the fastest, so a decision differs from the
heuristic. Prints one JSON line: the spec chosen, the heuristic's, and dgemm.jit.stats().
"""
import json
import sys
import time

from dgemm import heuristics
from dgemm.autotune import spec_for_call
import dgemm.jit


def main(marker: str, sleep_s: str, kind="fp8_gemm_nt", m="128", n="4096", k="7168",
         groups="1") -> None:
    m, n, k, groups = int(m), int(n), int(k), int(groups)

    def timer(specs, shape_class, device_index):
        with open(marker, "a") as handle:
            handle.write(f"{shape_class.describe()}\n")
        time.sleep(float(sleep_s))
        return [1.0 - 0.1 * i for i in range(len(specs))]

    heuristic = heuristics.select(kind, m, n, k, groups)
    chosen = spec_for_call(kind, m, n, k, groups, 132, "sm_90a", heuristic, timer=timer,
                           is_capturing=lambda: False)
    print(json.dumps({"spec": chosen.to_json(), "heuristic": heuristic.to_json(),
                      "stats": dgemm.jit.stats()}))


if __name__ == "__main__":
    main(*sys.argv[1:])
