// The object behind the public `kvpool*` handle.
#pragma once

#include "config/config.hpp"
#include "plan/plan.hpp"

struct kvpool {
  kvp::config::Config config;
  kvp::plan::Plan plan;
};
