// resolve(): shape inference, pad resolution and every error of semantics.md section 5.
#include <gtest/gtest.h>

#include <initializer_list>
#include <string>
#include <vector>

#include "deconvjit/deconvjit.hpp"
#include "runtime/problem.hpp"

namespace deconvjit {
namespace {

using V = std::vector<int64_t>;
constexpr int64_t kBig = (int64_t{1} << 31) - 1;

Descriptor make(V src, V weights) {
  Descriptor d;
  d.src = std::move(src);
  d.weights = std::move(weights);
  return d;
}

// Expects resolve() to reject `d` with a message containing every fragment.
void expect_invalid(const Descriptor& d, std::initializer_list<const char*> fragments) {
  try {
    resolve(d);
    ADD_FAILURE() << "resolve accepted a descriptor that should fail; expected: " << *fragments.begin();
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), Error::Kind::InvalidDescriptor) << e.what();
    for (const char* f : fragments) EXPECT_NE(std::string(e.what()).find(f), std::string::npos)
        << "message '" << e.what() << "' lacks '" << f << "'";
  }
}

// A 1-D problem: src [1, 2, X], weights OIX [2, 3, K].
Descriptor axis1d(int64_t x, int64_t k, int64_t s) {
  Descriptor d = make({1, 2, x}, {2, 3, k});
  d.strides = {s};
  return d;
}

// ---- the seeds' worked examples -------------------------------------------------------------------------

TEST(Resolve, SeedExample1StridedWithPads) {
  Descriptor d = make({1, 20, 224, 224}, {20, 10, 3, 3});
  d.strides = {2, 2}, d.pads_begin = {1, 1}, d.pads_end = {1, 1};
  const Problem p = resolve(d);
  EXPECT_EQ(p.dst_shape, (V{1, 10, 447, 447}));
  EXPECT_EQ(p.out, (V{447, 447}));
  EXPECT_EQ(p.pads_begin, (V{1, 1}));
  EXPECT_EQ(p.pads_end, (V{1, 1}));
  EXPECT_EQ(p.spatial_rank, 2);
  EXPECT_EQ(p.batch, 1);
  EXPECT_EQ(p.c_in, 20);
  EXPECT_EQ(p.c_out, 10);
  EXPECT_EQ(p.groups, 1);
  EXPECT_EQ(p.in, (V{224, 224}));
  EXPECT_EQ(p.kernel, (V{3, 3}));
  EXPECT_EQ(p.stride, (V{2, 2}));
  EXPECT_EQ(p.dilation, (V{1, 1}));
  EXPECT_EQ(p.src_shape, d.src);
  EXPECT_EQ(p.weights_shape, d.weights);
  EXPECT_EQ(p.weights_format, WeightsFormat::OIX);
  EXPECT_EQ(p.canonical, canonical_json(d));
}

TEST(Resolve, SeedExample2OutputPadding) {
  Descriptor d = make({1, 20, 2, 2}, {20, 10, 3, 3});
  d.strides = {3, 3}, d.pads_begin = {0, 0}, d.pads_end = {0, 0}, d.output_padding = {2, 2};
  const Problem p = resolve(d);
  EXPECT_EQ(p.dst_shape, (V{1, 10, 8, 8}));
  EXPECT_EQ(p.output_padding, (V{2, 2}));
}

TEST(Resolve, SeedExample3ValidWithOutputShapeIgnoresPads) {
  Descriptor d = make({1, 20, 224, 224}, {20, 10, 3, 3});
  d.strides = {1, 1}, d.pads_begin = {1, 1}, d.pads_end = {1, 1};
  d.auto_pad = AutoPad::Valid, d.output_shape = {450, 450};
  const Problem p = resolve(d);
  EXPECT_EQ(p.dst_shape, (V{1, 10, 450, 450}));
  EXPECT_EQ(p.pads_begin, (V{0, 0}));
  EXPECT_EQ(p.pads_end, (V{0, 0}));
}

