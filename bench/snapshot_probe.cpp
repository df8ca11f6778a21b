// bench/snapshot's stand-in for a job's snapshot until jobs run on overlays:
// one take_upper_snapshot of an overlay's upper dir, as a job would take it.
//
//   snapshot_probe GIT_DIR BASE_COMMIT UPPER_DIR OPAQUE_XATTR
//
// Prints the tree's id, then the time the snapshot itself took (repository
// opened, base tree read, upper dir walked, objects written) in
// milliseconds, then how many files it hashed.
#include <chrono>
#include <exception>
#include <iostream>

#include "git/repository.hpp"
#include "git/snapshot.hpp"
#include "git/upper_snapshot.hpp"

int main(int argc, char** argv) {
  if (argc != 5) {
    std::cerr << "usage: snapshot_probe GIT_DIR BASE_COMMIT UPPER_DIR OPAQUE_XATTR\n";
    return 2;
  }
  try {
    const auto start = std::chrono::steady_clock::now();
    const auto repo = mullet::git::Repository::open_git_dir(argv[1]);
    const git_oid base_tree = repo.tree_of(repo.resolve_commit(argv[2]));
    const auto snapshot = mullet::git::take_upper_snapshot(repo, base_tree, argv[3], argv[4], {});
    const auto took = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start);
    std::cout << mullet::git::oid_to_string(snapshot.tree) << "\n"
              << took.count() << "\n"
              << snapshot.files_hashed << "\n";
    for (const auto& warning : snapshot.warnings) std::cerr << "warning: " << warning << "\n";
  } catch (const std::exception& error) {
    std::cerr << "snapshot_probe: " << error.what() << "\n";
    return 1;
  }
  return 0;
}
