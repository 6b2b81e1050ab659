// The JSON form: strict parsing, to_json, canonical identity and round trips.
#include <gtest/gtest.h>

#include <initializer_list>
#include <regex>
#include <string>
#include <vector>

#include "deconvjit/deconvjit.hpp"

namespace deconvjit {
namespace {

using V = std::vector<int64_t>;

// Expects descriptor_from_json(text) to fail with a message containing every fragment.
void expect_parse_error(const std::string& text, std::initializer_list<const char*> fragments) {
  try {
    descriptor_from_json(text);
    ADD_FAILURE() << "accepted " << text;
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), Error::Kind::InvalidDescriptor) << e.what();
    for (const char* f : fragments)
      EXPECT_NE(std::string(e.what()).find(f), std::string::npos) << "message '" << e.what() << "' lacks '" << f
                                                                  << "' (input " << text << ")";
  }
}

// {"src": [1,4,5,5], "weights": [4,3,3,3], <extra>}
std::string with(const std::string& extra) {
  return R"({"src": [1,4,5,5], "weights": [4,3,3,3])" + (extra.empty() ? "" : ", " + extra) + "}";
}

std::string canon(const std::string& text) { return canonical_json(descriptor_from_json(text)); }

// ---- parsing ----------------------------------------------------------------------------------------------

TEST(DescriptorJson, ParsesEveryField) {
  const Descriptor d = descriptor_from_json(R"({
      "name": "up", "src": [2, 6, 7, 8], "weights": [6, 2, 3, 4], "strides": [2, 3], "dilations": [1, 2],
      "pads_begin": [1, -1], "pads_end": [0, 2], "output_padding": [1, 0], "auto_pad": "same_lower",
      "output_shape": [14, 20], "groups": 3, "data_format": "NXC", "weights_format": "XIO", "dtype": "bf16"})");
  EXPECT_EQ(d.name, "up");
  EXPECT_EQ(d.src, (V{2, 6, 7, 8}));
  EXPECT_EQ(d.weights, (V{6, 2, 3, 4}));
  EXPECT_EQ(d.strides, (V{2, 3}));
  EXPECT_EQ(d.dilations, (V{1, 2}));
  EXPECT_EQ(d.pads_begin, (V{1, -1}));
  EXPECT_EQ(d.pads_end, (V{0, 2}));
  EXPECT_EQ(d.output_padding, (V{1, 0}));
  EXPECT_EQ(d.auto_pad, AutoPad::SameLower);
  EXPECT_EQ(d.output_shape, (V{14, 20}));
  ASSERT_TRUE(d.groups.has_value());
  EXPECT_EQ(*d.groups, 3);
  EXPECT_EQ(d.data_format, DataFormat::NXC);
  EXPECT_EQ(d.weights_format, WeightsFormat::XIO);
  EXPECT_EQ(d.dtype, DType::bf16);
  EXPECT_EQ(d.weights_dtype, DType::bf16);
}

TEST(DescriptorJson, OmittedFieldsKeepTheDefaults) {
  const Descriptor d = descriptor_from_json(with(""));
  EXPECT_TRUE(d.strides.empty() && d.dilations.empty() && d.pads_begin.empty() && d.pads_end.empty());
  EXPECT_TRUE(d.output_padding.empty() && d.output_shape.empty() && d.name.empty());
  EXPECT_FALSE(d.groups.has_value());
  EXPECT_EQ(d.auto_pad, AutoPad::Explicit);
  EXPECT_EQ(d.data_format, DataFormat::NCX);
  EXPECT_EQ(d.weights_format, WeightsFormat::OIX);
  EXPECT_EQ(d.dtype, DType::f32);
  EXPECT_EQ(d.weights_dtype, DType::f32);
}

