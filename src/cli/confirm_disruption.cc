#include "cli/confirm_disruption.h"

#include <unistd.h>

#include <iostream>

#include "cli/format.h"

namespace allot::cli {

std::optional<int> confirmDisruption(Context& ctx, const std::string& impactPath,
                                     const std::string& action, bool force) {
  if (force) return std::nullopt;
  auto impact = ctx.get(impactPath);
  if (!impact.ok()) {
    if (impact.status().code() == Code::kNotFound &&
        impact.status().message().find("no such route") != std::string::npos)
      return std::nullopt;
    return ctx.fail(impact.status());
  }
  const json stopped = impact->value("would_stop", json::array());
  if (!stopped.is_array() || stopped.empty()) return std::nullopt;
  ctx.err() << "This stops " << stopped.size() << " running job"
            << (stopped.size() == 1 ? "" : "s") << " at " << text(*impact, "stops_at") << ":\n";
  for (const auto& j : stopped) {
    ctx.err() << "  j-" << j.value("job", json(0)).dump() << " " << text(j, "name", "")
              << " (" << text(j, "user") << ", team " << text(j, "team") << ") on "
              << text(j, "host") << ", " << j.value("gpus", json(0)).dump() << " GPUs\n";
  }
  // Only the real stdin can be a terminal; tests hand the context another stream.
  const bool tty = &ctx.in() != &std::cin || ::isatty(STDIN_FILENO);
  if (!tty) {
    ctx.err() << "allot: " << action << " would stop the jobs above; run again with --force to "
              << "go on\n";
    return 1;
  }
  ctx.err() << "Go on with " << action << "? [y/N] " << std::flush;
  std::string answer;
  std::getline(ctx.in(), answer);
  if (answer == "y" || answer == "Y" || answer == "yes") return std::nullopt;
  ctx.err() << "Nothing done.\n";
  return 1;
}

}  // namespace allot::cli
