// AccessPolicy: the --http-restricted-api / --grpc-restricted-protocol parser,
// verdicts, the constant-time comparison and the PEM checks.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>

#include "server/auth/AccessPolicy.h"

namespace ortserve::auth {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using ::testing::StartsWith;

AccessPolicy MustParse(std::vector<std::string> specs, Protocol protocol = Protocol::kHttp) {
  auto p = AccessPolicy::Parse(specs, protocol);
  EXPECT_TRUE(p.ok()) << p.status().message();
  return p.ok() ? std::move(p).value() : AccessPolicy();
}

std::string ParseError(std::vector<std::string> specs) {
  auto p = AccessPolicy::Parse(specs, Protocol::kHttp);
  EXPECT_FALSE(p.ok());
  return p.ok() ? "" : p.status().message();
}

TEST(AccessPolicyTest, EveryGroupNameRoundTrips) {
  for (size_t i = 0; i < kApiGroupCount; ++i) {
    const auto group = static_cast<ApiGroup>(i);
    EXPECT_EQ(ParseApiGroup(ApiGroupName(group)), group);
  }
  EXPECT_EQ(ParseApiGroup("model_repository"), std::nullopt);
}

TEST(AccessPolicyTest, NoSpecsMeansEverythingOpen) {
  const AccessPolicy p = MustParse({});
  EXPECT_TRUE(p.empty());
  for (size_t i = 0; i < kApiGroupCount; ++i) {
    EXPECT_FALSE(p.restricted(static_cast<ApiGroup>(i)));
    EXPECT_EQ(p.Check(static_cast<ApiGroup>(i), std::nullopt), Verdict::kAllowed);
  }
}

TEST(AccessPolicyTest, ParsesTritonSyntaxWithSeveralGroupsAndSpecs) {
  const AccessPolicy p =
      MustParse({"model-repository, statistics:Admin-Key=s3cr:et=x", "inference:infer-key=abc"});
  EXPECT_TRUE(p.restricted(ApiGroup::kModelRepository));
  EXPECT_TRUE(p.restricted(ApiGroup::kStatistics));
  EXPECT_TRUE(p.restricted(ApiGroup::kInference));
  EXPECT_FALSE(p.restricted(ApiGroup::kHealth));
  EXPECT_FALSE(p.restricted(ApiGroup::kMetadata));
  EXPECT_EQ(p.RestrictionFor(ApiGroup::kStatistics)->header, "admin-key");  // lowercased
  EXPECT_EQ(p.RestrictionFor(ApiGroup::kInference)->header, "infer-key");
  EXPECT_EQ(p.HeaderNames(), (std::vector<std::string>{"admin-key", "infer-key"}));
  // The value is everything after the first '=' (':' and '=' included).
  EXPECT_EQ(p.Check(ApiGroup::kStatistics, "s3cr:et=x"), Verdict::kAllowed);
  EXPECT_EQ(p.Check(ApiGroup::kStatistics, "s3cr:et"), Verdict::kWrong);
  EXPECT_EQ(p.Check(ApiGroup::kStatistics, "abc"), Verdict::kWrong);  // another group's key
  EXPECT_EQ(p.Check(ApiGroup::kInference, "abc"), Verdict::kAllowed);
  EXPECT_EQ(p.Check(ApiGroup::kInference, std::nullopt), Verdict::kMissing);
  EXPECT_EQ(p.Check(ApiGroup::kInference, ""), Verdict::kWrong);
  EXPECT_EQ(p.Check(ApiGroup::kHealth, std::nullopt), Verdict::kAllowed);
}

TEST(AccessPolicyTest, BadSyntaxGivesClearErrors) {
  EXPECT_THAT(ParseError({"inference"}), HasSubstr("missing ':'"));
  EXPECT_THAT(ParseError({"inference:key"}), HasSubstr("missing '='"));
  EXPECT_THAT(ParseError({":key=v"}), HasSubstr("no API group"));
  EXPECT_THAT(ParseError({"inference:=v"}), HasSubstr("key '' is empty or invalid"));
  EXPECT_THAT(ParseError({"inference:bad key=v"}), HasSubstr("key 'bad key'"));
  EXPECT_THAT(ParseError({"inference:grpc-timeout=v"}), HasSubstr("key 'grpc-timeout'"));
  EXPECT_THAT(ParseError({"inference"}), HasSubstr("--http-restricted-api"));
  auto grpc = AccessPolicy::Parse({"inference"}, Protocol::kGrpc);
  ASSERT_FALSE(grpc.ok());
  EXPECT_THAT(grpc.status().message(), HasSubstr("--grpc-restricted-protocol"));
  EXPECT_THAT(ParseError({"inference:key="}), HasSubstr("value must not be empty"));
  const std::string unknown = ParseError({"inference,infer:key=v"});
  EXPECT_THAT(unknown, StartsWith("unknown restricted api 'infer' in --http-restricted-api 'inference,infer:...'"));
  EXPECT_THAT(unknown, HasSubstr("model-repository"));  // lists the valid groups
  EXPECT_THAT(ParseError({"model-repository,health:k1=v1", "metadata,health:k2=v2"}),
              StartsWith("restricted api 'health' can not be specified in multiple config groups"));
  EXPECT_THAT(ParseError({"health,health:a=1"}),
              StartsWith("restricted api 'health' can not be specified in multiple config groups"));
  // gRPC says "protocol", as Triton's --grpc-restricted-protocol.
  auto unknown_grpc = AccessPolicy::Parse({"model-reposit,health:k1=v1"}, Protocol::kGrpc);
  ASSERT_FALSE(unknown_grpc.ok());
  EXPECT_THAT(unknown_grpc.status().message(), StartsWith("unknown restricted protocol 'model-reposit'"));
  auto twice_grpc = AccessPolicy::Parse({"model-repository,health:k1=v1", "metadata,health:k2=v2"}, Protocol::kGrpc);
  ASSERT_FALSE(twice_grpc.ok());
  EXPECT_THAT(twice_grpc.status().message(),
              StartsWith("restricted protocol 'health' can not be specified in multiple config groups"));
}

TEST(AccessPolicyTest, ErrorsNeverEchoTheSecret) {
  EXPECT_THAT(ParseError({"inference=topsecret"}), Not(HasSubstr("topsecret")));
  EXPECT_THAT(ParseError({"nope:key=topsecret"}), Not(HasSubstr("topsecret")));
  EXPECT_THAT(ParseError({"inference:bad key=topsecret"}), Not(HasSubstr("topsecret")));
}

TEST(AccessPolicyTest, GrpcKeysCarryTritonsPrefix) {
  const AccessPolicy p = MustParse({"inference,health:Infer-Key=abc"}, Protocol::kGrpc);
  EXPECT_EQ(p.RestrictionFor(ApiGroup::kInference)->header, "triton-grpc-protocol-infer-key");
  EXPECT_EQ(p.HeaderNames(), (std::vector<std::string>{"triton-grpc-protocol-infer-key"}));
  // Over HTTP the key is the header, as Triton's --http-restricted-api.
  EXPECT_EQ(MustParse({"inference:Infer-Key=abc"}).RestrictionFor(ApiGroup::kInference)->header, "infer-key");
}

TEST(AccessPolicyTest, RefusalsUseTritonsWordsAndNameTheHeaderButNeverTheValue) {
  const AccessPolicy http = MustParse({"inference:admin-key=topsecret"});
  EXPECT_EQ(http.RefusalMessage(ApiGroup::kInference, Verdict::kMissing),
            "This API is restricted, expecting header 'admin-key'; the request does not carry it");
  EXPECT_EQ(http.RefusalMessage(ApiGroup::kInference, Verdict::kWrong),
            "This API is restricted, expecting header 'admin-key'; the request carries it with another value");
  const AccessPolicy grpc = MustParse({"inference:admin-key=topsecret"}, Protocol::kGrpc);
  for (Verdict v : {Verdict::kMissing, Verdict::kWrong}) {
    const std::string message = grpc.RefusalMessage(ApiGroup::kInference, v);
    EXPECT_THAT(message, ::testing::StartsWith(
                             "This protocol is restricted, expecting header 'triton-grpc-protocol-admin-key'"));
    EXPECT_THAT(message, Not(HasSubstr("topsecret")));
  }
}

TEST(AccessPolicyTest, ConstantTimeEqualsIsEquality) {
  EXPECT_TRUE(ConstantTimeEquals("", ""));
  EXPECT_TRUE(ConstantTimeEquals("secret", "secret"));
  EXPECT_FALSE(ConstantTimeEquals("secret", "secreT"));
  EXPECT_FALSE(ConstantTimeEquals("secret", "secret "));  // a prefix is not equal
  EXPECT_FALSE(ConstantTimeEquals("secret", "secre"));
  EXPECT_FALSE(ConstantTimeEquals("", "x"));
  const std::string with_nul("a\0b", 3);
  EXPECT_TRUE(ConstantTimeEquals(with_nul, std::string("a\0b", 3)));
  EXPECT_FALSE(ConstantTimeEquals(with_nul, "a"));  // no C-string truncation
}

TEST(AccessPolicyTest, PemFilesAreCheckedAndNamed) {
  const std::string missing = "/nonexistent/ortserve/cert.pem";
  auto r = ReadPemFile(missing, PemKind::kCertificate, "--http-server-cert");
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.status().message(), HasSubstr(missing));
  EXPECT_THAT(r.status().message(), HasSubstr("--http-server-cert"));

  const std::string garbage = ::testing::TempDir() + "/not_a_cert.pem";
  std::ofstream(garbage) << "hello\n";
  r = ReadPemFile(garbage, PemKind::kCertificate, "--grpc-server-cert");
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.status().message(), HasSubstr(garbage));
  EXPECT_THAT(r.status().message(), HasSubstr("not a PEM certificate"));
  r = ReadPemFile(garbage, PemKind::kPrivateKey, "--grpc-server-key");
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.status().message(), HasSubstr("private key"));
  std::remove(garbage.c_str());

  EXPECT_FALSE(ReadPemFile("", PemKind::kPrivateKey, "--http-server-key").ok());
  EXPECT_FALSE(PemKeyMatchesCertificate("x", "y"));
}

}  // namespace
}  // namespace ortserve::auth
