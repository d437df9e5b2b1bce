#include "agent/usb/libusb_register_io.h"

#include <libusb.h>

#include <memory>
#include <vector>

#include "agent/usb/libusb_status.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace rxfleet::agent {
namespace {

using ::testing::_;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::InSequence;
using ::testing::Invoke;
using ::testing::Return;
using ::testing::StrictMock;

class MockControlTransport : public ControlTransport {
 public:
  MOCK_METHOD(int, ControlTransfer,
              (uint8_t request_type, uint8_t request, uint16_t value, uint16_t index,
               std::span<uint8_t> data, unsigned int timeout_ms),
              (override));
};

// Fills an IN transfer with `bytes` and reports them transferred.
auto Answer(std::vector<uint8_t> bytes) {
  return [bytes](uint8_t, uint8_t, uint16_t, uint16_t, std::span<uint8_t> data, unsigned int) {
    std::copy(bytes.begin(), bytes.end(), data.begin());
    return static_cast<int>(bytes.size());
  };
}

class LibusbRegisterIoTest : public ::testing::Test {
 protected:
  std::unique_ptr<LibusbRegisterIo> Make(std::vector<uint32_t> allowed = {0x6000, 0x6004}) {
    auto transport = std::make_unique<StrictMock<MockControlTransport>>();
    mock_ = transport.get();
    absl::StatusOr<std::unique_ptr<LibusbRegisterIo>> io =
        LibusbRegisterIo::Create(std::move(transport), std::move(allowed));
    EXPECT_TRUE(io.ok()) << io.status();
    return io.ok() ? std::move(*io) : nullptr;
  }

