#pragma once
// `ortserve check --model-repository=DIR [server flags]`: the offline
// repository check (repository/RepositoryCheck.h) for CI. Takes every flag
// the server takes (those that shape loading act as in the server; the
// others are accepted and unused), writes one JSON object per model to
// standard output:
//   {"model":"m","would_load":true,"versions":[1,2],"config":{...},"errors":[]}
// "config" as GET /v2/models/m/config would answer (the newest version that
// would load; null if none), "errors" in the server's words. Logs (warnings,
// and every error again as a line) go to standard error. Exit status: 0 when
// every model would load, 1 when one would not, 2 for bad flags.
namespace ortserve::app {

int RunCheck(int argc, char** argv);

}  // namespace ortserve::app