// ---- section 3: output sizes and resolved pads ------------------------------------------------------------

TEST(Resolve, DefaultsFillEveryList) {
  const Problem p = resolve(make({2, 4, 5, 6, 7}, {4, 3, 2, 3, 1}));
  EXPECT_EQ(p.spatial_rank, 3);
  EXPECT_EQ(p.stride, (V{1, 1, 1}));
  EXPECT_EQ(p.dilation, (V{1, 1, 1}));
  EXPECT_EQ(p.pads_begin, (V{0, 0, 0}));
  EXPECT_EQ(p.pads_end, (V{0, 0, 0}));
  EXPECT_EQ(p.output_padding, (V{0, 0, 0}));
  EXPECT_EQ(p.out, (V{6, 8, 7}));  // X + K - 1
  EXPECT_EQ(p.dst_shape, (V{2, 3, 6, 8, 7}));
  EXPECT_EQ(p.dtype, DType::f32);
  EXPECT_EQ(p.data_format, DataFormat::NCX);
}

TEST(Resolve, SameWithoutOutputShapeComputesNoPadding) {
  for (AutoPad mode : {AutoPad::SameUpper, AutoPad::SameLower, AutoPad::Valid}) {
    Descriptor d = axis1d(5, 3, 2);
    d.auto_pad = mode, d.pads_begin = {4}, d.pads_end = {4};  // ignored
    const Problem p = resolve(d);
    EXPECT_EQ(p.out, V{11}) << to_string(mode);
    EXPECT_EQ(p.pads_begin, V{0});
    EXPECT_EQ(p.pads_end, V{0});
  }
}

TEST(Resolve, SameUpperPutsTheLargerHalfFirst) {
  Descriptor d = axis1d(5, 3, 2);  // full size 11
  d.auto_pad = AutoPad::SameUpper;
  d.output_shape = {10};  // total 1
  Problem p = resolve(d);
  EXPECT_EQ(p.pads_begin, V{1});
  EXPECT_EQ(p.pads_end, V{0});
  EXPECT_EQ(p.out, V{10});
  d.output_shape = {8};  // total 3
  p = resolve(d);
  EXPECT_EQ(p.pads_begin, V{2});
  EXPECT_EQ(p.pads_end, V{1});
}

TEST(Resolve, SameLowerPutsTheLargerHalfLast) {
  Descriptor d = axis1d(5, 3, 2);
  d.auto_pad = AutoPad::SameLower;
  d.output_shape = {10};
  Problem p = resolve(d);
  EXPECT_EQ(p.pads_begin, V{0});
  EXPECT_EQ(p.pads_end, V{1});
  d.output_shape = {8};
  p = resolve(d);
  EXPECT_EQ(p.pads_begin, V{1});
  EXPECT_EQ(p.pads_end, V{2});
  d.output_shape = {7};  // even total: both modes agree
  p = resolve(d);
  EXPECT_EQ(p.pads_begin, V{2});
  EXPECT_EQ(p.pads_end, V{2});
}

TEST(Resolve, SameIncludesOutputPaddingAndClampsAtZero) {
  Descriptor d = axis1d(5, 3, 2);
  d.auto_pad = AutoPad::SameUpper, d.output_padding = {1}, d.output_shape = {10};  // total 2
  Problem p = resolve(d);
  EXPECT_EQ(p.pads_begin, V{1});
  EXPECT_EQ(p.pads_end, V{1});
  d.output_shape = {15};  // larger than the full result: no padding, zeros beyond
  p = resolve(d);
  EXPECT_EQ(p.pads_begin, V{0});
  EXPECT_EQ(p.pads_end, V{0});
  EXPECT_EQ(p.out, V{15});
}

