#include "server/common/SequenceParameterChecks.h"

#include <string>

namespace ortserve::common {

Status CheckSequenceParameters(const SequenceParameters& sequence) {
  if (sequence.string_id.size() > kMaxStringSequenceIdLength) {
    // Triton's words, with the length that broke them.
    return InvalidArgument("parameter 'sequence_id': string correlation ID cannot be longer than " +
                           std::to_string(kMaxStringSequenceIdLength) + " characters (got " +
                           std::to_string(sequence.string_id.size()) + ")");
  }
  if ((sequence.start || sequence.end) && !sequence.has_id()) {
    const char* flag = sequence.start ? "sequence_start" : "sequence_end";
    return InvalidArgument(std::string("parameter '") + flag +
                           "' is true but 'sequence_id' is missing, 0 or empty: a request in a sequence "
                           "must give a non-zero integer or a non-empty string 'sequence_id'");
  }
  return Status::Ok();
}

}  // namespace ortserve::common