TEST(DescriptorJson, AutoPadNamesAndAliasesInAnyCase) {
  const std::pair<const char*, AutoPad> cases[] = {
      {"explicit", AutoPad::Explicit},   {"NOTSET", AutoPad::Explicit},      {"none", AutoPad::Explicit},
      {"Explicit", AutoPad::Explicit},   {"valid", AutoPad::Valid},          {"VALID", AutoPad::Valid},
      {"same_upper", AutoPad::SameUpper}, {"SAME_UPPER", AutoPad::SameUpper}, {"Same_Lower", AutoPad::SameLower}};
  for (const auto& [text, mode] : cases)
    EXPECT_EQ(descriptor_from_json(with(std::string(R"("auto_pad": ")") + text + "\"")).auto_pad, mode) << text;
}

TEST(DescriptorJson, FormatNamesInAnyCase) {
  EXPECT_EQ(descriptor_from_json(with(R"("data_format": "nxc")")).data_format, DataFormat::NXC);
  EXPECT_EQ(descriptor_from_json(with(R"("data_format": "ncx")")).data_format, DataFormat::NCX);
  EXPECT_EQ(descriptor_from_json(with(R"("weights_format": "xio")")).weights_format, WeightsFormat::XIO);
  EXPECT_EQ(descriptor_from_json(with(R"("weights_format": "GOIX")")).weights_format, WeightsFormat::GOIX);
  EXPECT_EQ(descriptor_from_json(with(R"("dtype": "F16")")).dtype, DType::f16);
}

TEST(DescriptorJson, DtypePairSetsTheWeightsDtype) {
  const Descriptor d = descriptor_from_json(with(R"("dtype": ["f32", "bf16"])"));
  EXPECT_EQ(d.dtype, DType::f32);
  EXPECT_EQ(d.weights_dtype, DType::bf16);
  try {
    resolve(d);
    ADD_FAILURE() << "a dtype mismatch resolved";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("bf16"), std::string::npos) << e.what();
  }
  EXPECT_NO_THROW(resolve(descriptor_from_json(with(R"("dtype": ["f16", "f16"])"))));
}

TEST(DescriptorJson, AccumulationParsesAndDefaultsToF32) {
  EXPECT_EQ(descriptor_from_json(with("")).accumulation, DType::f32);
  const Descriptor d = descriptor_from_json(with(R"("dtype": "f16", "accumulation": "F16")"));
  EXPECT_EQ(d.accumulation, DType::f16);
  EXPECT_EQ(resolve(d).accumulation, DType::f16);
  EXPECT_EQ(descriptor_from_json(with(R"("dtype": "bf16", "accumulation": "f32")")).accumulation, DType::f32);
  // Parses like dtype, so a C++ descriptor survives to_json; resolve() refuses the pairing.
  EXPECT_EQ(descriptor_from_json(with(R"("accumulation": "bf16")")).accumulation, DType::bf16);
}

TEST(DescriptorJson, DstShapeIsAnAliasOfOutputShape) {
  EXPECT_EQ(descriptor_from_json(with(R"("dst_shape": [1,3,7,7])")).output_shape, (V{1, 3, 7, 7}));
  expect_parse_error(with(R"("dst_shape": [7,7], "output_shape": [7,7])"), {"output_shape", "dst_shape"});
}

TEST(DescriptorJson, EmptyListsMeanTheDefault) {
  EXPECT_EQ(canon(with(R"("strides": [], "pads_begin": [], "output_shape": [])")), canon(with("")));
}

// ---- parse errors -----------------------------------------------------------------------------------------

TEST(DescriptorJsonErrors, UnknownFieldWithHint) {
  expect_parse_error(with(R"("stride": [2,2])"), {"unknown field 'stride'", "did you mean 'strides'?"});
  expect_parse_error(with(R"("pad_begin": [1,1])"), {"unknown field 'pad_begin'", "'pads_begin'"});
  expect_parse_error(with(R"("Groups": 1)"), {"unknown field 'Groups'", "'groups'"});
  try {
    descriptor_from_json(with(R"("zzzzzz": 1)"));
    ADD_FAILURE();
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()), "unknown field 'zzzzzz'");
  }
}

