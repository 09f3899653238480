#pragma once
// What clients may change while the server runs, through Triton's logging
// and trace extensions: the server log's settings and the trace settings.
// main() creates them; both front ends share them. A null member: that
// extension answers 503 / UNAVAILABLE (servers built without it, in tests).
#include <memory>

#include "server/common/LogControl.h"
#include "server/tracing/TraceSettings.h"

namespace ortserve::common {

struct RuntimeSettings {
  std::shared_ptr<LogControl> log;
  std::shared_ptr<tracing::TraceSettings> trace;
};

}  // namespace ortserve::common
