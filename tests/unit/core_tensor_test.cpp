#include <gtest/gtest.h>

#include <cstring>

#include "core/DataType.h"
#include "core/Tensor.h"

namespace ortserve {
namespace {

TEST(DataType, NamesRoundTrip) {
  for (DataType t : {DataType::kBool, DataType::kUint8, DataType::kUint16, DataType::kUint32,
                     DataType::kUint64, DataType::kInt8, DataType::kInt16, DataType::kInt32,
                     DataType::kInt64, DataType::kFp16, DataType::kFp32, DataType::kFp64,
                     DataType::kBf16, DataType::kBytes}) {
    EXPECT_EQ(DataTypeFromName(DataTypeName(t)), t);
    EXPECT_EQ(DataTypeFromConfigName(DataTypeConfigName(t)), t);
  }
  EXPECT_EQ(DataTypeConfigName(DataType::kBytes), "TYPE_STRING");
  EXPECT_FALSE(DataTypeFromName("FLOAT").has_value());
  EXPECT_EQ(DataTypeSize(DataType::kBf16), 2u);
  EXPECT_EQ(DataTypeSize(DataType::kBytes), 0u);
}

TEST(Shape, ElementCountRejectsNegativeAndOverflow) {
  EXPECT_EQ(ElementCount({}), 1u);
  EXPECT_EQ(ElementCount({2, 3, 4}), 24u);
  EXPECT_EQ(ElementCount({2, 0, 4}), 0u);
  EXPECT_FALSE(ElementCount({2, -1}).has_value());
  EXPECT_FALSE(ElementCount({1ll << 40, 1ll << 40}).has_value());
  EXPECT_FALSE(FixedByteSize(DataType::kFp64, {1ll << 31, 1ll << 31}).has_value());
  EXPECT_EQ(FixedByteSize(DataType::kFp32, {2, 3}), 24u);
  EXPECT_FALSE(FixedByteSize(DataType::kBytes, {2}).has_value());
  EXPECT_EQ(ShapeToString({1, -1, 3}), "[1,-1,3]");
}

std::vector<std::byte> BytesTensor(const std::vector<std::string>& items) {
  std::vector<std::byte> out;
  for (const auto& s : items) {
    uint32_t n = static_cast<uint32_t>(s.size());
    const auto* p = reinterpret_cast<const std::byte*>(&n);
    out.insert(out.end(), p, p + 4);
    const auto* d = reinterpret_cast<const std::byte*>(s.data());
    out.insert(out.end(), d, d + s.size());
  }
  return out;
}

TEST(BytesTensor, CountsElementsAndRejectsTruncation) {
  auto buf = BytesTensor({"ab", "", "xyz"});
  EXPECT_EQ(CountBytesElements(buf.data(), buf.size()), 3u);
  EXPECT_FALSE(CountBytesElements(buf.data(), buf.size() - 1).has_value());  // prefix past end
  EXPECT_FALSE(CountBytesElements(buf.data(), 2).has_value());               // partial prefix
  EXPECT_EQ(CountBytesElements(buf.data(), 0), 0u);
}

TEST(TensorData, SliceSharesOwner) {
  std::vector<std::byte> bytes(16, std::byte{7});
  TensorData data = TensorData::FromVector(std::move(bytes));
  TensorData slice = data.Slice(4, 8);
  EXPECT_EQ(slice.owner(), data.owner());
  EXPECT_EQ(slice.data(), data.data() + 4);
  EXPECT_EQ(slice.size(), 8u);
  TensorData copy = TensorData::Copy("abc", 3);
  EXPECT_EQ(std::memcmp(copy.data(), "abc", 3), 0);
}

}  // namespace
}  // namespace ortserve
