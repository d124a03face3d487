"""python -m libprof [options] [--] PROGRAM [ARGS...]: the libprof command (libprof --help), with
the preload and libprof-report of this package."""
import os
import sys

from . import path


def _exec(name):
    exe = path(name)
    os.execv(exe, [name] + sys.argv[1:])


def main():
    """The `libprof` command."""
    _exec("libprof")


def report():
    """The `libprof-report` command."""
    _exec("libprof-report")


if __name__ == "__main__":
    main()