TEST(DescriptorJsonErrors, WrongTypesNameTheField) {
  expect_parse_error(with(R"("strides": "2")"), {"strides must be an array of integers", "\"2\""});
  expect_parse_error(with(R"("strides": [1, 2.5])"), {"strides[1] must be an integer", "2.5"});
  expect_parse_error(with(R"("output_shape": [450.5, 450])"), {"output_shape[0] must be an integer", "450.5"});
  expect_parse_error(with(R"("output_shape": ["450", 450])"), {"output_shape[0] must be an integer", "\"450\""});
  expect_parse_error(with(R"("dst_shape": [1, 3, 7.0, 7])"), {"dst_shape[2] must be an integer"});
  expect_parse_error(with(R"("output_shape": null)"), {"output_shape must be an array of integers", "null"});
  expect_parse_error(with(R"("groups": "2")"), {"groups must be an integer", "\"2\""});
  expect_parse_error(with(R"("groups": true)"), {"groups must be an integer", "true"});
  expect_parse_error(with(R"("groups": 1.5)"), {"groups must be an integer", "1.5"});
  expect_parse_error(with(R"("auto_pad": 1)"), {"auto_pad must be a string", "1"});
  expect_parse_error(with(R"("data_format": ["NCX"])"), {"data_format must be a string"});
  expect_parse_error(with(R"("name": 5)"), {"name must be a string"});
  expect_parse_error(with(R"("dtype": 32)"), {"dtype must be a string or an array", "32"});
  expect_parse_error(with(R"("dtype": ["f32"])"), {"dtype must be a string or an array", "[\"f32\"]"});
  expect_parse_error(with(R"("dtype": ["f32", 1])"), {"dtype[1] must be a string"});
  expect_parse_error(R"({"src": [1,4,5,5], "weights": [[4],3,3,3]})", {"weights[0] must be an integer"});
  expect_parse_error(with(R"("pads_end": [1, 18446744073709551615])"), {"pads_end[1]", "out of the 64-bit"});
}

TEST(DescriptorJsonErrors, UnknownEnumValues) {
  expect_parse_error(with(R"("auto_pad": "same")"), {"auto_pad: unknown value 'same'", "same_upper"});
  expect_parse_error(with(R"("auto_pad": "same-upper")"), {"'same-upper'", "did you mean 'same_upper'?"});
  expect_parse_error(with(R"("data_format": "NCHW")"), {"data_format: unknown value 'NCHW'", "NCX or NXC"});
  expect_parse_error(with(R"("weights_format": "IOX")"), {"weights_format: unknown value 'IOX'"});
  expect_parse_error(with(R"("dtype": "f64")"), {"dtype: unknown value 'f64'"});
  expect_parse_error(with(R"("dtype": ["f32", "i8"])"), {"dtype[1]: unknown value 'i8'"});
}

TEST(DescriptorJsonErrors, AccumulationValuesAndTypes) {
  expect_parse_error(with(R"("accumulation": "f64")"), {"accumulation: unknown value 'f64'"});
  expect_parse_error(with(R"("accumulation": 16)"), {"accumulation must be a string", "16"});
  expect_parse_error(with(R"("accumulate": "f16")"), {"unknown field 'accumulate'", "did you mean 'accumulation'"});
}

TEST(DescriptorJsonErrors, MalformedOrMisshapenDocuments) {
  expect_parse_error(R"({"src": [1,)", {"malformed JSON"});
  expect_parse_error("", {"malformed JSON"});
  expect_parse_error(R"({"src": [1,4,5,5], "weights": [4,3,3,3]} trailing)", {"malformed JSON"});
  expect_parse_error("[1, 2, 3]", {"must be a JSON object"});
  expect_parse_error(R"({"weights": [4,3,3,3]})", {"missing required field 'src'"});
  expect_parse_error(R"({"src": [1,4,5,5]})", {"missing required field 'weights'"});
  expect_parse_error(with(R"("strides": [1,1], "strides": [2,2])"), {"duplicate field 'strides'"});
}

// ---- canonical form ---------------------------------------------------------------------------------------

