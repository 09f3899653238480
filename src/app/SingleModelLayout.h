#pragma once
// KServe's storage initializer downloads a model to /mnt/models as it is
// stored: either a Triton-style repository (<model>/<version>/model.onnx) or
// one model's own directory (model.onnx, perhaps with config.pbtxt, external
// data files, or numeric version directories). ortserve serves a Triton
// layout; this maps the second kind onto one, so one ServingRuntime serves
// both (deploy/kserve/, docs/deploy.md "KServe").
//
// A single-model directory is one that holds, at its top, a config.pbtxt,
// an .onnx file, or a numeric directory holding an .onnx file. It becomes
//   <work_dir>/<name>/config.pbtxt -> <dir>/config.pbtxt   (if present)
//   <work_dir>/<name>/<n>           -> <dir>/<n>           (each numeric dir)
//   <work_dir>/<name>/1/<file>      -> <dir>/<file>        (top-level files, when
//                                      there is no numeric dir; the one .onnx
//                                      file also as model.onnx)
// of symbolic links, so nothing is copied and external data files stay next
// to their model.
#include <string>

#include "core/Status.h"

namespace ortserve::app {

// True when `dir` holds one model's files rather than a repository of models.
bool IsSingleModelDirectory(const std::string& dir);

// Builds the Triton layout above under `work_dir` (replacing what a previous
// run left there) and returns the repository path to serve: `work_dir`.
// Fails naming the directory when it holds several .onnx files at its top
// and no model.onnx (which one is the model is then not clear).
Result<std::string> LinkSingleModelRepository(const std::string& dir, const std::string& name,
                                              const std::string& work_dir);

// --single-model-name (server and `ortserve check`): when `*repository` is a
// single model's directory and `name` is not empty, links it as model `name`
// into <temp>/ortserve-single-model-<pid> and points `*repository` there
// (SingleModelWorkDir()); otherwise leaves it as it is.
Status MapSingleModelRepository(std::string* repository, const std::string& name);
// The directory MapSingleModelRepository links into for this process.
std::string SingleModelWorkDir();

// Removes SingleModelWorkDir() when it goes, if `repository` (as
// MapSingleModelRepository left it) is that directory: the process's links
// go with it, on every return from main.
class SingleModelLinksRemover {
 public:
  explicit SingleModelLinksRemover(const std::string& repository);
  ~SingleModelLinksRemover();
  SingleModelLinksRemover(const SingleModelLinksRemover&) = delete;
  SingleModelLinksRemover& operator=(const SingleModelLinksRemover&) = delete;

 private:
  std::string linked_;  // empty: nothing to remove
};

}  // namespace ortserve::app
