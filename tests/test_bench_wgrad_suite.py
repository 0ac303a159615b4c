"""The weight-gradient rows of the bench suites (bench/suite.py: wgrad_cases): the broad
suite's sample and held-out split, and the wgrad heuristic's picks on every row."""
from bench import suite as suites
from dgemm.kernels import hopper_wgrad


def test_broad_weight_gradients_split_into_disjoint_parts_of_whole_weights():
    every = suites.wgrad_cases("broad")
    fit = suites.wgrad_cases("broad", part="fit")
    holdout = suites.wgrad_cases("broad", part="holdout")
    assert sorted(fit + holdout, key=repr) == sorted(every, key=repr)
    assert fit and holdout and not set(fit) & set(holdout)
    weights = [case.shape[:2] for case in every if case.kind == "wgrad"]
    assert len(weights) == len(set(weights))             # one K per weight
    assert suites.wgrad_cases("broad") == every           # no unseeded randomness


def test_broad_weight_gradients_take_a_manifest_k_under_the_flop_cap():
    manifest = suites.load("broad")
    ks = manifest["wgrad"]["k"]
    seen = {tuple(mn) for mn in suites.load("deepseek_v3")["wgrad"]["mn"]}
    for case in suites.wgrad_cases("broad", kinds=("wgrad",)):
        m, n, k = case.shape
        assert k in ks and 2 * m * n * k <= suites.MAX_WGRAD_FLOP
        if (m, n) in seen:
            assert case.part == "fit"
    assert len(suites.wgrad_cases("broad", kinds=("k_grouped",))) == len(manifest["k_grouped"])


def test_deepseek_v3_weight_gradients_are_every_weight_at_every_k():
    cases = suites.wgrad_cases("deepseek_v3")
    assert len(cases) == 24 and {case.part for case in cases} == {"fit"}
    quick = suites.wgrad_cases("deepseek_v3", quick=True)
    assert [c.shape for c in quick if c.kind == "wgrad"] == [
        (m, n, 4096) for m, n in suites.load("deepseek_v3")["wgrad"]["mn"]]
    assert [c for c in quick if c.kind == "k_grouped"] == [
        c for c in cases if c.kind == "k_grouped"]          # --quick cuts the dense K only


def test_every_suite_row_gets_a_candidate_tile_that_passes_the_plan_check():
    for name in suites.SUITES:
        for case in suites.wgrad_cases(name):
            groups, m, n, k = (1, *case.shape) if case.kind == "wgrad" else case.shape
            spec = hopper_wgrad.select("normal", m, n, k, groups, 132)
            assert spec.block_n in hopper_wgrad.CANDIDATE_BLOCK_NS
            assert spec.num_stages >= 4
            spec.plan_checks()