TEST(Resolve, ExplicitWithOutputShapeKeepsTheGivenPads) {
  Descriptor d = axis1d(5, 3, 2);
  d.pads_begin = {3}, d.pads_end = {-1}, d.output_shape = {4};
  const Problem p = resolve(d);
  EXPECT_EQ(p.out, V{4});
  EXPECT_EQ(p.pads_begin, V{3});
  EXPECT_EQ(p.pads_end, V{-1});
}

TEST(Resolve, NegativePadsGrowTheOutput) {
  Descriptor d = axis1d(4, 3, 1);
  d.pads_begin = {-1}, d.pads_end = {-2};
  const Problem p = resolve(d);
  EXPECT_EQ(p.out, V{9});  // 3 + 3 + 1 + 2
  EXPECT_EQ(p.pads_begin, V{-1});
  EXPECT_EQ(p.pads_end, V{-2});
}

TEST(Resolve, OutputPaddingMayExceedTheStride) {
  Descriptor d = axis1d(3, 2, 2);
  d.output_padding = {3};
  EXPECT_EQ(resolve(d).out, V{9});  // 2*2 + 2 + 3
}

TEST(Resolve, NegativeOutputPaddingIsSignedLikeThePads) {
  Descriptor d = axis1d(5, 3, 2);
  d.output_padding = {-2};
  const Problem p = resolve(d);
  EXPECT_EQ(p.out, V{9});  // 11 - 2
  EXPECT_EQ(p.output_padding, V{-2});
}

TEST(Resolve, DilationWidensTheKernel) {
  Descriptor d = axis1d(4, 3, 1);
  d.dilations = {2};
  EXPECT_EQ(resolve(d).out, V{8});  // 3 + (2*2+1)
}

TEST(Resolve, PerAxisAttributes) {
  Descriptor d = make({1, 2, 3, 4, 5}, {2, 1, 2, 3, 4});
  d.strides = {1, 2, 3}, d.dilations = {2, 1, 1}, d.pads_begin = {0, 1, 0}, d.pads_end = {1, 0, 2};
  const Problem p = resolve(d);
  EXPECT_EQ(p.out, (V{4, 8, 14}));  // 2+3-1, 6+3-1, 12+4-2
}

// ---- layouts, ranks, groups ------------------------------------------------------------------------------

TEST(Resolve, NxcLayoutsForEveryRank) {
  for (int rank = 3; rank <= 5; ++rank) {
    const size_t n = static_cast<size_t>(rank - 2);
    V src{2}, w{6, 4}, dst{2};
    for (size_t i = 0; i < n; ++i) src.push_back(3 + static_cast<int64_t>(i));
    src.push_back(6);
    for (size_t i = 0; i < n; ++i) w.push_back(2), dst.push_back(src[i + 1] + 1);
    dst.push_back(4);
    Descriptor d = make(src, w);
    d.data_format = DataFormat::NXC;
    const Problem p = resolve(d);
    EXPECT_EQ(p.spatial_rank, rank - 2);
    EXPECT_EQ(p.c_in, 6);
    EXPECT_EQ(p.c_out, 4);
    EXPECT_EQ(p.in, V(src.begin() + 1, src.end() - 1));
    EXPECT_EQ(p.dst_shape, dst);
    EXPECT_EQ(p.src_elements(), 2 * 6 * (rank == 3 ? 3 : rank == 4 ? 12 : 60));
  }
}

TEST(Resolve, XioWeights) {
  Descriptor d = make({1, 5, 6, 8}, {3, 2, 6, 8});
  d.data_format = DataFormat::NXC, d.weights_format = WeightsFormat::XIO;
  Problem p = resolve(d);
  EXPECT_EQ(p.c_in, 8);
  EXPECT_EQ(p.c_out, 6);
  EXPECT_EQ(p.kernel, (V{3, 2}));
  EXPECT_EQ(p.dst_shape, (V{1, 7, 7, 6}));
  EXPECT_EQ(p.weights_format, WeightsFormat::XIO);
  d.groups = 2;
  p = resolve(d);
  EXPECT_EQ(p.c_out, 12);
  EXPECT_EQ(p.c_in_per_group(), 4);
  EXPECT_EQ(p.c_out_per_group(), 6);
}