TEST(CanonicalJson, ExactTextOfASeedExample) {
  const std::string c = canon(R"({"src":[1,20,224,224],"weights":[20,10,3,3],"strides":[2,2],
                                   "pads_begin":[1,1],"pads_end":[1,1],"name":"seed1"})");
  EXPECT_EQ(c,
            R"({"src":[1,20,224,224],"weights":[20,10,3,3],"strides":[2,2],"dilations":[1,1],"pads_begin":[1,1],)"
            R"("pads_end":[1,1],"output_padding":[0,0],"auto_pad":"explicit","groups":1,"data_format":"NCX",)"
            R"("weights_format":"OIX","dtype":"f32"})");
}

TEST(CanonicalJson, OneProblemManySpellings) {
  const std::string spellings[] = {
      R"({"src":[2,8,5,5],"weights":[8,3,3,3],"groups":2,"strides":[2,2],"auto_pad":"same_upper","output_shape":[9,10]})",
      R"({ "output_shape" : [9, 10], "auto_pad": "SAME_UPPER", "weights": [8, 3, 3, 3], "src": [2, 8, 5, 5],
           "strides": [2, 2], "groups": 2, "name": "a name is not identity" })",
      R"({"src":[2,8,5,5],"weights":[8,3,3,3],"groups":2,"strides":[2,2],"dilations":[1,1],"pads_begin":[0,0],
          "pads_end":[0,0],"output_padding":[0,0],"auto_pad":"same_upper","dst_shape":[2,6,9,10],
          "data_format":"ncx","weights_format":"oix","dtype":["f32","f32"]})",
      R"({"src":[2,8,5,5],"weights":[8,3,3,3],"groups":2,"strides":[2,2],"auto_pad":"same_upper",
          "output_shape":[9,10],"pads_begin":[3,3],"pads_end":[1,1]})",  // ignored pads
  };
  const std::string first = canon(spellings[0]);
  for (const std::string& s : spellings) EXPECT_EQ(canon(s), first) << s;
  EXPECT_NE(first.find(R"("output_shape":[9,10])"), std::string::npos) << first;
  // same_* ignores the given pads and resolve() derives them, so the canonical form writes zeros.
  EXPECT_NE(first.find(R"("pads_begin":[0,0],"pads_end":[0,0])"), std::string::npos) << first;
  EXPECT_EQ(first.find("name"), std::string::npos) << first;
  EXPECT_EQ(first.find(' '), std::string::npos) << first;
}

TEST(CanonicalJson, AliasesResolveToCanonicalNames) {
  EXPECT_EQ(canon(with(R"("auto_pad": "notset")")), canon(with(R"("auto_pad": "NONE")")));
  EXPECT_NE(canon(with(R"("auto_pad": "notset")")).find(R"("auto_pad":"explicit")"), std::string::npos);
  EXPECT_NE(canon(with(R"("auto_pad": "Same_Lower")")).find(R"("auto_pad":"same_lower")"), std::string::npos);
}

TEST(CanonicalJson, GroupFormSpellingsAgree) {
  const std::string implicit = canon(R"({"src":[1,8,5,5],"weights":[2,4,3,3,3]})");
  EXPECT_EQ(implicit, canon(R"({"src":[1,8,5,5],"weights":[2,4,3,3,3],"weights_format":"GOIX","groups":2})"));
  EXPECT_NE(implicit.find(R"("groups":2,)"), std::string::npos) << implicit;
  EXPECT_NE(implicit.find(R"("weights_format":"GOIX")"), std::string::npos) << implicit;
}

TEST(CanonicalJson, FullRankDstShapeBecomesSpatial) {
  const std::string nxc = canon(R"({"src":[1,5,5,4],"weights":[4,3,3,3],"data_format":"NXC","dst_shape":[1,8,9,3]})");
  EXPECT_NE(nxc.find(R"("output_shape":[8,9])"), std::string::npos) << nxc;
  EXPECT_EQ(nxc, canon(R"({"src":[1,5,5,4],"weights":[4,3,3,3],"data_format":"NXC","output_shape":[8,9]})"));
}