  StrictMock<MockControlTransport>* mock_ = nullptr;
};

TEST_F(LibusbRegisterIoTest, ReadUsesTheRtw89VendorRequest) {
  auto io = Make();
  EXPECT_CALL(*mock_, ControlTransfer(0xC0, 0x05, 0x6000, 0x0000, _, 500))
      .WillOnce(Answer({0x14, 0x20, 0xFF, 0x80}));
  absl::StatusOr<uint32_t> value = io->Read32(0x6000);
  ASSERT_TRUE(value.ok()) << value.status();
  EXPECT_EQ(*value, 0x80FF2014u);
  EXPECT_EQ(io->transfer_count(), 1u);
}

TEST_F(LibusbRegisterIoTest, WriteSendsLittleEndianWithSplitAddress) {
  auto io = Make({0x00AB8900});
  std::vector<uint8_t> sent;
  EXPECT_CALL(*mock_, ControlTransfer(0x40, 0x05, 0x8900, 0x00AB, _, 500))
      .WillOnce(
          Invoke([&](uint8_t, uint8_t, uint16_t, uint16_t, std::span<uint8_t> data, unsigned int) {
            sent.assign(data.begin(), data.end());
            return 4;
          }));
  EXPECT_TRUE(io->Write32(0x00AB8900, 0x80002005).ok());
  EXPECT_THAT(sent, ElementsAre(0x05, 0x20, 0x00, 0x80));
}

// Observe-only families: the protocol entry of the family table carries the write permission,
// and the I/O layer enforces it before any transfer.
std::unique_ptr<LibusbRegisterIo> MakeFor(uint16_t vid, uint16_t pid,
                                          StrictMock<MockControlTransport>** mock) {
  const common::ObservedChip* chip = common::LookupObservedChip(vid, pid);
  EXPECT_NE(chip, nullptr);
  auto transport = std::make_unique<StrictMock<MockControlTransport>>();
  *mock = transport.get();
  auto io = LibusbRegisterIo::Create(std::move(transport), common::ReadAddresses(*chip->layout),
                                     chip->layout->protocol);
  EXPECT_TRUE(io.ok()) << io.status();
  return io.ok() ? std::move(*io) : nullptr;
}

TEST(LibusbRegisterIoFamilyTest, Rtw88ReadsWithTheAddressInWValueAndRefusesWrites) {
  StrictMock<MockControlTransport>* mock = nullptr;
  auto io = MakeFor(0x0bda, 0xb812, &mock);
  EXPECT_CALL(*mock, ControlTransfer(0xC0, 0x05, 0x0280, 0x0000, _, 1000))
      .WillOnce(Answer({0x00, 0x01, 0x00, 0x20}));
  absl::StatusOr<uint32_t> value = io->Read32(0x0280);
  ASSERT_TRUE(value.ok()) << value.status();
  EXPECT_EQ(*value, 0x20000100u);
  // An allowed register, a plausible value: still refused, nothing sent (StrictMock).
  const absl::Status write = io->Write32(0x0280, 0x00002005);
  EXPECT_EQ(write.code(), absl::StatusCode::kPermissionDenied);
  EXPECT_THAT(write.message(), HasSubstr("observe-only"));
  EXPECT_EQ(io->transfer_count(), 1u);
}

TEST(LibusbRegisterIoFamilyTest, Mt7921uReadsWithReadExtAndRefusesWrites) {
  StrictMock<MockControlTransport>* mock = nullptr;
  auto io = MakeFor(0x0e8d, 0x7961, &mock);
  EXPECT_CALL(*mock, ControlTransfer(0xDF, 0x63, 0x7400, 0x0018, _, 300))
      .WillOnce(Answer({0x00, 0x00, 0xD4, 0x00}));
  absl::StatusOr<uint32_t> value = io->Read32(0x74000018);
  ASSERT_TRUE(value.ok()) << value.status();
  EXPECT_EQ(*value, 0x00D40000u);
  EXPECT_EQ(io->Write32(0x74000018, 0x00F52064).code(), absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(io->transfer_count(), 1u);
}

TEST(LibusbRegisterIoFamilyTest, Mt76x0uAndX2uUseMultiReadAndReadCfg) {
  StrictMock<MockControlTransport>* mock = nullptr;
  auto x0u = MakeFor(0x148f, 0x7610, &mock);
  EXPECT_CALL(*mock, ControlTransfer(0xC0, 0x07, 0x0000, 0x0238, _, 300))
      .WillOnce(Answer({0x20, 0x00, 0xC0, 0x00}));
  EXPECT_EQ(x0u->Read32(0x0238).value(), 0x00C00020u);
  auto x2u = MakeFor(0x0e8d, 0x7612, &mock);
  EXPECT_CALL(*mock, ControlTransfer(0xC0, 0x47, 0x0000, 0x9018, _, 300))
      .WillOnce(Answer({0x20, 0x00, 0xC0, 0x00}));
  EXPECT_EQ(x2u->Read32(0x9018).value(), 0x00C00020u);
  EXPECT_EQ(x2u->Write32(0x9018, 0).code(), absl::StatusCode::kPermissionDenied);
}

TEST_F(LibusbRegisterIoTest, AddressesOutsideTheAllowListNeverReachTheBus) {
  auto io = Make();
  // StrictMock: any transfer would fail the test.
  const absl::Status write = io->Write32(0x00C4, 0x90130F00);  // PAD_CTRL2, not RX aggregation
  EXPECT_EQ(write.code(), absl::StatusCode::kPermissionDenied);
  EXPECT_THAT(std::string(write.message()), HasSubstr("0x00C4"));
  EXPECT_EQ(io->Read32(0x8900).status().code(), absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(io->Write32(0x6002, 0).code(), absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(io->transfer_count(), 0u);
}

TEST_F(LibusbRegisterIoTest, TimeoutsAreRetriedThenDeadlineExceeded) {
  auto io = Make();
  EXPECT_CALL(*mock_, ControlTransfer(0xC0, 0x05, 0x6004, 0, _, 500))
      .Times(3)
      .WillRepeatedly(Return(LIBUSB_ERROR_TIMEOUT));
  const absl::StatusOr<uint32_t> value = io->Read32(0x6004);
  EXPECT_EQ(value.status().code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_THAT(std::string(value.status().message()), HasSubstr("0x6004"));
  EXPECT_EQ(io->transfer_count(), 3u);
}

TEST_F(LibusbRegisterIoTest, TransientErrorThenSuccess) {
  auto io = Make();
  {
    InSequence seq;
    // EPROTO from the host controller surfaces as LIBUSB_ERROR_IO (field log: "usb write32 0xc4
    // fail ret=-71").
    EXPECT_CALL(*mock_, ControlTransfer(0x40, 0x05, 0x6000, 0, _, 500))
        .WillOnce(Return(LIBUSB_ERROR_IO));
    EXPECT_CALL(*mock_, ControlTransfer(0x40, 0x05, 0x6000, 0, _, 500)).WillOnce(Return(4));
  }
  EXPECT_TRUE(io->Write32(0x6000, 0x80FF0114).ok());
  EXPECT_EQ(io->transfer_count(), 2u);
}

TEST_F(LibusbRegisterIoTest, PersistentIoErrorIsInternal) {
  auto io = Make();
  EXPECT_CALL(*mock_, ControlTransfer(_, _, _, _, _, _))
      .Times(3)
      .WillRepeatedly(Return(LIBUSB_ERROR_IO));
  EXPECT_EQ(io->Write32(0x6000, 1).code(), absl::StatusCode::kInternal);
}

TEST_F(LibusbRegisterIoTest, NoDeviceIsUnavailableWithoutRetry) {
  auto io = Make();
  EXPECT_CALL(*mock_, ControlTransfer(_, _, _, _, _, _)).WillOnce(Return(LIBUSB_ERROR_NO_DEVICE));
  EXPECT_EQ(io->Write32(0x6000, 1).code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(io->transfer_count(), 1u);
}

TEST_F(LibusbRegisterIoTest, StallIsFailedPreconditionWithoutRetry) {
  auto io = Make();
  EXPECT_CALL(*mock_, ControlTransfer(_, _, _, _, _, _)).WillOnce(Return(LIBUSB_ERROR_PIPE));
  EXPECT_EQ(io->Read32(0x6000).status().code(), absl::StatusCode::kFailedPrecondition);
}

TEST_F(LibusbRegisterIoTest, AccessAndNotSupportedAreNotRetried) {
  auto io = Make();
  EXPECT_CALL(*mock_, ControlTransfer(_, _, _, _, _, _))
      .WillOnce(Return(LIBUSB_ERROR_ACCESS))
      .WillOnce(Return(LIBUSB_ERROR_NOT_SUPPORTED));
  EXPECT_EQ(io->Read32(0x6000).status().code(), absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(io->Read32(0x6000).status().code(), absl::StatusCode::kUnimplemented);
  EXPECT_EQ(io->transfer_count(), 2u);
}

TEST_F(LibusbRegisterIoTest, ShortReadIsRetriedThenInternal) {
  auto io = Make();
  EXPECT_CALL(*mock_, ControlTransfer(_, _, _, _, _, _))
      .Times(3)
      .WillRepeatedly(Answer({0x01, 0x02}));
  const absl::StatusOr<uint32_t> value = io->Read32(0x6000);
  EXPECT_EQ(value.status().code(), absl::StatusCode::kInternal);
  EXPECT_THAT(std::string(value.status().message()), HasSubstr("short transfer"));
}

TEST(LibusbRegisterIoCreateTest, RejectsBadAllowLists) {
  const auto create = [](std::vector<uint32_t> allowed, int attempts = 3) {
    return LibusbRegisterIo::Create(std::make_unique<StrictMock<MockControlTransport>>(),
                                    std::move(allowed), attempts)
        .status()
        .code();
  };
  EXPECT_EQ(create({}), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(create({0x6002}), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(create({0x01000000}), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(create({0x6000}, 0), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(LibusbRegisterIo::Create(nullptr, {0x6000}).status().code(),
            absl::StatusCode::kInvalidArgument);
  absl::StatusOr<std::unique_ptr<LibusbRegisterIo>> io = LibusbRegisterIo::Create(
      std::make_unique<StrictMock<MockControlTransport>>(), {0x6004, 0x6000, 0x6004});
  ASSERT_TRUE(io.ok());
  EXPECT_THAT((*io)->allowed_addresses(), ElementsAre(0x6000, 0x6004));
}

TEST(LibusbRegisterIoCreateTest, CustomAttemptCount) {
  auto transport = std::make_unique<StrictMock<MockControlTransport>>();
  auto* mock = transport.get();
  auto io = LibusbRegisterIo::Create(std::move(transport), {0x8900}, 1);
  ASSERT_TRUE(io.ok());
  EXPECT_CALL(*mock, ControlTransfer(_, _, _, _, _, _)).WillOnce(Return(LIBUSB_ERROR_TIMEOUT));
  EXPECT_EQ((*io)->Read32(0x8900).status().code(), absl::StatusCode::kDeadlineExceeded);
}

TEST(StatusFromLibusbTest, TranslatesEveryCode) {
  EXPECT_TRUE(StatusFromLibusb(0, "x").ok());
  EXPECT_TRUE(StatusFromLibusb(4, "x").ok());
  EXPECT_EQ(StatusFromLibusb(LIBUSB_ERROR_NO_DEVICE, "x").code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(StatusFromLibusb(LIBUSB_ERROR_NOT_FOUND, "x").code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(StatusFromLibusb(LIBUSB_ERROR_ACCESS, "x").code(), absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(StatusFromLibusb(LIBUSB_ERROR_TIMEOUT, "x").code(),
            absl::StatusCode::kDeadlineExceeded);
  EXPECT_EQ(StatusFromLibusb(LIBUSB_ERROR_PIPE, "x").code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(StatusFromLibusb(LIBUSB_ERROR_NOT_SUPPORTED, "x").code(),
            absl::StatusCode::kUnimplemented);
  EXPECT_EQ(StatusFromLibusb(LIBUSB_ERROR_NO_MEM, "x").code(),
            absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(StatusFromLibusb(LIBUSB_ERROR_INVALID_PARAM, "x").code(),
            absl::StatusCode::kInvalidArgument);
  for (int code :
       std::initializer_list<int>{LIBUSB_ERROR_IO, LIBUSB_ERROR_BUSY, LIBUSB_ERROR_OVERFLOW,
                                  LIBUSB_ERROR_INTERRUPTED, LIBUSB_ERROR_OTHER, -1000}) {
    EXPECT_EQ(StatusFromLibusb(code, "x").code(), absl::StatusCode::kInternal) << code;
  }
  const absl::Status status = StatusFromLibusb(LIBUSB_ERROR_PIPE, "read of register 0x6000");
  EXPECT_THAT(std::string(status.message()), HasSubstr("read of register 0x6000"));
  EXPECT_THAT(std::string(status.message()), HasSubstr("LIBUSB_ERROR_PIPE"));
}

}  // namespace
}  // namespace rxfleet::agent