TEST(Resolve, GroupsWithOixWeights) {
  Descriptor d = make({1, 8, 5, 5}, {8, 3, 3, 3});
  d.groups = 2;
  const Problem p = resolve(d);
  EXPECT_EQ(p.groups, 2);
  EXPECT_EQ(p.c_in, 8);
  EXPECT_EQ(p.c_out, 6);
  EXPECT_EQ(p.c_in_per_group(), 4);
  EXPECT_EQ(p.weights_format, WeightsFormat::OIX);
  EXPECT_EQ(p.dst_shape, (V{1, 6, 7, 7}));
}

TEST(Resolve, DepthwiseIsGroupsEqualToChannels) {
  Descriptor d = make({1, 16, 4, 4}, {16, 1, 3, 3});
  d.groups = 16;
  const Problem p = resolve(d);
  EXPECT_EQ(p.c_out, 16);
  EXPECT_EQ(p.c_in_per_group(), 1);
  EXPECT_EQ(p.c_out_per_group(), 1);
}

TEST(Resolve, GroupFormTakesGFromTheWeights) {
  Descriptor d = make({1, 8, 5, 5}, {2, 4, 3, 3, 3});  // OIX spelling: GroupConvolutionBackpropData
  Problem p = resolve(d);
  EXPECT_EQ(p.weights_format, WeightsFormat::GOIX);
  EXPECT_EQ(p.groups, 2);
  EXPECT_EQ(p.c_in, 8);
  EXPECT_EQ(p.c_out, 6);
  EXPECT_EQ(p.kernel, (V{3, 3}));
  d.weights_format = WeightsFormat::GOIX, d.groups = 2;
  p = resolve(d);
  EXPECT_EQ(p.weights_format, WeightsFormat::GOIX);
  EXPECT_EQ(p.dst_shape, (V{1, 6, 7, 7}));
}

TEST(Resolve, ElementCountsAndFlops) {
  Descriptor d = make({2, 8, 5, 6}, {8, 3, 3, 2});
  d.groups = 2, d.strides = {2, 2};
  const Problem p = resolve(d);
  EXPECT_EQ(p.src_elements(), 2 * 8 * 5 * 6);
  EXPECT_EQ(p.weights_elements(), 8 * 3 * 3 * 2);
  EXPECT_EQ(p.dst_shape, (V{2, 6, 11, 12}));
  EXPECT_EQ(p.dst_elements(), 2 * 6 * 11 * 12);
  EXPECT_DOUBLE_EQ(p.flops(), 2.0 * 2 * 8 * 3 * (5 * 6) * (3 * 2));
  EXPECT_EQ(Problem().src_elements(), 0);
}

TEST(Resolve, HalfPrecisionDescriptorsAreValid) {
  for (DType t : {DType::bf16, DType::f16}) {
    Descriptor d = make({1, 2, 3}, {2, 2, 2});
    d.dtype = d.weights_dtype = t;
    EXPECT_EQ(resolve(d).dtype, t);
  }
}

// ---- output_shape ---------------------------------------------------------------------------------------

TEST(Resolve, FullRankOutputShapeNcx) {
  Descriptor d = make({2, 4, 5, 5}, {4, 3, 3, 3});
  d.strides = {2, 2}, d.auto_pad = AutoPad::SameUpper, d.output_shape = {2, 3, 10, 9};
  const Problem p = resolve(d);
  EXPECT_EQ(p.out, (V{10, 9}));
  EXPECT_EQ(p.dst_shape, (V{2, 3, 10, 9}));
  EXPECT_EQ(p.pads_begin, (V{1, 1}));  // totals 1 and 2
  EXPECT_EQ(p.pads_end, (V{0, 1}));
}

