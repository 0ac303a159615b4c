"""dgemm's version: the one place it is written. pyproject.toml reads it (setuptools' dynamic
`attr`, which parses this file without importing the package), `dgemm.__version__` and
`dgemm-cache --version` show it, so a wheel, an install and a source checkout all agree."""
__version__ = "0.1.0"
