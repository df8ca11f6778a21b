# The benchmark repository bench/job-start and bench/snapshot share: one
# commit of $files small text files (100 per leaf directory, leaves spread over
# top-level directories of 25 leaves each) and a README, generated once into
# $repo (under bench/.cache/, git-ignored) and reused. Sourced; the caller
# defines die() and sets $files and $repo.

# A fast-import stream of one commit: FILES files, 100 per leaf directory,
# leaves spread over top-level directories of 25 leaves each.
generate_stream() {
  python3 - "$files" <<'EOF'
import sys
count = int(sys.argv[1])
out = sys.stdout.buffer
def data(payload):
    out.write(b"data %d\n" % len(payload))
    out.write(payload)
    out.write(b"\n")
paths = []
for i in range(count):
    leaf, index = divmod(i, 100)
    top, sub = divmod(leaf, 25)
    path = "src/mod%03d/part%02d/file%03d.txt" % (top, sub, index)
    body = "".join("%s line %d: the quick brown fox %d\n" % (path, n, i * 7 + n) for n in range(8))
    out.write(b"blob\nmark :%d\n" % (i + 1))
    data(body.encode())
    paths.append(path)
out.write(b"commit refs/heads/main\n")
out.write(b"author bench <bench@example.invalid> 1700000000 +0000\n")
out.write(b"committer bench <bench@example.invalid> 1700000000 +0000\n")
data(b"generated: %d files\n" % count)
out.write(b"M 100644 inline README\n")
data(b"A generated repository for bench/job-start.\n")
for i, path in enumerate(paths):
    out.write(b"M 100644 :%d %s\n" % (i + 1, path.encode()))
out.write(b"done\n")
EOF
}

make_repo() {
  command -v python3 >/dev/null || die "python3 is needed to generate the repository"
  echo "generating a repository of $files files in $repo (cached)..." >&2
  rm -rf "$repo.tmp"
  git init -q -b main "$repo.tmp"
  generate_stream | git -C "$repo.tmp" fast-import --quiet --done
  git -C "$repo.tmp" -c checkout.workers=0 checkout -q -f main
  git -C "$repo.tmp" gc -q
  touch "$repo.tmp/.git/bench-complete"
  mv "$repo.tmp" "$repo"
}

# Makes $repo unless a complete one is cached.
ensure_repo() {
  [ -f "$repo/.git/bench-complete" ] || { rm -rf "$repo"; make_repo; }
}