TEST(Resolve, FullRankOutputShapeNxc) {
  Descriptor d = make({2, 5, 5, 4}, {4, 3, 3, 3});
  d.data_format = DataFormat::NXC, d.output_shape = {2, 6, 8, 3};
  const Problem p = resolve(d);
  EXPECT_EQ(p.out, (V{6, 8}));
  EXPECT_EQ(p.dst_shape, (V{2, 6, 8, 3}));
}

TEST(ResolveErrors, FullRankOutputShapeBatchOrChannelsMismatch) {
  Descriptor d = make({2, 4, 5, 5}, {4, 3, 3, 3});
  d.output_shape = {1, 3, 7, 7};
  expect_invalid(d, {"output_shape[0] (batch) is 1", "src batch is 2"});
  d.output_shape = {2, 4, 7, 7};
  expect_invalid(d, {"output_shape[1] (channels) is 4", "C_OUT is 3"});
  d.data_format = DataFormat::NXC, d.src = {2, 5, 5, 4}, d.output_shape = {2, 7, 7, 5};
  expect_invalid(d, {"output_shape[3] (channels) is 5", "C_OUT is 3", "NXC"});
}

TEST(ResolveErrors, OutputShapeLengthAndValues) {
  Descriptor d = make({1, 4, 5, 5}, {4, 3, 3, 3});
  d.output_shape = {7, 7, 7};
  expect_invalid(d, {"output_shape has 3 entries", "[7,7,7]", "expected 2 (spatial sizes) or 4"});
  d.output_shape = {7, 0};
  expect_invalid(d, {"output_shape[1]", "got 0"});
  d.output_shape = {7, kBig + 1};
  expect_invalid(d, {"output_shape[1]", "2147483648"});
}

// ---- section 5 errors -------------------------------------------------------------------------------------

TEST(ResolveErrors, DataRank) {
  expect_invalid(make({1, 2}, {2, 2}), {"src has rank 2", "[1,2]", "expected 3, 4 or 5"});
  expect_invalid(make({1, 2, 3, 3, 3, 3}, {2, 2, 1, 1, 1, 1}), {"src has rank 6"});
  expect_invalid(make({}, {}), {"src has rank 0"});
}

TEST(ResolveErrors, WeightsRank) {
  expect_invalid(make({1, 2, 3, 3}, {2, 2, 3}), {"weights has rank 3", "expected 4 (src rank) or 5 (group form)"});
  Descriptor d = make({1, 2, 3, 3}, {2, 2, 3, 3, 1});
  d.weights_format = WeightsFormat::XIO;
  expect_invalid(d, {"weights has rank 5", "expected 4 (src rank) for weights_format XIO"});
  d.weights_format = WeightsFormat::GOIX, d.weights = {2, 1, 3, 3};
  expect_invalid(d, {"weights has rank 4", "expected 5 (src rank + 1) for weights_format GOIX"});
}

TEST(ResolveErrors, DimensionsMustBePositive) {
  expect_invalid(make({1, 2, 0}, {2, 2, 2}), {"src[2] must be >= 1, got 0"});
  expect_invalid(make({-1, 2, 3}, {2, 2, 2}), {"src[0] must be >= 1, got -1"});
  expect_invalid(make({1, 2, 3}, {2, 2, 0}), {"weights[2] must be >= 1, got 0"});
}

TEST(ResolveErrors, ChannelsMismatchNamesTheWeightsDimension) {
  expect_invalid(make({1, 32, 4, 4}, {16, 2, 3, 3}),
                 {"data channels (32) do not match weights[0] (16) (weights_format OIX)"});
  Descriptor d = make({1, 4, 4, 32}, {3, 3, 2, 16});
  d.data_format = DataFormat::NXC, d.weights_format = WeightsFormat::XIO;
  expect_invalid(d, {"data channels (32) do not match weights[3] (16) (weights_format XIO)"});
  expect_invalid(make({1, 32, 4, 4}, {2, 8, 2, 3, 3}),
                 {"data channels (32) do not match G*weights[1] = 2*8 = 16 (weights_format GOIX)"});
}

