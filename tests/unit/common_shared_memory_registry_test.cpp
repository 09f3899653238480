// SharedMemoryRegistry and the shared_memory_* parameters: key rules, range
// checks (overflow included), the refcounted mapping that outlives
// Unregister while a view is held, the region limit, the disabled default.
#include "server/common/SharedMemoryRegistry.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstring>
#include <fstream>
#include <initializer_list>
#include <limits>
#include <string>

#include <gtest/gtest.h>

#include "server/common/SharedMemoryFaultGuard.h"
#include "server/common/SharedMemoryParameters.h"

namespace ortserve::common {
namespace {

// A POSIX shared memory object of `size` bytes, unlinked at the end.
class ShmObject {
 public:
  explicit ShmObject(size_t size) : key_("/ortserve_unit_" + std::to_string(getpid()) + "_" + std::to_string(next_++)) {
    const int fd = shm_open(key_.c_str(), O_RDWR | O_CREAT | O_EXCL, 0600);
    EXPECT_GE(fd, 0);
    EXPECT_EQ(ftruncate(fd, static_cast<off_t>(size)), 0);
    void* p = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    EXPECT_NE(p, MAP_FAILED);
    base_ = static_cast<unsigned char*>(p);
    size_ = size;
    fd_ = fd;
  }
  ~ShmObject() {
    munmap(base_, size_);
    close(fd_);
    shm_unlink(key_.c_str());
  }
  const std::string& key() const { return key_; }
  unsigned char* bytes() { return base_; }
  void Truncate(size_t size) { EXPECT_EQ(ftruncate(fd_, static_cast<off_t>(size)), 0); }

