#pragma once

namespace mullet::cli {

// The whole program behind main(): parses the command line, runs one
// subcommand, turns every error into one message and a documented exit code.
int run_main(int argc, char** argv);

}  // namespace mullet::cli