TEST(ResolveErrors, Groups) {
  Descriptor d = make({1, 6, 4, 4}, {6, 2, 3, 3});
  d.groups = 4;
  expect_invalid(d, {"C_IN (6) is not divisible by groups (4)"});
  d.groups = 0;
  expect_invalid(d, {"groups must be >= 1, got 0"});
  d.groups = -2;
  expect_invalid(d, {"groups must be >= 1, got -2"});
  d = make({1, 8, 4, 4}, {2, 4, 2, 3, 3});
  d.groups = 4;
  expect_invalid(d, {"groups (4) does not match weights[0] (2)"});
}

TEST(ResolveErrors, StridesAndDilationsMustBePositive) {
  Descriptor d = make({1, 2, 4, 4}, {2, 2, 3, 3});
  d.strides = {1, 0};
  expect_invalid(d, {"strides[1] must be >= 1, got 0"});
  d.strides = {-2, 1};
  expect_invalid(d, {"strides[0] must be >= 1, got -2"});
  d.strides = {};
  d.dilations = {1, 0};
  expect_invalid(d, {"dilations[1] must be >= 1, got 0"});
}

TEST(ResolveErrors, WrongListLengthsEvenWhenIgnored) {
  const char* names[] = {"strides", "dilations", "pads_begin", "pads_end", "output_padding"};
  for (int i = 0; i < 5; ++i) {
    Descriptor d = make({1, 2, 4, 4}, {2, 2, 3, 3});
    d.auto_pad = AutoPad::Valid;  // makes the pads irrelevant, not their length
    V* lists[] = {&d.strides, &d.dilations, &d.pads_begin, &d.pads_end, &d.output_padding};
    *lists[i] = {1, 1, 1};
    expect_invalid(d, {names[i], "has 3 entries, expected 2 (spatial rank)"});
  }
}

TEST(ResolveErrors, DataAndWeightsDtypesDiffer) {
  Descriptor d = make({1, 2, 3}, {2, 2, 2});
  d.weights_dtype = DType::bf16;
  expect_invalid(d, {"dtype", "f32", "bf16", "differ"});
}

TEST(Resolve, AccumulationIsCopiedIntoTheProblem) {
  Descriptor d = make({1, 2, 3}, {2, 2, 2});
  EXPECT_EQ(resolve(d).accumulation, DType::f32);
  for (DType t : {DType::f32, DType::bf16, DType::f16}) {  // f32 sums suit every type
    d.dtype = d.weights_dtype = t;
    EXPECT_EQ(resolve(d).accumulation, DType::f32) << to_string(t);
  }
  d.accumulation = DType::f16;  // dtype is f16 here
  EXPECT_EQ(resolve(d).accumulation, DType::f16);
}

TEST(ResolveErrors, AccumulationF16NeedsF16Data) {
  Descriptor d = make({1, 2, 3}, {2, 2, 2});
  d.accumulation = DType::f16;
  expect_invalid(d, {"accumulation: f16 needs dtype f16, got f32"});
  d.dtype = d.weights_dtype = DType::bf16;
  expect_invalid(d, {"accumulation: f16 needs dtype f16, got bf16"});
}

TEST(ResolveErrors, AccumulationBf16IsRefused) {
  for (DType t : {DType::f32, DType::bf16, DType::f16}) {
    Descriptor d = make({1, 2, 3}, {2, 2, 2});
    d.dtype = d.weights_dtype = t;
    d.accumulation = DType::bf16;
    expect_invalid(d, {"accumulation: bf16 is not supported", "f32", "f16"});
  }
}

