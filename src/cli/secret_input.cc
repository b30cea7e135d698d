#include "cli/secret_input.h"

#include <termios.h>
#include <unistd.h>

#include <iostream>

namespace allot::cli {

std::string readSecret(Context& ctx, const std::string& prompt) {
  std::string line;
  // Only the real stdin can be a terminal; tests hand the context another stream.
  const bool tty = &ctx.in() == &std::cin && ::isatty(STDIN_FILENO);
  termios saved{};
  if (tty) {
    ctx.err() << prompt << std::flush;
    ::tcgetattr(STDIN_FILENO, &saved);
    termios quiet = saved;
    quiet.c_lflag &= ~static_cast<tcflag_t>(ECHO);
    ::tcsetattr(STDIN_FILENO, TCSANOW, &quiet);
  }
  std::getline(ctx.in(), line);
  if (tty) {
    ::tcsetattr(STDIN_FILENO, TCSANOW, &saved);
    ctx.err() << "\n";
  }
  while (!line.empty() && (line.back() == '\r' || line.back() == '\n')) line.pop_back();
  return line;
}

}  // namespace allot::cli
