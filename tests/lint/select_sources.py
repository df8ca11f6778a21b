"""The sources clang-tidy must check again: reads the changed paths
(NUL-separated) on stdin, prints (NUL-separated) every src/**/*.cpp whose
object depends on one of them, by the build's ninja deps.
Usage: select_sources.py SOURCE_DIR BUILD_DIR"""
import os, subprocess, sys
source_dir, build_dir = sys.argv[1], sys.argv[2]
changed = {os.path.realpath(os.path.join(source_dir, p)) for p in sys.stdin.read().split("\0") if p}
# Each object's sources and headers, as the compiler reported them.
deps = subprocess.run(["ninja", "-C", build_dir, "-t", "deps"], capture_output=True, text=True, check=True).stdout
selected, current, source = set(), False, None
for line in deps.splitlines():
    if not line.strip():
        continue
    if not line.startswith(" "):
        source, current = None, False
        continue
    path = os.path.realpath(os.path.join(build_dir, line.strip()))
    if source is None:
        source = path
        current = path.startswith(os.path.join(source_dir, "src") + "/") and path.endswith(".cpp")
    if current and path in changed:
        selected.add(os.path.relpath(source, source_dir))
# A source the build has not compiled has no deps yet: checked if changed.
for path in changed:
    rel = os.path.relpath(path, source_dir)
    if rel.startswith("src/") and rel.endswith(".cpp") and os.path.exists(path):
        selected.add(rel)
sys.stdout.write("".join(name + "\0" for name in sorted(selected)))
