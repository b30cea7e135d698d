#include "control/contours.h"

#include <set>

#include "control/names.h"

namespace allot::control {

const ContourRule* ContourOptions::find(const std::string& name) const {
  for (const auto& c : contours) {
    if (c.name == name) return &c;
  }
  return nullptr;
}

std::string ContourOptions::namesText() const {
  std::string out;
  for (const auto& c : contours) out += (out.empty() ? "" : ", ") + c.name;
  return out;
}

Status ContourOptions::validate() const {
  if (contours.empty())
    return Status::InvalidArgument("contours.names: at least one contour is needed",
                                   "contours.names");
  std::set<std::string> seen;
  for (const auto& c : contours) {
    ALLOT_RETURN_IF_ERROR(validateName(c.name, "contours.names"));
    if (!seen.insert(c.name).second)
      return Status::InvalidArgument("contours.names: '" + c.name + "' appears twice",
                                     "contours.names");
  }
  if (!find(defaultContour))
    return Status::InvalidArgument("contours.default: '" + defaultContour +
                                       "' is not one of the contours (" + namesText() + ")",
                                   "contours.default");
  return Status::Ok();
}

Status ContourOptions::check(const std::string& name, const char* field) const {
  if (find(name)) return Status::Ok();
  return Status::InvalidArgument(
      std::string(field) + ": unknown contour '" + name + "' (contours: " + namesText() + ")",
      field);
}

}  // namespace allot::control
