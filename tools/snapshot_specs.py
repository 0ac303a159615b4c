"""Snapshot of what the kernel layer produces, for refactors that must not change it.

    python tools/snapshot_specs.py [--cubins [--nvcc]] > snapshot.json

Prints JSON with the heuristic's pick for 1032 probed calls (dense, contiguous and masked
shapes of several models, M from 1 to 16384, two SM counts, sm_90a and sm_80) and, with
--cubins, the sha256 of the cubin of every preset spec (NVRTC, and NVCC with --nvcc). Take one
before and one after a change and compare the files: equal picks and equal digests mean the
change moved code without changing a kernel or a choice.
"""
import hashlib, itertools, json, sys
from dgemm.heuristics import select, KINDS
from dgemm.jobs import manifest as manifests
from dgemm.jit import compiler as C, source

def probe_shapes():
    ms = [1, 7, 31, 64, 65, 100, 128, 129, 255, 256, 384, 511, 1000, 1024, 2048, 3000, 4096, 6144, 8192, 16384]
    nks = [(2112, 7168), (24576, 1536), (32768, 512), (7168, 16384), (4096, 7168), (7168, 2048),
           (4096, 4096), (14336, 4096), (4096, 14336), (129280, 7168), (1000, 256), (72, 128), (8, 384)]
    out = []
    for m, (n, k) in itertools.product(ms, nks):
        out.append(("fp8_gemm_nt", m, n, k, 1))
    for g, m, (n, k) in itertools.product((4, 8, 32), (256, 1024, 4096, 8192), ((4096, 7168), (7168, 2048), (3072, 4096))):
        out.append(("m_grouped_fp8_gemm_nt_contiguous", g * m, n, k, g))
    for g, m, (n, k) in itertools.product((1, 2, 8, 64), (8, 64, 256, 1024), ((4096, 7168), (7168, 2048), (3072, 4096))):
        out.append(("m_grouped_fp8_gemm_nt_masked", m, n, k, g))
    return out

def main():
    picks = {}
    for kind, m, n, k, g in probe_shapes():
        for sms, arch in ((132, "sm_90a"), (78, "sm_90a"), (132, "sm_80")):
            picks[f"{kind}|{m}|{n}|{k}|{g}|{sms}|{arch}"] = select(kind, m, n, k, g, sms, arch).to_json()
    cubins = {}
    if "--cubins" in sys.argv:
        specs = set()
        for preset in manifests.available_presets():
            probs = manifests.problems(manifests.load_preset(preset), [], 0.3)
            for arch in ("sm_90a", "sm_80"):
                specs.update(manifests.specs_for(probs, 132, arch))
        for name in ("nvrtc", "nvcc") if "--nvcc" in sys.argv else ("nvrtc",):
            comp = C.get_compiler(name)
            for spec in sorted(specs, key=lambda s: s.to_json()):
                cubins[f"{name}|{spec.to_json()}"] = hashlib.sha256(comp.compile(spec, source.render(spec)).cubin).hexdigest()
    json.dump({"num_picks": len(picks), "picks": picks, "cubins": cubins}, sys.stdout, indent=0, sort_keys=True)

if __name__ == "__main__":
    main()
