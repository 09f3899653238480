#include "runtime/OpLibraries.h"

#include <cctype>

namespace ortserve {
namespace {

// A Python extension module (onnxruntime-extensions' PyPI wheel ships its
// operators as one) leaves libpython's symbols to the interpreter that
// imports it; in a server there is none, and dlopen names the first one
// missing.
bool MissesPythonSymbols(const std::string& loader_message) {
  return loader_message.find("undefined symbol: Py") != std::string::npos ||
         loader_message.find("undefined symbol: _Py") != std::string::npos;
}

// ORT says "Failed to load library <path> with error: <path>: <dlerror>";
// the dlerror text after the path is what the reader needs.
std::string LoaderReason(const std::string& library, const std::string& ort_message) {
  const std::string marker = "with error: ";
  const size_t at = ort_message.find(marker);
  if (at == std::string::npos) return ort_message;
  std::string reason = ort_message.substr(at + marker.size());
  if (reason.rfind(library + ": ", 0) == 0) reason.erase(0, library.size() + 2);
  return reason;
}

// "libpython3.11.so.1.0" for ".../_ext.cpython-311-x86_64-linux-gnu.so" (the
// extension module's ABI tag names the Python it was built for).
std::string LibpythonFor(const std::string& library) {
  const std::string tag = "cpython-3";
  const size_t at = library.rfind(tag);
  if (at == std::string::npos) return "libpython3.X.so.1.0";
  const size_t minor_begin = at + tag.size();
  size_t minor_end = minor_begin;
  while (minor_end < library.size() && std::isdigit(static_cast<unsigned char>(library[minor_end]))) {
    ++minor_end;
  }
  if (minor_end == minor_begin) return "libpython3.X.so.1.0";
  return "libpython3." + library.substr(minor_begin, minor_end - minor_begin) + ".so.1.0";
}

std::string RegistrationFailure(const std::string& library, const std::string& ort_message) {
  const std::string reason = LoaderReason(library, ort_message);
  std::string message = "op library '" + library + "' cannot be registered: " + reason;
  if (MissesPythonSymbols(reason)) {
    message +=
        " (the library is a Python extension module that needs libpython's symbols: start ortserve "
        "with LD_PRELOAD=" +
        LibpythonFor(library) + "; docs/model-config.md, \"Operator libraries\")";
  }
  return message;
}

}  // namespace

Status RegisterOpLibraries(const std::vector<std::string>& libraries,
                           Ort::SessionOptions& options) {
  for (const std::string& library : libraries) {
    try {
      options.RegisterCustomOpsLibrary(library.c_str());
    } catch (const std::exception& e) {  // Ort::Exception included
      return InvalidArgument(RegistrationFailure(library, e.what()));
    }
  }
  return Status::Ok();
}

}  // namespace ortserve
