// /metrics: the engine's figures in the Prometheus text exposition format
// (version 0.0.4). Metric names are a contract for dashboards: keep them.
#pragma once

#include <string>

#include "server/engine.h"

namespace sluice::server {

std::string prometheus_text(const EngineMetrics& m);

}  // namespace sluice::server
