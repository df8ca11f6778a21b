#include "git/handles.hpp"

#include <mutex>

#include "util/error.hpp"

namespace mullet::git {

std::string last_error_message() {
  const git_error* error = git_error_last();
  return error != nullptr && error->message != nullptr ? error->message : "unknown libgit2 error";
}

void check(int rc, std::string_view what) {
  if (rc >= 0) return;
  throw failure(std::string(what) + ": " + last_error_message());
}

SignaturePtr mullet_signature() {
  git_signature* raw_signature = nullptr;
  check(git_signature_now(&raw_signature, "git-mullet", "git-mullet@localhost"), "cannot make a signature");
  return SignaturePtr(raw_signature);
}

void initialise_libgit2() {
  static std::once_flag once;
  std::call_once(once, [] {
    git_libgit2_init();
    for (const auto level :
         {GIT_CONFIG_LEVEL_SYSTEM, GIT_CONFIG_LEVEL_GLOBAL, GIT_CONFIG_LEVEL_XDG, GIT_CONFIG_LEVEL_PROGRAMDATA}) {
      git_libgit2_opts(GIT_OPT_SET_SEARCH_PATH, level, "");
    }
    // Object creation is checked (no tree may name a missing object).
    git_libgit2_opts(GIT_OPT_ENABLE_STRICT_OBJECT_CREATION, 1);
  });
}

std::string oid_to_string(const git_oid& oid) {
  char hex[GIT_OID_HEXSZ + 1];
  git_oid_tostr(hex, sizeof hex, &oid);
  return hex;
}

git_oid oid_from_string(const std::string& hex) {
  git_oid oid;
  check(git_oid_fromstr(&oid, hex.c_str()), "invalid object id '" + hex + "'");
  return oid;
}

}  // namespace mullet::git
