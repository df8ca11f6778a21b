#include "cli/app.hpp"

int main(int argc, char** argv) {
  return mullet::cli::run_main(argc, argv);
}
