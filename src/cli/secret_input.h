#pragma once
// Reading a password: from the terminal without echo, or one line from stdin when stdin is not
// a terminal (scripts pipe it in, so it stays out of argv and shell history).

#include <string>

#include "cli/context.h"

namespace allot::cli {

// Prompts on stderr only on a terminal. Trailing CR/LF removed; other bytes kept.
std::string readSecret(Context& ctx, const std::string& prompt);

}  // namespace allot::cli
