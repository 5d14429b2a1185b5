#include "tessera/runtime/dispatch.h"

#include <mutex>

namespace tessera {

namespace {

struct DeviceTables {
  KernelTable cpu;
  KernelTable cuda;
  bool has_cpu = false;
  bool has_cuda = false;
  DeviceTables() {
    has_cpu = detail::install_kernels(DeviceType::CPU, cpu);
    has_cuda = detail::install_kernels(DeviceType::CUDA, cuda);
  }
};

DeviceTables& tables() {
  static DeviceTables t;  // thread-safe one-time initialization
  return t;
}

}  // namespace

const KernelTable& kernels(DeviceType device, const char* op) {
  const auto& t = tables();
  if (device == DeviceType::CPU && t.has_cpu) return t.cpu;
  if (device == DeviceType::CUDA && t.has_cuda) return t.cuda;
  throw DeviceError(detail::concat_message("[", op, "] no kernels for device ", Device(device),
                                           " in this build of Tessera"));
}

KernelTable& detail::mutable_kernels(DeviceType device) {
  auto& t = tables();
  return device == DeviceType::CUDA ? t.cuda : t.cpu;
}

const char* op_name(UnaryOp op) {
  switch (op) {
#define TS_CASE(e, name, f) \
  case UnaryOp::e:          \
    return name;
    TS_FOR_EACH_UNARY_OP(TS_CASE)
#undef TS_CASE
  }
  return "?";
}
const char* op_name(BinaryOp op) {
  switch (op) {
#define TS_CASE(e, name, k) \
  case BinaryOp::e:         \
    return name;
    TS_FOR_EACH_BINARY_OP(TS_CASE)
#undef TS_CASE
  }
  return "?";
}
const char* op_name(ReductionOp op) {
  switch (op) {
#define TS_CASE(e, name) \
  case ReductionOp::e:   \
    return name;
    TS_FOR_EACH_REDUCE_OP(TS_CASE)
#undef TS_CASE
  }
  return "?";
}
const char* op_name(PointwiseGradOp op) {
  switch (op) {
#define TS_CASE(e, name, operands) \
  case PointwiseGradOp::e:         \
    return name;
    TS_FOR_EACH_POINTWISE_GRAD_OP(TS_CASE)
#undef TS_CASE
  }
  return "?";
}

}  // namespace tessera