TEST(ResolveErrors, NonPositiveOutputSize) {
  Descriptor d = axis1d(2, 1, 1);
  d.pads_begin = {3}, d.pads_end = {2};
  expect_invalid(d, {"output Y size (axis 0) would be -3", "pads_begin 3", "pads_end 2"});
  d = make({1, 2, 5, 2}, {2, 2, 1, 1});
  d.pads_end = {0, 2};
  expect_invalid(d, {"output Y size (axis 1) would be 0"});
}

// ---- limits and overflow ----------------------------------------------------------------------------------

TEST(ResolveLimits, DimensionAndAttributeMagnitudes) {
  expect_invalid(make({1, 1, kBig + 1}, {1, 1, 1}), {"src[2] = 2147483648 exceeds the limit 2147483647"});
  Descriptor d = axis1d(3, 2, 1);
  d.strides = {kBig + 1};
  expect_invalid(d, {"strides[0] = 2147483648 is out of range"});
  d = axis1d(3, 2, 1);
  d.pads_begin = {-kBig - 1};
  expect_invalid(d, {"pads_begin[0] = -2147483648 is out of range"});
  d = axis1d(3, 2, 1);
  d.output_padding = {kBig + 1};
  expect_invalid(d, {"output_padding[0] = 2147483648"});
  d = axis1d(3, 2, 1);
  d.pads_end = {kBig};  // the largest accepted magnitude, still an error through Y
  expect_invalid(d, {"output Y size (axis 0)"});
}

TEST(ResolveLimits, ChannelLimit) {
  const int64_t c = detail::kMaxChannels;
  EXPECT_EQ(resolve(make({1, c, 1}, {c, 1, 1})).c_in, c);
  expect_invalid(make({1, c + 1, 1}, {c + 1, 1, 1}), {"C_IN (16777217) exceeds the limit 16777216"});
  Descriptor d = make({1, 4, 1}, {4, c / 2 + 1, 1});
  d.groups = 2;
  expect_invalid(d, {"C_OUT (16777218) exceeds the limit 16777216"});
}

TEST(ResolveLimits, OutputSizeLimit) {
  const Descriptor d = axis1d((int64_t{1} << 30) + 1, 1, 2);
  expect_invalid(d, {"output Y size (axis 0) would be 2147483649, above the limit"});
}

TEST(ResolveLimits, ResolvedPadsLimit) {
  Descriptor d = axis1d(kBig, 1, kBig);
  d.auto_pad = AutoPad::SameUpper, d.output_shape = {1};
  expect_invalid(d, {"resolved pads (axis 0)", "same_upper"});
}

TEST(ResolveLimits, ElementCountOverflow) {
  expect_invalid(make({kBig, 1, kBig, kBig}, {1, 1, 1, 1}), {"src: element count overflows 64-bit arithmetic"});
  const int64_t c = detail::kMaxChannels;
  expect_invalid(make({1, c, 1, 1}, {c, c, kBig, kBig}), {"weights: element count overflows"});
  expect_invalid(make({int64_t{1} << 20, 16, 1 << 10, 1 << 10}, {16, c, 1, 1}), {"dst: element count overflows"});
}

TEST(ResolveLimits, ByteSizeLimit) {
  // 2^60 elements = 2^62 bytes: exactly the limit, accepted.
  const Problem p = resolve(make({int64_t{1} << 30, 1, int64_t{1} << 30, 1}, {1, 1, 1, 1}));
  EXPECT_EQ(p.src_elements(), int64_t{1} << 60);
  expect_invalid(make({3, 1, int64_t{1} << 30, int64_t{1} << 29}, {1, 1, 1, 1}),
                 {"src: byte size 6917529027641081856 exceeds the limit 4611686018427387904"});
  expect_invalid(make({1 << 2, 1, int64_t{1} << 30, int64_t{1} << 29}, {1, 1, 1, 1}),
                 {"src: byte size overflows 64-bit arithmetic"});
}

}  // namespace
}  // namespace deconvjit
