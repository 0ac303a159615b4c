"""Record DeepGEMM's public Python API (names, parameters in order, defaults) from its source.

    python tools/record_deep_gemm_api.py .anchors/deepgemm-54e2261.tar.gz \
        > tests/data/deep_gemm_54e2261_api.json

Reads the tarball (or an extracted tree) without building or importing anything: the pybind11
registrations in csrc/apis/*.hpp (`m.def("name", ..., py::arg("x") = default, ...)`, lambdas
without py::arg, `m.attr("alias") = m.attr("name")`), the aliases in deep_gemm/__init__.py and
deep_gemm/utils/layout.py, and the function definitions of deep_gemm/utils/math.py (ast).
A pybind11 function registered without py::arg takes positional-only arguments named arg0,
arg1, ...; they are recorded so. `tests/test_compat.py` checks `dgemm.compat.deep_gemm`
against the names of HOPPER_API and TRAINING_API found here.
"""
from __future__ import annotations

import ast
import json
import re
import sys
import tarfile
from pathlib import Path

# The Hopper API that vLLM and SGLang call (issue 13): what dgemm.compat.deep_gemm provides.
HOPPER_API = (
    "fp8_gemm_nt", "m_grouped_fp8_gemm_nt_contiguous", "m_grouped_fp8_gemm_nt_masked",
    "fp8_m_grouped_gemm_nt_masked", "get_num_sms", "set_num_sms",
    "get_mk_alignment_for_contiguous_layout", "set_mk_alignment_for_contiguous_layout",
    "get_theoretical_mk_alignment_for_contiguous_layout", "get_mn_major_tma_aligned_tensor",
    "get_tma_aligned_size", "transform_sf_into_required_layout", "set_pdl", "get_pdl",
    "ceil_div", "align", "per_token_cast_to_fp8", "per_block_cast_to_fp8",
)
# The Hopper training entry points (issue 14) beyond HOPPER_API's fp8_gemm_nt, whose c and
# recipe=(1, 1, 128) are its weight-gradient form.
TRAINING_API = ("k_grouped_fp8_gemm_nt_contiguous",)


class Source:
    """Files of a DeepGEMM tree, from a tarball or a directory, by path below its root."""

    def __init__(self, path: Path):
        self.files = {}
        if path.is_dir():
            for file in path.rglob("*"):
                if file.suffix in (".py", ".hpp") and file.is_file():
                    self.files[file.relative_to(path).as_posix()] = file.read_text()
        else:
            with tarfile.open(path) as archive:
                for member in archive.getmembers():
                    if member.isfile() and member.name.endswith((".py", ".hpp")):
                        # drop the tarball's top directory (dg_head/)
                        name = member.name.split("/", 1)[1] if "/" in member.name else member.name
                        self.files[name] = archive.extractfile(member).read().decode()

    def glob(self, prefix: str, suffix: str):
        return sorted((n, t) for n, t in self.files.items()
                      if n.startswith(prefix) and n.endswith(suffix))


def _balanced(text: str, start: int) -> str:
    """The text from the "(" at `start` to its matching ")" (string literals skipped)."""
    depth, i, quote = 0, start, None
    while i < len(text):
        c = text[i]
        if quote:
            if c == "\\":
                i += 1
            elif c == quote:
                quote = None
        elif c in "\"'":
            quote = c
        elif c == "(":
            depth += 1
        elif c == ")":
            depth -= 1
            if depth == 0:
                return text[start + 1:i]
        i += 1
    raise ValueError(f"unbalanced parentheses at {start}")


_ARG = re.compile(r'py::arg\("(\w+)"\)(?:\s*=\s*([^,]+?(?:\([^()]*\))?))?\s*(?=,|$)')
_LAMBDA = re.compile(r"\[&?\]\s*\(([^)]*)\)")


def _default(text: str):
    text = text.strip()
    if text == "std::nullopt":
        return None
    if text in ("true", "false"):
        return text == "true"
    if text.startswith('"'):
        return text.strip('"')
    match = re.fullmatch(r"std::make_tuple\(([^)]*)\)", text)
    if match:
        return [int(v) for v in match.group(1).split(",")]
    if re.fullmatch(r"-?\d+", text):
        return int(text)
    return {"cpp": text}        # e.g. torch::kFloat32: no Python literal; recorded as written


