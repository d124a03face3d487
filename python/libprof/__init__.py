"""libprof, as a Python package: the preload (libprof.so), libprof-report and the `libprof`
command, found where pip put them. `python -m libprof [options] -- PROGRAM ...` and the `libprof`
console script run the same command; see `libprof --help` and https://github.com (docs/)."""
import os

HERE = os.path.dirname(os.path.abspath(__file__))
BIN = os.path.join(HERE, "bin")


def path(name):
    """The path of one of the package's files: "libprof.so", "libprof-report" or "libprof"."""
    return os.path.join(BIN, name)
