// resolve(): the one place that judges user input (semantics.md sections 1-3 and 5).
#include "runtime/problem.hpp"

#include <algorithm>
#include <sstream>

#include "runtime/descriptor.hpp"

namespace deconvjit {
namespace detail {

void invalid(const std::string& message) { throw Error(Error::Kind::InvalidDescriptor, message); }

std::string list_text(const std::vector<int64_t>& v) {
  // A list is quoted in one error line: a million-entry src must not make it megabytes long.
  constexpr size_t kShown = 8;
  std::ostringstream os;
  os << '[';
  for (size_t i = 0; i < v.size() && i < kShown; ++i) os << (i ? "," : "") << v[i];
  if (v.size() > kShown) os << ",... (" << v.size() << " entries)";
  os << ']';
  return os.str();
}

bool is_group_form(const Descriptor& d) {
  if (d.weights_format == WeightsFormat::GOIX) return true;
  // GroupConvolutionBackpropData has no format attribute, so its weights arrive as "OIX" with one more axis.
  return d.weights_format == WeightsFormat::OIX && !d.src.empty() && d.weights.size() == d.src.size() + 1;
}

int64_t checked_elements(const std::vector<int64_t>& shape, const char* what) {
  int64_t count = 1, bytes = 0;
  for (int64_t e : shape)
    if (__builtin_mul_overflow(count, e, &count))
      invalid(std::string(what) + ": element count overflows 64-bit arithmetic (shape " + list_text(shape) + ")");
  if (__builtin_mul_overflow(count, kElementBytes, &bytes))
    invalid(std::string(what) + ": byte size overflows 64-bit arithmetic (shape " + list_text(shape) + ")");
  if (bytes > kMaxTensorBytes)
    invalid(std::string(what) + ": byte size " + std::to_string(bytes) + " exceeds the limit " +
            std::to_string(kMaxTensorBytes) + " (shape " + list_text(shape) + ")");
  return count;
}

}  // namespace detail

namespace {

using namespace detail;

std::string str(int64_t v) { return std::to_string(v); }

// The weights' view of the channels: where C_IN, C_OUT/G and the kernel sit in each layout.
struct WeightsView {
  WeightsFormat format;
  int64_t groups = 1, c_in = 0, c_out = 0;
  std::vector<int64_t> kernel;
};

void check_dims(const std::vector<int64_t>& shape, const char* what) {
  for (size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] < 1)
      invalid(std::string(what) + "[" + str(i) + "] must be >= 1, got " + str(shape[i]) + " (" + what + " " +
              list_text(shape) + ")");
    if (shape[i] > kMaxDim)
      invalid(std::string(what) + "[" + str(i) + "] = " + str(shape[i]) + " exceeds the limit " + str(kMaxDim));
  }
}

// Sums in f32 suit every dtype; sums in halves only halves (nothing would gain from f16 sums of f32 or
// bf16 data, and bf16 sums would lose more than they save). Whether the CPU can add halves is compile()'s
// question, not a property of the descriptor.
void check_accumulation(const Descriptor& d) {
  if (d.accumulation == DType::f32) return;
  if (d.accumulation == DType::f16 && d.dtype == DType::f16) return;
  if (d.accumulation == DType::f16)
    invalid(std::string("accumulation: f16 needs dtype f16, got ") + to_string(d.dtype));
  invalid(std::string("accumulation: ") + to_string(d.accumulation) +
          " is not supported, expected f32 (any dtype) or f16 (dtype f16)");
}

void check_src(const Descriptor& d) {
  if (d.dtype != d.weights_dtype)
    invalid(std::string("dtype: data dtype (") + to_string(d.dtype) + ") and weights dtype (" +
            to_string(d.weights_dtype) + ") differ");
  check_accumulation(d);
  const size_t r = d.src.size();
  if (r < 3 || r > 5)
    invalid("src has rank " + str(r) + " (" + list_text(d.src) +
            "), expected 3, 4 or 5 (batch, channels and 1 to 3 spatial axes)");
  check_dims(d.src, "src");
}

