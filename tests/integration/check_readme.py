#!/usr/bin/env python3
"""check_readme.py: runs the README's recipes as a user would, and checks what they promise.

    check_readme.py README.md SOURCE_DIR BUILD_DIR WORK_DIR

Each recipe is a "### title" of the "## Recipes" section, one ```sh block, then a paragraph
starting "Writes: " that names the files it must leave (in backquotes). The block runs under
bash -e in WORK_DIR, where build/ and tests/ are links into the built clone, as if typed at the
root of a clone. Checked: the block exits 0, every file it promises is there and not empty, a
.json file is strict JSON (Python's json), and a trace has events.
Prints one line per recipe; exits 1 on the first failure."""
import json
import os
import re
import subprocess
import sys

readme, src, build, work = sys.argv[1:5]
text = open(readme).read()
start = text.index("\n## Recipes")
end = text.index("\n## ", start + 5)
recipes = re.findall(r"\n### (.*?)\n\n```sh\n(.*?)```\n\nWrites: (.*?)(?:\.\s|\.$|\n\n)", text[start:end], re.S)
if len(recipes) < 6:
    sys.exit("README: %d recipes found, expected at least 6" % len(recipes))
os.makedirs(work, exist_ok=True)
for name, target in (("build", build), ("tests", os.path.join(src, "tests"))):
    link = os.path.join(work, name)
    if not os.path.lexists(link):
        os.symlink(target, link)
for title, block, writes in recipes:
    files = re.findall(r"`([^`]+)`", writes)
    if not files:
        sys.exit("%s: no file promised" % title)
    r = subprocess.run(["bash", "-ec", block], cwd=work, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       text=True, timeout=600)
    if r.returncode != 0:
        sys.exit("%s: exit %d\n%s%s" % (title, r.returncode, r.stdout[-2000:], r.stderr[-2000:]))
    for f in files:
        path = os.path.join(work, f)
        if not os.path.isfile(path) or os.path.getsize(path) == 0:
            sys.exit("%s: %s was not written" % (title, f))
        if f.endswith(".json"):
            doc = json.load(open(path))
            if isinstance(doc, dict) and "traceEvents" in doc and not doc["traceEvents"]:
                sys.exit("%s: %s has no events" % (title, f))
    print("%s: ok (%s)" % (title, ", ".join(files)))
