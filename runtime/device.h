#pragma once
// Device: where a tensor's storage lives.

#include <fmt/format.h>

#include <ostream>
#include <string>

namespace tessera {

enum class DeviceType : uint8_t { CPU, CUDA };

class Device {
 public:
  constexpr Device() = default;
  constexpr Device(DeviceType type, int index = 0) : type_(type), index_(index) {}  // NOLINT
  static constexpr Device cpu() { return Device(DeviceType::CPU, 0); }
  static constexpr Device cuda(int index = 0) { return Device(DeviceType::CUDA, index); }

  DeviceType type() const { return type_; }
  int index() const { return index_; }
  bool is_cpu() const { return type_ == DeviceType::CPU; }
  bool is_cuda() const { return type_ == DeviceType::CUDA; }
  bool operator==(const Device&) const = default;
  std::string str() const;

 private:
  DeviceType type_ = DeviceType::CPU;
  int index_ = 0;
};

// Whether a CUDA device can be used by this build on this machine. A build without CUDA, or a
// machine without a driver, answers false (never throws).
bool cuda_is_available();
int cuda_device_count();

std::ostream& operator<<(std::ostream& os, Device d);

}  // namespace tessera

template <>
struct fmt::formatter<tessera::Device> : fmt::formatter<std::string_view> {
  template <typename Ctx>
  auto format(tessera::Device d, Ctx& ctx) const {
    return fmt::formatter<std::string_view>::format(d.str(), ctx);
  }
};