void check_weights_rank(const Descriptor& d, bool group) {
  const size_t r = d.src.size(), wr = d.weights.size();
  if (wr == r + (group ? 1 : 0)) return;
  std::string expected = str(r) + " (src rank)";
  if (d.weights_format == WeightsFormat::GOIX) expected = str(r + 1) + " (src rank + 1)";
  if (d.weights_format == WeightsFormat::OIX) expected += " or " + str(r + 1) + " (group form)";
  invalid("weights has rank " + str(wr) + " (" + list_text(d.weights) + "), expected " + expected +
          " for weights_format " + to_string(d.weights_format));
}

int64_t resolve_groups(const Descriptor& d, bool group) {
  if (d.groups && *d.groups < 1) invalid("groups must be >= 1, got " + str(*d.groups));
  if (!group) return d.groups.value_or(1);
  const int64_t g = d.weights[0];
  if (d.groups && *d.groups != g)
    invalid("groups (" + str(*d.groups) + ") does not match weights[0] (" + str(g) +
            ") of the group-form weights " + list_text(d.weights));
  return g;
}

WeightsView weights_view(const Descriptor& d, bool group, int64_t g) {
  const std::vector<int64_t>& w = d.weights;
  const size_t wr = w.size();
  WeightsView v;
  v.groups = g;
  if (group) {
    v.format = WeightsFormat::GOIX;
    v.c_in = g * w[1], v.c_out = g * w[2];
    v.kernel.assign(w.begin() + 3, w.end());
  } else if (d.weights_format == WeightsFormat::XIO) {
    v.format = WeightsFormat::XIO;
    v.c_in = w[wr - 1], v.c_out = g * w[wr - 2];
    v.kernel.assign(w.begin(), w.end() - 2);
  } else {
    v.format = WeightsFormat::OIX;
    v.c_in = w[0], v.c_out = g * w[1];
    v.kernel.assign(w.begin() + 2, w.end());
  }
  return v;
}

std::string channel_source(const Descriptor& d, const WeightsView& v) {
  const std::vector<int64_t>& w = d.weights;
  if (v.format == WeightsFormat::GOIX)
    return "G*weights[1] = " + str(v.groups) + "*" + str(w[1]) + " = " + str(v.c_in);
  if (v.format == WeightsFormat::XIO) return "weights[" + str(w.size() - 1) + "] (" + str(v.c_in) + ")";
  return "weights[0] (" + str(v.c_in) + ")";
}

void check_channels(const Descriptor& d, const WeightsView& v, int64_t src_channels) {
  if (src_channels != v.c_in)
    invalid("data channels (" + str(src_channels) + ") do not match " + channel_source(d, v) +
            " (weights_format " + to_string(v.format) + ")");
  // C_OUT = G * (a weights dimension) in every layout, so only C_IN can fail to divide.
  if (v.c_in % v.groups != 0)
    invalid("C_IN (" + str(v.c_in) + ") is not divisible by groups (" + str(v.groups) + ")");
  // Products of checked dimensions: weights[i] <= 2^31-1 and groups <= 2^31-1 cannot overflow int64.
  if (v.c_in > kMaxChannels) invalid("C_IN (" + str(v.c_in) + ") exceeds the limit " + str(kMaxChannels));
  if (v.c_out > kMaxChannels) invalid("C_OUT (" + str(v.c_out) + ") exceeds the limit " + str(kMaxChannels));
}

// An empty list means the default; any other length must be the spatial rank.
std::vector<int64_t> spatial_list(const std::vector<int64_t>& given, int64_t fill, size_t n, const char* name) {
  if (given.empty()) return std::vector<int64_t>(n, fill);
  if (given.size() != n)
    invalid(std::string(name) + " has " + str(given.size()) + " entries, expected " + str(n) +
            " (spatial rank): " + list_text(given));
  return given;
}

