#pragma once

#include <ostream>
#include <string>
#include <string_view>

#include "google/protobuf/repeated_ptr_field.h"
#include "rxfleet/v1/common.pb.h"

namespace rxfleet::cli {

/// What changes between two settings, field by field in display order:
/// "hold_us 1024µs -> 32µs, enable <unset> -> true"; empty if nothing differs.
std::string DescribeSettingsChange(const v1::RxAggSettings& before, const v1::RxAggSettings& after);

/// Adapters a write touches (or would touch), sorted by host and adapter id, as a table
/// HOST, ADAPTER, CHANGE indented by two spaces. Prints nothing for an empty list.
void PrintAffectedAdapters(const google::protobuf::RepeatedPtrField<v1::AffectedAdapter>& affected,
                           std::ostream& out);

/// A line diff of two texts in unified style without hunk headers: unchanged lines start
/// with "  ", removed ones with "- ", added ones with "+ ". Lines of both texts are kept in
/// order (longest common subsequence), so small documents diff as a reader expects.
std::string LineDiff(std::string_view before, std::string_view after);

}  // namespace rxfleet::cli