TEST(CanonicalJson, DifferentProblemsDiffer) {
  const std::string variants[] = {
      with(""),
      R"({"src": [2,4,5,5], "weights": [4,3,3,3]})",
      R"({"src": [1,4,5,5], "weights": [4,3,3,2]})",
      with(R"("strides": [2,1])"),
      with(R"("dilations": [1,2])"),
      with(R"("pads_begin": [1,0])"),
      with(R"("pads_end": [0,1])"),
      with(R"("output_padding": [1,0])"),
      with(R"("output_shape": [7,7])"),  // the size the attributes give anyway: still a stated input
      with(R"("auto_pad": "valid")"),
      with(R"("auto_pad": "same_upper", "output_shape": [6,6])"),
      with(R"("auto_pad": "same_lower", "output_shape": [6,6])"),
      R"({"src": [1,4,5,5], "weights": [4,3,3,3], "groups": 2})",
      R"({"src": [1,5,5,4], "weights": [4,3,3,3], "data_format": "NXC"})",
      R"({"src": [1,4,5,5], "weights": [3,3,3,4], "weights_format": "XIO"})",
      with(R"("dtype": "bf16")"),
      with(R"("dtype": "f16")"),
      with(R"("dtype": "f16", "accumulation": "f16")"),
  };
  std::vector<std::string> seen;
  for (const std::string& v : variants) {
    const std::string c = canon(v);
    for (const std::string& s : seen) EXPECT_NE(c, s) << v;
    seen.push_back(c);
  }
}

// Existing keys (disk cache entries, tuning records) must not change: the default is not written.
TEST(CanonicalJson, AccumulationAppearsOnlyWhenNotTheDefault) {
  EXPECT_EQ(canon(with("")), canon(with(R"("accumulation": "f32")")));
  EXPECT_EQ(canon(with("")).find("accumulation"), std::string::npos);
  EXPECT_EQ(canon(with(R"("dtype": "f16", "accumulation": "f32")")).find("accumulation"), std::string::npos);
  const std::string half = canon(with(R"("dtype": "f16", "accumulation": "f16")"));
  EXPECT_NE(half.find(R"("dtype":"f16","accumulation":"f16"})"), std::string::npos) << half;
}

TEST(CanonicalJson, RejectsInvalidAccumulation) {
  try {
    canon(with(R"("dtype": "bf16", "accumulation": "f16")"));
    ADD_FAILURE() << "canonical_json accepted f16 accumulation of bf16 data";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), Error::Kind::InvalidDescriptor);
    EXPECT_NE(std::string(e.what()).find("accumulation: f16 needs dtype f16, got bf16"), std::string::npos)
        << e.what();
  }
}

TEST(CanonicalJson, RejectsInvalidDescriptors) {
  Descriptor d = descriptor_from_json(with(R"("strides": [0, 1])"));
  try {
    canonical_json(d);
    ADD_FAILURE() << "canonical_json accepted stride 0";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), Error::Kind::InvalidDescriptor);
    EXPECT_NE(std::string(e.what()).find("strides[0]"), std::string::npos) << e.what();
  }
}

// ---- to_json and round trips ------------------------------------------------------------------------------

TEST(ToJson, FillsDefaultsAndCarriesTheName) {
  Descriptor d;
  d.src = {1, 4, 5, 5}, d.weights = {4, 3, 3, 3}, d.name = "layer 7";
  EXPECT_EQ(to_json(d),
            R"({"name":"layer 7","src":[1,4,5,5],"weights":[4,3,3,3],"strides":[1,1],"dilations":[1,1],)"
            R"("pads_begin":[0,0],"pads_end":[0,0],"output_padding":[0,0],"auto_pad":"explicit","groups":1,)"
            R"("data_format":"NCX","weights_format":"OIX","dtype":"f32"})");
  EXPECT_EQ(descriptor_from_json(to_json(d)).name, "layer 7");
}

