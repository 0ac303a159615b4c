"""torch.compile helpers shared by the operator tests (tests/test_torch_ops.py,
tests/test_wgrad_api.py)."""


class GraphRecorder:
    """A torch.compile backend that keeps each graph and runs it as traced (under the test's
    FakeTensorMode, so the operators' fake implementations run, not the GPU)."""

    def __init__(self):
        self.graphs = []

    def __call__(self, gm, example_inputs):
        self.graphs.append(gm)
        return gm.forward

    def targets(self):
        return [node.target for gm in self.graphs for node in gm.graph.nodes
                if node.op == "call_function"]
