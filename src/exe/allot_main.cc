#include "cli/cli.h"

int main(int argc, char** argv) { return allot::cli::run(argc, argv); }
