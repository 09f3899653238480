#include "server/http/IoThread.h"

#include "core/InlineRuns.h"

namespace ortserve::http {

void RunIoThread(IoThread& io) {
  // A cheap model may run a request's batch here while this thread serves
  // one connection (core/InlineRuns.h): its answer is queued on this thread's
  // inbox, never run inside Submit.
  InlineRunsScope inline_runs(&io.connections);
  for (;;) {
    if (!io.close_monitors.Pending()) {
      if (io.ioc.run_one() == 0) return;  // stopped
    } else if (io.ioc.poll_one() > 0) {
      io.close_monitors.SweepIfDue();
    } else {
      io.close_monitors.ArmAll();  // about to wait for events
      if (io.ioc.stopped()) return;
    }
  }
}

}  // namespace ortserve::http