void check_values(const std::vector<int64_t>& v, const char* name, bool positive) {
  for (size_t i = 0; i < v.size(); ++i) {
    if (positive && v[i] < 1)
      invalid(std::string(name) + "[" + str(i) + "] must be >= 1, got " + str(v[i]));
    if (v[i] > kMaxAttribute || v[i] < -kMaxAttribute)
      invalid(std::string(name) + "[" + str(i) + "] = " + str(v[i]) + " is out of range (|value| <= " +
              str(kMaxAttribute) + ")");
  }
}

void fill_attributes(const Descriptor& d, Problem& p) {
  const size_t n = static_cast<size_t>(p.spatial_rank);
  p.stride = spatial_list(d.strides, 1, n, "strides");
  p.dilation = spatial_list(d.dilations, 1, n, "dilations");
  p.pads_begin = spatial_list(d.pads_begin, 0, n, "pads_begin");
  p.pads_end = spatial_list(d.pads_end, 0, n, "pads_end");
  p.output_padding = spatial_list(d.output_padding, 0, n, "output_padding");
  check_values(p.stride, "strides", true);
  check_values(p.dilation, "dilations", true);
  check_values(p.pads_begin, "pads_begin", false);
  check_values(p.pads_end, "pads_end", false);
  check_values(p.output_padding, "output_padding", false);
}

// The spatial sizes of output_shape (empty when absent). A full-rank shape (oneDNN Graph dst_shape) must
// agree with the batch and C_OUT.
std::vector<int64_t> given_output(const Descriptor& d, const Problem& p) {
  const std::vector<int64_t>& os = d.output_shape;
  const size_t n = static_cast<size_t>(p.spatial_rank), full = n + 2;
  if (os.empty()) return {};
  if (os.size() != n && os.size() != full)
    invalid("output_shape has " + str(os.size()) + " entries (" + list_text(os) + "), expected " + str(n) +
            " (spatial sizes) or " + str(full) + " (full output shape)");
  for (size_t i = 0; i < os.size(); ++i)
    if (os[i] < 1 || os[i] > kMaxDim)
      invalid("output_shape[" + str(i) + "] must be in [1, " + str(kMaxDim) + "], got " + str(os[i]) + " (" +
              list_text(os) + ")");
  if (os.size() == n) return os;
  const bool ncx = d.data_format == DataFormat::NCX;
  const size_t c_at = ncx ? 1 : full - 1;
  if (os[0] != p.batch)
    invalid("output_shape[0] (batch) is " + str(os[0]) + " but the src batch is " + str(p.batch) + " (" +
            list_text(os) + ")");
  if (os[c_at] != p.c_out)
    invalid("output_shape[" + str(c_at) + "] (channels) is " + str(os[c_at]) + " but C_OUT is " +
            str(p.c_out) + " (" + list_text(os) + ", data_format " + to_string(d.data_format) + ")");
  return ncx ? std::vector<int64_t>(os.begin() + 2, os.end()) : std::vector<int64_t>(os.begin() + 1, os.end() - 1);
}

using i128 = __int128;

std::string i128_text(i128 v) {
  if (v >= INT64_MIN && v <= INT64_MAX) return str(static_cast<int64_t>(v));
  return v < 0 ? "below -2^63" : "above 2^63";
}

