"""The test executable of one target, from cargo's JSON messages on stdin.

    cargo test ... --no-run --message-format=json-render-diagnostics | python3 .ci/test-executable.py NAME

Prints the path of the test executable built for the target called NAME (a library's unit
tests are its crate's name, an integration test its file's stem); fails if there is none.
"""
import json
import sys

name = sys.argv[1]
found = []
for line in sys.stdin:
    m = json.loads(line)
    if m.get("reason") == "compiler-artifact" and m["target"]["name"] == name \
            and m["profile"]["test"] and m.get("executable"):
        found.append(m["executable"])
if not found:
    sys.exit(f"test-executable.py: cargo built no test executable named {name}")
print(found[-1])
