// The client routes answers by the request id the schema declares (wire/request_ids.hpp). These
// read wire.fbs itself with flatbuffers' own parser and build a message of every body type from
// it: each body whose table has `request_id: uint64` must route by it, and no other.
#include <flatbuffers/idl.h>
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>
#include <string>

#include "wire/framing.hpp"
#include "wire/request_ids.hpp"

namespace {

std::string schema_text() {
  std::ifstream in(GPUFLOW_WIRE_FBS);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

struct Schema {
  flatbuffers::Parser parser;
  const flatbuffers::EnumDef *body = nullptr;
  Schema() {
    const std::string text = schema_text();
    EXPECT_FALSE(text.empty()) << "cannot read " << GPUFLOW_WIRE_FBS;
    EXPECT_TRUE(parser.Parse(text.c_str())) << parser.error_;
    body = parser.enums_.Lookup("gf.wire.Body");
    EXPECT_NE(body, nullptr);
  }
  // Whether the schema's table for `value` declares request_id as a uint64.
  static bool declares_request_id(const flatbuffers::EnumVal &value) {
    const flatbuffers::FieldDef *f = value.union_type.struct_def->fields.Lookup("request_id");
    return f && f->value.type.base_type == flatbuffers::BASE_TYPE_ULONG;
  }
};

TEST(RequestIds, EveryBodyOfTheSchemaRoutesByTheIdItDeclares) {
  Schema schema;
  ASSERT_NE(schema.body, nullptr);
  size_t bodies = 0, with_ids = 0;
  for (const flatbuffers::EnumVal *value : schema.body->Vals()) {
    if (!value->union_type.struct_def) continue;  // NONE
    ++bodies;
    const bool declared = Schema::declares_request_id(*value);
    with_ids += declared ? 1 : 0;
    const auto type = static_cast<gf::wire::Body>(value->GetAsUInt64());
    EXPECT_EQ(gf::wire::has_request_id(type), declared) << value->name;
    // The message as a peer would send it, built from the schema text alone.
    flatbuffers::Parser parser;
    ASSERT_TRUE(parser.Parse(schema_text().c_str())) << parser.error_;
    const std::string json = "{\"body_type\":\"" + value->name + "\",\"body\":{" +
                             (declared ? "\"request_id\":4242" : "") + "}}";
    ASSERT_TRUE(parser.Parse(json.c_str())) << value->name << ": " << parser.error_;
    flatbuffers::Verifier verifier(parser.builder_.GetBufferPointer(), parser.builder_.GetSize());
    ASSERT_TRUE(gf::wire::VerifyMessageBuffer(verifier)) << value->name;
    const gf::wire::Message *m = gf::wire::GetMessage(parser.builder_.GetBufferPointer());
    ASSERT_EQ(m->body_type(), type) << value->name;
    EXPECT_EQ(gf::wire::request_id_of(*m), declared ? 4242u : 0u) << value->name;
  }
  // The schema the build generated from is the one read here.
  EXPECT_EQ(bodies, static_cast<size_t>(gf::wire::Body::MAX));
  EXPECT_GT(with_ids, 0u);
}

TEST(RequestIds, AnswersRouteAndNoticesDoNot) {
  using gf::wire::Body;
  for (Body answer : {Body::LeaseGranted, Body::LeaseRefused, Body::Released, Body::Cancelled,
                      Body::StatusReply, Body::Error, Body::DataPlaneWelcome, Body::BlobPutReady,
                      Body::BlobStored, Body::BlobRefused, Body::BlobSending, Body::BlobDropped,
                      Body::RunAccepted, Body::LeaseBound}) {
    EXPECT_TRUE(gf::wire::has_request_id(answer)) << gf::wire::body_name(answer);
  }
  for (Body notice : {Body::NONE, Body::Hello, Body::Welcome, Body::LeaseRevoke, Body::Goodbye,
                      Body::RunFinished, Body::RunProgress}) {
    EXPECT_FALSE(gf::wire::has_request_id(notice)) << gf::wire::body_name(notice);
  }
}

TEST(RequestIds, AnIdOfZeroIsNoAnswer) {
  flatbuffers::FlatBufferBuilder b;
  const std::vector<uint8_t> frame =
      gf::wire::frame_of(b, gf::wire::CreateError(b, 0, GF_ERR_SYSTEM, b.CreateString("bye")));
  const gf::wire::Message *m = gf::wire::GetMessage(frame.data() + 4);
  EXPECT_EQ(gf::wire::request_id_of(*m), 0u);
}

}  // namespace