def _cpp_functions(source: Source) -> dict:
    functions, aliases = {}, {}
    for name, text in source.glob("csrc/apis/", ".hpp"):
        for match in re.finditer(r'm\.def\(\s*"(\w+)"', text):
            body = _balanced(text, match.start() + len("m.def"))
            params = []
            for arg in _ARG.finditer(body):
                param = {"name": arg.group(1), "kind": "POSITIONAL_OR_KEYWORD"}
                if arg.group(2) is not None:
                    param["default"] = _default(arg.group(2))
                params.append(param)
            if not params:
                lam = _LAMBDA.search(body)
                count = (len([p for p in lam.group(1).split(",") if p.strip()]) if lam
                         else _declared_arity(source, body))
                params = [{"name": f"arg{i}", "kind": "POSITIONAL_ONLY"} for i in range(count)]
            functions[match.group(1)] = {"params": params, "from": name}
        for match in re.finditer(r'm\.attr\("(\w+)"\)\s*=\s*m\.attr\("(\w+)"\)', text):
            aliases[match.group(1)] = match.group(2)
    return functions, aliases


def _declared_arity(source: Source, body: str) -> int:
    """Parameters of `&function` registered without py::arg, from its C++ definition."""
    target = re.search(r"&(\w+)", body).group(1)
    for _, text in source.glob("csrc/", ".hpp"):
        match = re.search(rf"\b{target}\s*\(", text)
        if match and re.search(rf"(?:static|inline)[^;{{]*\b{target}\s*\(", text):
            arguments = _balanced(text, match.end() - 1)
            return len([p for p in arguments.split(",") if p.strip()])
    raise ValueError(f"no definition of {target}")


def _python_functions(source: Source, path: str) -> dict:
    functions = {}
    for node in ast.parse(source.files[path]).body:
        if isinstance(node, ast.FunctionDef) and not node.name.startswith("_"):
            args = node.args
            defaults = [None] * (len(args.args) - len(args.defaults)) + list(args.defaults)
            params = []
            for arg, default in zip(args.args, defaults):
                param = {"name": arg.arg, "kind": "POSITIONAL_OR_KEYWORD"}
                if default is not None:
                    param["default"] = ast.literal_eval(default)
                params.append(param)
            functions[node.name] = {"params": params, "from": path}
    return functions


def _python_aliases(source: Source, path: str) -> dict:
    aliases = {}
    for node in ast.walk(ast.parse(source.files[path])):
        if (isinstance(node, ast.Assign) and len(node.targets) == 1
                and isinstance(node.targets[0], ast.Name) and isinstance(node.value, ast.Name)):
            aliases[node.targets[0].id] = node.value.id
    return aliases


def record(path: Path) -> dict:
    source = Source(path)
    functions, aliases = _cpp_functions(source)
    functions.update(_python_functions(source, "deep_gemm/utils/math.py"))
    aliases.update(_python_aliases(source, "deep_gemm/__init__.py"))
    aliases.update(_python_aliases(source, "deep_gemm/utils/layout.py"))
    for alias, target in aliases.items():
        while target in aliases and target not in functions:
            target = aliases[target]
        if target in functions:
            functions[alias] = dict(functions[target], alias_of=target)
    missing = [name for name in HOPPER_API + TRAINING_API if name not in functions]
    if missing:
        raise SystemExit(f"not found in {path}: {', '.join(missing)}")
    return {
        "source": "DeepGEMM 54e2261 (v2.6.1), " + path.name,
        "produced_by": "python tools/record_deep_gemm_api.py " + path.name,
        "hopper_api": list(HOPPER_API),
        "training_api": list(TRAINING_API),
        "functions": {name: functions[name] for name in sorted(functions)},
    }


def main(argv: list) -> int:
    if len(argv) != 1:
        print(__doc__.split("\n\n")[1], file=sys.stderr)
        return 2
    print(json.dumps(record(Path(argv[0])), indent=1, sort_keys=True))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