 private:
  static inline int next_ = 0;
  std::string key_;
  unsigned char* base_ = nullptr;
  size_t size_ = 0;
  int fd_ = -1;
};

// The mappings of the object `key` in this process (the test's own is one).
int Mappings(const std::string& key) {
  std::ifstream maps("/proc/self/maps");
  int count = 0;
  for (std::string line; std::getline(maps, line);) {
    if (line.ends_with("/dev/shm" + key)) ++count;
  }
  return count;
}

SharedMemoryRegistry Enabled(size_t max_regions = 8) {
  return SharedMemoryRegistry(SharedMemoryOptions{.allow_client_shm = true, .max_regions = max_regions});
}

TEST(SharedMemoryKeyTest, OnlyPosixSharedMemoryNames) {
  EXPECT_TRUE(ValidateSharedMemoryKey("r", "/input_simple").ok());
  EXPECT_TRUE(ValidateSharedMemoryKey("r", "/" + std::string(255, 'k')).ok());
  for (const std::string& key : std::initializer_list<std::string>{"", "/", "///", "noslash", "//x", "/a/b", "/../etc/passwd", "/.", "/..",
                                "/" + std::string(256, 'k'), std::string("/a\0b", 4),
                                "/triton_python_backend_shm_region_1"}) {
    Status st = ValidateSharedMemoryKey("r", key);
    EXPECT_EQ(st.code(), StatusCode::kInvalidArgument) << key;
    EXPECT_NE(st.message().find("cannot register shared memory region 'r'"), std::string::npos) << st.message();
  }
}

TEST(SharedMemoryRegistryTest, DisabledByDefaultNamingTheFlag) {
  SharedMemoryRegistry registry;
  ShmObject object(64);
  Status st = registry.Register("r", object.key(), 0, 64);
  EXPECT_EQ(st.code(), StatusCode::kUnsupported);
  EXPECT_NE(st.message().find("--allow-client-shm=true"), std::string::npos);
  EXPECT_EQ(registry.Unregister("r").code(), StatusCode::kUnsupported);
  auto status = registry.Describe("");
  ASSERT_TRUE(status.ok());
  EXPECT_TRUE(status->empty());
}

TEST(SharedMemoryRegistryTest, RegisterChecksTheObject) {
  SharedMemoryRegistry registry = Enabled();
  ShmObject object(64);
  const uint64_t max = std::numeric_limits<uint64_t>::max();
  for (auto [offset, size] : {std::pair<uint64_t, uint64_t>{0, 65}, {1, 64}, {64, 1}, {0, 0}, {max, 2}, {2, max}}) {
    Status st = registry.Register("r", object.key(), offset, size);
    EXPECT_EQ(st.code(), StatusCode::kInvalidArgument) << offset << "+" << size;
    EXPECT_NE(st.message().find("failed to register shared memory region 'r'"), std::string::npos) << st.message();
  }
  // Triton's status and words for an object that cannot be opened.
  const Status missing = registry.Register("r", "/ortserve_unit_no_such_object", 0, 8);
  EXPECT_EQ(missing.code(), StatusCode::kInternal);
  EXPECT_EQ(missing.message().rfind("Unable to open shared memory region: '/ortserve_unit_no_such_object'", 0), 0u);
  ASSERT_TRUE(registry.Register("r", object.key(), 0, 64).ok());
  Status again = registry.Register("r", object.key(), 0, 64);
  EXPECT_NE(again.message().find("shared memory region 'r' already in manager"), std::string::npos);
  auto status = registry.Describe("r");
  ASSERT_TRUE(status.ok());
  EXPECT_EQ(status->at(0).key, object.key());
  EXPECT_EQ(registry.Describe("other").status().code(), StatusCode::kNotFound);
}

TEST(SharedMemoryRegistryTest, ViewsAreCheckedAgainstTheRegion) {
  SharedMemoryRegistry registry = Enabled();
  ShmObject object(8192);
  std::memcpy(object.bytes() + 4100, "abcd", 4);
  // An offset that is not page aligned: mapped from its page, viewed at it.
  ASSERT_TRUE(registry.Register("r", object.key(), 4096, 64).ok());
  auto view = registry.View("r", 4, 4);
  ASSERT_TRUE(view.ok()) << view.status().message();
  EXPECT_EQ(std::memcmp(view->data, "abcd", 4), 0);

  const uint64_t max = std::numeric_limits<uint64_t>::max();
  EXPECT_NE(registry.View("r", 64, 0).status().message().find("Invalid offset for shared memory region"),
            std::string::npos);
  EXPECT_NE(registry.View("r", 32, max - 16).status().message().find("Integer overflow detected"),
            std::string::npos);
  EXPECT_NE(registry.View("r", 1, 64).status().message().find("Invalid offset + byte size"), std::string::npos);
  EXPECT_EQ(registry.View("nope", 0, 1).status().code(), StatusCode::kNotFound);
  EXPECT_TRUE(registry.View("r", 0, 64).ok());
}

TEST(SharedMemoryRegistryTest, AShrunkObjectIsRefusedInsteadOfRead) {
  SharedMemoryRegistry registry = Enabled();
  ShmObject object(8192);
  ASSERT_TRUE(registry.Register("r", object.key(), 0, 8192).ok());
  object.Truncate(4096);
  Status st = registry.View("r", 0, 16).status();
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("shrank"), std::string::npos);
}

TEST(SharedMemoryRegistryTest, AShrinkRacingAViewReadsZerosInsteadOfCrashing) {
  SharedMemoryRegistry registry = Enabled();
  ShmObject object(3 * 4096);
  std::memset(object.bytes(), 7, 3 * 4096);
  ASSERT_TRUE(registry.Register("r", object.key(), 0, 3 * 4096).ok());
  auto view = registry.View("r", 0, 3 * 4096);
  ASSERT_TRUE(view.ok());
  // The client shrinks its object while the view is held: the pages past the
  // new end would raise SIGBUS and end the process.
  object.Truncate(4096);
  const uint64_t before = SharedMemoryFaultsAnswered();
  EXPECT_EQ(std::to_integer<int>(view->data[5000]), 0);
  view->data[9000] = std::byte{1};  // a write goes nowhere, and does not crash
  EXPECT_EQ(std::to_integer<int>(view->data[100]), 7);  // the page the object still holds
  EXPECT_GT(SharedMemoryFaultsAnswered(), before);
  EXPECT_EQ(registry.View("r", 0, 16).status().code(), StatusCode::kInvalidArgument);
}

TEST(SharedMemoryRegistryTest, UnregisterUnmapsAfterTheLastView) {
  SharedMemoryRegistry registry = Enabled();
  ShmObject object(64);
  ASSERT_TRUE(registry.Register("r", object.key(), 0, 64).ok());
  auto view = registry.View("r", 0, 64);
  ASSERT_TRUE(view.ok());
  ASSERT_TRUE(registry.Unregister("r").ok());
  EXPECT_EQ(registry.View("r", 0, 64).status().code(), StatusCode::kNotFound);
  EXPECT_TRUE(registry.Describe("")->empty());
  // Still mapped, still readable and writable through the held view.
  object.bytes()[10] = 42;
  EXPECT_EQ(std::to_integer<int>(view->data[10]), 42);
  EXPECT_EQ(Mappings(object.key()), 2);
  // The name can be registered again meanwhile.
  ASSERT_TRUE(registry.Register("r", object.key(), 0, 64).ok());
  ASSERT_TRUE(registry.Unregister("").ok());
  view = Status(StatusCode::kCancelled, "dropped");
  EXPECT_EQ(Mappings(object.key()), 1);
}

TEST(SharedMemoryRegistryTest, RegionLimit) {
  SharedMemoryRegistry registry = Enabled(2);
  ShmObject object(64);
  ASSERT_TRUE(registry.Register("a", object.key(), 0, 64).ok());
  ASSERT_TRUE(registry.Register("b", object.key(), 0, 64).ok());
  Status st = registry.Register("c", object.key(), 0, 64);
  EXPECT_EQ(st.code(), StatusCode::kUnavailable);
  EXPECT_NE(st.message().find("--max-shm-regions=2"), std::string::npos);
  ASSERT_TRUE(registry.Unregister("a").ok());
  EXPECT_TRUE(registry.Register("c", object.key(), 0, 64).ok());
}

WireParameter Str(std::string_view s) {
  WireParameter p;
  p.kind = WireParameter::Kind::kString;
  p.string_value = s;
  return p;
}
WireParameter Int(int64_t v) {
  WireParameter p;
  p.kind = WireParameter::Kind::kSigned;
  p.signed_value = v;
  return p;
}

TEST(SharedMemoryParametersTest, ParsesAndRefusesMalformedReferences) {
  auto parse = [](WireParameter region, WireParameter offset, WireParameter size) {
    return ParseSharedMemoryRef("input 'X'", [&](std::string_view key) {
      if (key == kShmRegionParameter) return region;
      if (key == kShmOffsetParameter) return offset;
      return size;
    });
  };
  auto none = parse({}, {}, {});
  ASSERT_TRUE(none.ok());
  EXPECT_FALSE(none->has_value());
  auto ok = parse(Str("r"), Int(8), Int(64));
  ASSERT_TRUE(ok.ok() && ok->has_value());
  EXPECT_EQ((*ok)->region, "r");
  EXPECT_EQ((*ok)->offset, 8u);
  EXPECT_EQ((*ok)->byte_size, 64u);
  EXPECT_FALSE(parse(Str("r"), {}, {}).ok());                 // no byte size
  EXPECT_FALSE(parse({}, {}, Int(64)).ok());                  // no region
  EXPECT_FALSE(parse(Int(1), {}, Int(64)).ok());              // region not a string
  EXPECT_FALSE(parse(Str("r"), Int(-1), Int(64)).ok());       // negative offset
  EXPECT_FALSE(parse(Str("r"), Str("0"), Int(64)).ok());      // offset not an integer
}

TEST(SharedMemoryParametersTest, BindsInputsInPlaceAndWritesOutputs) {
  SharedMemoryRegistry registry = Enabled();
  ShmObject object(64);
  const float in[4] = {1, 2, 3, 4};
  std::memcpy(object.bytes(), in, sizeof in);
  ASSERT_TRUE(registry.Register("r", object.key(), 0, 64).ok());
  InferenceRequest request;
  request.inputs.push_back(Tensor{"x", DataType::kFp32, {4}, {}});
  request.requested_outputs.push_back(RequestedOutput{"y", false});
  SharedMemoryRefs refs;
  refs.inputs.push_back({0, SharedMemoryRef{"r", 0, 16}});
  refs.outputs.push_back({0, SharedMemoryRef{"r", 32, 16}});
  auto outputs = BindSharedMemory(registry, refs, &request);
  ASSERT_TRUE(outputs.ok()) << outputs.status().message();
  // Viewed in place: a change to the region shows in the tensor.
  ASSERT_EQ(request.inputs[0].data.size(), 16u);
  object.bytes()[0] = 0x7f;
  EXPECT_EQ(std::to_integer<int>(request.inputs[0].data.data()[0]), 0x7f);

  InferenceResponse response;
  response.outputs.push_back(Tensor{"y", DataType::kFp32, {4}, TensorData::Copy(in, sizeof in)});
  auto placed = (*outputs)->Write(response);
  ASSERT_TRUE(placed.ok());
  ASSERT_TRUE(placed->at(0).has_value());
  EXPECT_EQ(placed->at(0)->byte_size, 16u);
  EXPECT_EQ(std::memcmp(object.bytes() + 32, in, sizeof in), 0);

  response.outputs[0] = Tensor{"y", DataType::kFp32, {8}, TensorData::FromVector(std::vector<std::byte>(32))};
  EXPECT_NE((*outputs)->Write(response).status().message().find("should be at least 32 bytes"), std::string::npos);
}

TEST(SharedMemoryParametersTest, BytesInputsAreCopiedSoTheirPrefixesCannotChangeAfterValidation) {
  SharedMemoryRegistry registry = Enabled();
  ShmObject object(64);
  const unsigned char bytes[] = {3, 0, 0, 0, 'a', 'b', 'c'};
  std::memcpy(object.bytes(), bytes, sizeof bytes);
  ASSERT_TRUE(registry.Register("r", object.key(), 0, 64).ok());
  InferenceRequest request;
  request.inputs.push_back(Tensor{"s", DataType::kBytes, {1}, {}});
  SharedMemoryRefs refs;
  refs.inputs.push_back({0, SharedMemoryRef{"r", 0, sizeof bytes}});
  ASSERT_TRUE(BindSharedMemory(registry, refs, &request).ok());
  object.bytes()[0] = 0xff;  // the client rewrites the length prefix
  EXPECT_EQ(std::to_integer<int>(request.inputs[0].data.data()[0]), 3);
  EXPECT_EQ(CountBytesElements(request.inputs[0].data.data(), request.inputs[0].data.size()), 1u);
}

}  // namespace
}  // namespace ortserve::common
