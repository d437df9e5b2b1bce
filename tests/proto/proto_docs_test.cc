// Every message, field, enum, enum value, oneof, service and rpc of the v1 API carries a
// comment: the .proto files are the API reference, so an undocumented element is a bug.

#include <google/protobuf/descriptor.pb.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <set>
#include <string>
#include <vector>

namespace rxfleet::v1 {
namespace {

namespace pb = ::google::protobuf;

// Field numbers inside descriptor.proto, which SourceCodeInfo paths are made of.
constexpr int kFileMessageType = 4;
constexpr int kFileEnumType = 5;
constexpr int kFileService = 6;
constexpr int kMessageField = 2;
constexpr int kMessageNestedType = 3;
constexpr int kMessageEnumType = 4;
constexpr int kMessageOneofDecl = 8;
constexpr int kEnumValue = 2;
constexpr int kServiceMethod = 2;

using Path = std::vector<int>;

class DocCollector {
 public:
  explicit DocCollector(const pb::FileDescriptorProto& file) : file_(file) {
    for (const auto& location : file.source_code_info().location()) {
      if (!location.leading_comments().empty() || !location.trailing_comments().empty()) {
        documented_.insert(Path(location.path().begin(), location.path().end()));
      }
    }
  }

  // Names of elements without a comment.
  std::vector<std::string> Undocumented() {
    for (int i = 0; i < file_.message_type_size(); ++i) {
      Message(file_.message_type(i), {kFileMessageType, i}, file_.package());
    }
    for (int i = 0; i < file_.enum_type_size(); ++i) {
      Enum(file_.enum_type(i), {kFileEnumType, i}, file_.package());
    }
    for (int i = 0; i < file_.service_size(); ++i) {
      const auto& service = file_.service(i);
      const std::string name = file_.package() + "." + service.name();
      Check({kFileService, i}, name);
      for (int m = 0; m < service.method_size(); ++m) {
        Check({kFileService, i, kServiceMethod, m}, name + "." + service.method(m).name());
      }
    }
    return missing_;
  }

 private:
  static Path Append(Path path, std::initializer_list<int> tail) {
    path.insert(path.end(), tail);
    return path;
  }

  void Check(const Path& path, const std::string& name) {
    if (!documented_.count(path)) missing_.push_back(name);
  }

  void Message(const pb::DescriptorProto& message, const Path& path, const std::string& scope) {
    if (message.options().map_entry()) return;  // Generated for map<,> fields.
    const std::string name = scope + "." + message.name();
    Check(path, name);
    std::set<int> synthetic_oneofs;  // Generated for proto3 `optional` fields.
    for (int i = 0; i < message.field_size(); ++i) {
      const auto& field = message.field(i);
      Check(Append(path, {kMessageField, i}), name + "." + field.name());
      if (field.proto3_optional()) synthetic_oneofs.insert(field.oneof_index());
    }
    for (int i = 0; i < message.oneof_decl_size(); ++i) {
      if (synthetic_oneofs.count(i)) continue;
      Check(Append(path, {kMessageOneofDecl, i}), name + "." + message.oneof_decl(i).name());
    }
    for (int i = 0; i < message.nested_type_size(); ++i) {
      Message(message.nested_type(i), Append(path, {kMessageNestedType, i}), name);
    }
    for (int i = 0; i < message.enum_type_size(); ++i) {
      Enum(message.enum_type(i), Append(path, {kMessageEnumType, i}), name);
    }
  }

  void Enum(const pb::EnumDescriptorProto& e, const Path& path, const std::string& scope) {
    const std::string name = scope + "." + e.name();
    Check(path, name);
    for (int i = 0; i < e.value_size(); ++i) {
      Check(Append(path, {kEnumValue, i}), name + "." + e.value(i).name());
    }
  }

  const pb::FileDescriptorProto& file_;
  std::set<Path> documented_;
  std::vector<std::string> missing_;
};

pb::FileDescriptorSet LoadDescriptorSet() {
  pb::FileDescriptorSet set;
  const char* path = std::getenv("RXFLEET_PROTO_DESCRIPTOR_SET");
  EXPECT_NE(path, nullptr) << "RXFLEET_PROTO_DESCRIPTOR_SET is not set (run through ctest)";
  if (path == nullptr) return set;
  std::ifstream in(path, std::ios::binary);
  EXPECT_TRUE(in.good()) << path;
  EXPECT_TRUE(set.ParseFromIstream(&in)) << path;
  return set;
}

TEST(ProtoComments, EveryElementIsDocumented) {
  const pb::FileDescriptorSet set = LoadDescriptorSet();
  int files = 0;
  for (const auto& file : set.file()) {
    if (file.package() != "rxfleet.v1") continue;
    ++files;
    SCOPED_TRACE(file.name());
    ASSERT_TRUE(file.has_source_code_info()) << "descriptor set lacks --include_source_info";
    for (const std::string& name : DocCollector(file).Undocumented()) {
      ADD_FAILURE() << "undocumented: " << name;
    }
  }
  EXPECT_GE(files, 8);
}

TEST(ProtoComments, EveryFileStartsWithAComment) {
  // The comment above `syntax` says what the file is for.
  const pb::FileDescriptorSet set = LoadDescriptorSet();
  constexpr int kFileSyntax = 12;
  for (const auto& file : set.file()) {
    if (file.package() != "rxfleet.v1") continue;
    bool found = false;
    for (const auto& location : file.source_code_info().location()) {
      if (location.path_size() == 1 && location.path(0) == kFileSyntax) {
        found =
            !location.leading_detached_comments().empty() || !location.leading_comments().empty();
      }
    }
    EXPECT_TRUE(found) << file.name();
  }
}

}  // namespace
}  // namespace rxfleet::v1
