#include "exe/contour_config.h"

#include <map>

namespace allot {

Status readContourConfig(const toml::table& tbl, control::ContourOptions& out) {
  const toml::node* node = tbl.get("contours");
  if (!node) return out.validate();
  const toml::table* section = node->as_table();
  if (!section) return Status::InvalidArgument("contours: expected a table");
  for (const auto& [key, value] : *section) {
    if (key != "names" && key != "default" && key != "submit_role")
      return Status::InvalidArgument("contours." + std::string(key.str()) +
                                     ": unknown key (names, default, submit_role)");
  }
  // Roles given for names not (or no longer) listed would silently do nothing: refuse them.
  std::map<std::string, model::Role> roles;
  for (const auto& c : out.contours) roles[c.name] = c.submitRole;
  if (const toml::node* names = section->get("names")) {
    const toml::array* list = names->as_array();
    if (!list) return Status::InvalidArgument("contours.names: expected a list of names");
    out.contours.clear();
    for (const auto& n : *list) {
      auto name = n.value<std::string>();
      if (!name) return Status::InvalidArgument("contours.names: expected a list of names");
      // Unless submit_role says otherwise: members may submit, except into "prod".
      auto known = roles.find(*name);
      out.contours.push_back({*name, known != roles.end() ? known->second
                                     : *name == "prod"    ? model::Role::kTeamAdmin
                                                          : model::Role::kMember});
    }
  }
  if (const toml::node* def = section->get("default")) {
    auto name = def->value<std::string>();
    if (!name) return Status::InvalidArgument("contours.default: expected a contour name");
    out.defaultContour = *name;
  }
  if (const toml::node* sr = section->get("submit_role")) {
    const toml::table* t = sr->as_table();
    if (!t) return Status::InvalidArgument("contours.submit_role: expected a table");
    for (const auto& [name, value] : *t) {
      const std::string key = "contours.submit_role." + std::string(name.str());
      auto text = value.value<std::string>();
      auto role = text ? model::parseRole(*text) : std::nullopt;
      if (!role || (*role != model::Role::kMember && *role != model::Role::kTeamAdmin))
        return Status::InvalidArgument(key + ": expected member or team-admin");
      bool found = false;
      for (auto& c : out.contours) {
        if (c.name == std::string(name.str())) {
          c.submitRole = *role;
          found = true;
        }
      }
      if (!found)
        return Status::InvalidArgument(key + ": no contour '" + std::string(name.str()) +
                                       "' in contours.names (" + out.namesText() + ")");
    }
  }
  return out.validate();
}

}  // namespace allot
