#pragma once
// Domain values shared by every module: plain structs, no behaviour beyond small helpers.
// Names (teams, users, projects, hosts) are the ids people type; jobs get a number. One header
// per area; this one includes them all.

#include "model/directory.h"
#include "model/host.h"
#include "model/job.h"
#include "model/lease.h"
#include "model/profile.h"