// One spatial axis of semantics.md section 3. 128-bit arithmetic: every operand is below 2^31 in magnitude,
// so no intermediate can overflow, and the limits are judged on exact values.
void infer_axis(Problem& p, size_t i, AutoPad mode, const std::vector<int64_t>& given) {
  const i128 s = p.stride[i], x = p.in[i], op = p.output_padding[i];
  const i128 dk = i128(p.dilation[i]) * (p.kernel[i] - 1) + 1;
  const i128 full = s * (x - 1) + dk + op;
  i128 pb = p.pads_begin[i], pe = p.pads_end[i], y = 0;
  if (mode != AutoPad::Explicit) pb = pe = 0;
  if (given.empty()) {
    y = full - pb - pe;
  } else {
    y = given[i];
    if (mode == AutoPad::SameUpper || mode == AutoPad::SameLower) {
      const i128 total = std::max<i128>(0, full - y);
      const i128 half = total / 2;
      pe = mode == AutoPad::SameUpper ? half : total - half;
      pb = total - pe;
    }
  }
  const std::string axis = " (axis " + str(i) + ")";
  if (y < 1)
    invalid("output Y size" + axis + " would be " + i128_text(y) + ": stride " + str(p.stride[i]) + ", X " +
            str(p.in[i]) + ", dilated kernel " + i128_text(dk) + ", pads_begin " + i128_text(pb) + ", pads_end " +
            i128_text(pe) + ", output_padding " + str(p.output_padding[i]) + ", auto_pad " + to_string(mode));
  if (y > kMaxDim)
    invalid("output Y size" + axis + " would be " + i128_text(y) + ", above the limit " + str(kMaxDim));
  if (pb > kMaxAttribute || pe > kMaxAttribute)
    invalid("resolved pads" + axis + " would be " + i128_text(pb) + "/" + i128_text(pe) + ", above the limit " +
            str(kMaxAttribute) + " (auto_pad " + to_string(mode) + ")");
  p.pads_begin[i] = static_cast<int64_t>(pb);
  p.pads_end[i] = static_cast<int64_t>(pe);
  p.out[i] = static_cast<int64_t>(y);
}

std::vector<int64_t> activation_shape(DataFormat f, int64_t n, int64_t c, const std::vector<int64_t>& sp) {
  std::vector<int64_t> s{n};
  if (f == DataFormat::NCX) s.push_back(c);
  s.insert(s.end(), sp.begin(), sp.end());
  if (f == DataFormat::NXC) s.push_back(c);
  return s;
}

void fill_from_src(const Descriptor& d, Problem& p) {
  const size_t r = d.src.size();
  p.spatial_rank = static_cast<int>(r - 2);
  p.data_format = d.data_format;
  p.dtype = d.dtype;
  p.accumulation = d.accumulation;
  p.batch = d.src[0];
  const bool ncx = d.data_format == DataFormat::NCX;
  p.in.assign(d.src.begin() + (ncx ? 2 : 1), d.src.end() - (ncx ? 0 : 1));
  p.src_shape = d.src;
}

int64_t src_channels(const Descriptor& d) {
  return d.data_format == DataFormat::NCX ? d.src[1] : d.src.back();
}

}  // namespace

Problem resolve(const Descriptor& d) {
  check_src(d);
  const bool group = is_group_form(d);
  check_weights_rank(d, group);
  check_dims(d.weights, "weights");
  Problem p;
  fill_from_src(d, p);
  const WeightsView v = weights_view(d, group, resolve_groups(d, group));
  check_channels(d, v, src_channels(d));
  p.c_in = v.c_in, p.c_out = v.c_out, p.groups = v.groups;
  p.kernel = v.kernel;
  p.weights_format = v.format;
  p.weights_shape = d.weights;
  fill_attributes(d, p);
  const std::vector<int64_t> given = given_output(d, p);
  p.out.assign(p.in.size(), 0);
  for (size_t i = 0; i < p.in.size(); ++i) infer_axis(p, i, d.auto_pad, given);
  p.dst_shape = activation_shape(p.data_format, p.batch, p.c_out, p.out);
  checked_elements(p.src_shape, "src");
  checked_elements(p.weights_shape, "weights");
  checked_elements(p.dst_shape, "dst");
  p.canonical = canonical_text(p, d.auto_pad, !given.empty());
  return p;
}

namespace {
int64_t elements(const std::vector<int64_t>& shape) {
  if (shape.empty()) return 0;  // a default-constructed Problem describes no tensor
  int64_t n = 1;
  for (int64_t e : shape) n *= e;
  return n;
}
}  // namespace

int64_t Problem::src_elements() const { return elements(src_shape); }
int64_t Problem::weights_elements() const { return elements(weights_shape); }
int64_t Problem::dst_elements() const { return elements(dst_shape); }

double Problem::flops() const {
  double f = 2.0 * static_cast<double>(batch) * static_cast<double>(c_in) * static_cast<double>(c_out_per_group());
  for (int64_t e : in) f *= static_cast<double>(e);
  for (int64_t e : kernel) f *= static_cast<double>(e);
  return f;
}

}  // namespace deconvjit
