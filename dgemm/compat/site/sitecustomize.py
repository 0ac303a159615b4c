"""Start-up hook of `python -m dgemm.compat`: this directory is first on PYTHONPATH, so every
Python process started under it runs this file, which makes `import deep_gemm` load dgemm's
module (`dgemm.compat.alias`) and then runs the `sitecustomize` this one shadows, if any.

It imports only dgemm's package root and dgemm.compat.alias (no torch): a process that never
imports deep_gemm pays next to nothing. DGEMM_COMPAT_ROOT, set by `python -m dgemm.compat`, is
the directory holding the dgemm package that started it; that copy is the one loaded, even
where another dgemm is installed or the child's sys.path lacks it, so parent and children run
the same dgemm.
"""
import importlib.machinery
import importlib.util
import os
import sys


def _install_alias():
    root = os.environ.get("DGEMM_COMPAT_ROOT")
    init = os.path.join(root, "dgemm", "__init__.py") if root else None
    if init and "dgemm" not in sys.modules and os.path.isfile(init):
        spec = importlib.util.spec_from_file_location(
            "dgemm", init, submodule_search_locations=[os.path.dirname(init)])
        module = importlib.util.module_from_spec(spec)
        sys.modules["dgemm"] = module
        try:
            spec.loader.exec_module(module)
        except BaseException:
            del sys.modules["dgemm"]
            raise
    import dgemm.compat.alias as alias
    alias.install()


def _run_shadowed_sitecustomize():
    here = os.path.dirname(os.path.abspath(__file__))
    rest = [p for p in sys.path if os.path.abspath(p or os.curdir) != here]
    spec = importlib.machinery.PathFinder.find_spec("sitecustomize", rest)
    if spec is None or spec.loader is None:
        return
    module = importlib.util.module_from_spec(spec)
    sys.modules["sitecustomize"] = module
    spec.loader.exec_module(module)


try:
    _install_alias()
except Exception as error:          # never stop the interpreter from starting
    sys.stderr.write(f"dgemm.compat: could not alias deep_gemm to dgemm: "
                     f"{type(error).__name__}: {error}\n")
_run_shadowed_sitecustomize()
