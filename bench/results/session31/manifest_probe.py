"""Run a bench on a manifest of one's own (session 31 probe, not part of the suites):
`python bench/results/session31/manifest_probe.py MANIFEST.json picks` prints the heuristic's
picks for its shapes (as `python -m bench.suite picks`); `... MANIFEST.json grouped ARGS...`
runs `bench.bench_grouped ARGS` with the manifest standing in for the broad suite."""
import json
import pathlib
import sys

sys.path.insert(0, ".")
from bench import suite as suites  # noqa: E402


def main() -> int:
    manifest = json.loads(pathlib.Path(sys.argv[1]).read_text())
    real_load = suites.load
    suites.load = lambda name: manifest if name == "broad" else real_load(name)
    if sys.argv[2] == "picks":
        print(json.dumps(suites.heuristic_picks("broad"), indent=0, sort_keys=True))
        return 0
    from bench import bench_grouped
    return bench_grouped.main(["--suite", "broad"] + sys.argv[3:])


if __name__ == "__main__":
    sys.exit(main())