TEST(ToJson, WritesAccumulationOnlyWhenNotTheDefault) {
  Descriptor d;
  d.src = {1, 4, 5}, d.weights = {4, 3, 3};
  EXPECT_EQ(to_json(d).find("accumulation"), std::string::npos);
  d.dtype = d.weights_dtype = DType::f16, d.accumulation = DType::f16;
  const std::string j = to_json(d);
  EXPECT_NE(j.find(R"("dtype":"f16","accumulation":"f16"})"), std::string::npos) << j;
  EXPECT_EQ(descriptor_from_json(j).accumulation, DType::f16);
  d.dtype = d.weights_dtype = DType::f32;  // invalid, and kept so through the trip
  EXPECT_THROW(resolve(descriptor_from_json(to_json(d))), Error);
}

TEST(ToJson, DoesNotValidateAndKeepsInvalidity) {
  Descriptor d;
  d.src = {1, 2}, d.weights = {2};
  EXPECT_NO_THROW(to_json(d));
  EXPECT_EQ(descriptor_from_json(to_json(d)).src, (V{1, 2}));
  d.src = {1, 4, 5}, d.weights = {4, 3, 3}, d.weights_dtype = DType::f16;  // a mismatch survives the trip
  const Descriptor back = descriptor_from_json(to_json(d));
  EXPECT_EQ(back.dtype, DType::f32);
  EXPECT_EQ(back.weights_dtype, DType::f16);
  EXPECT_THROW(resolve(back), Error);
}

TEST(ToJson, RoundTripsGiveTheSameCanonicalString) {
  const std::string docs[] = {
      with(""),
      R"({"src":[2,6,7,8],"weights":[6,2,3,4],"strides":[2,3],"dilations":[1,2],"pads_begin":[1,-1],
          "pads_end":[0,2],"output_padding":[1,0],"auto_pad":"same_lower","output_shape":[14,20],"groups":3,
          "data_format":"NCX","weights_format":"OIX","name":"x"})",
      R"({"src":[1,5,6,7,8],"weights":[2,3,4,8,8],"data_format":"NXC","weights_format":"XIO","groups":2,
          "dst_shape":[1,7,9,11,16]})",
      R"({"src":[1,8,5],"weights":[4,2,3,3],"auto_pad":"valid","pads_begin":[2]})",
      R"({"src":[1,8,5],"weights":[4,2,3,3],"dtype":"bf16"})",
      R"({"src":[1,8,5],"weights":[4,2,3,3],"dtype":"f16","accumulation":"f16"})",
  };
  for (const std::string& doc : docs) {
    const Descriptor d = descriptor_from_json(doc);
    const std::string once = to_json(d);
    EXPECT_EQ(canonical_json(descriptor_from_json(once)), canonical_json(d)) << doc;
    EXPECT_EQ(to_json(descriptor_from_json(once)), once) << doc;  // to_json is a fixed point
    const std::string c = canonical_json(d);
    EXPECT_EQ(canonical_json(descriptor_from_json(c)), c) << doc;  // so is the canonical form
  }
}

// ---- names ------------------------------------------------------------------------------------------------

TEST(Names, EnumStrings) {
  EXPECT_STREQ(to_string(DataFormat::NCX), "NCX");
  EXPECT_STREQ(to_string(DataFormat::NXC), "NXC");
  EXPECT_STREQ(to_string(WeightsFormat::OIX), "OIX");
  EXPECT_STREQ(to_string(WeightsFormat::XIO), "XIO");
  EXPECT_STREQ(to_string(WeightsFormat::GOIX), "GOIX");
  EXPECT_STREQ(to_string(AutoPad::Explicit), "explicit");
  EXPECT_STREQ(to_string(AutoPad::Valid), "valid");
  EXPECT_STREQ(to_string(AutoPad::SameUpper), "same_upper");
  EXPECT_STREQ(to_string(AutoPad::SameLower), "same_lower");
  EXPECT_STREQ(to_string(DType::f32), "f32");
  EXPECT_STREQ(to_string(DType::bf16), "bf16");
  EXPECT_STREQ(to_string(DType::f16), "f16");
}

TEST(Names, VersionIsSemantic) {
  EXPECT_TRUE(std::regex_match(version(), std::regex(R"(\d+\.\d+\.\d+)"))) << version();
}

}  // namespace
}  // namespace deconvjit
