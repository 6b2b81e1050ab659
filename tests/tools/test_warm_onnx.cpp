// `deconvjit warm model.onnx`: ConvTranspose nodes become cache entries whose output shapes and pads follow
// the ONNX 1.12 rules (recomputed here from the ONNX formulas, not from the importer), nodes that cannot be
// converted fail with their reasons, and broken files are refused cleanly. The models are written with the
// ONNX protobuf API, as an exporter would.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "deconvjit/deconvjit.hpp"
#include "support/cli_test.hpp"

#if DECONVJIT_HAVE_ONNX
#include <onnx/onnx_pb.h>
#endif

namespace deconvjit::testing {
namespace {

namespace fs = std::filesystem;
using Result = CliResult;
const auto quote = shell_quote;

class WarmOnnx : public CliTest {
 protected:
  void SetUp() override {
    CliTest::SetUp();
    cache_ = (dir_ / "cache").string();
  }
  Result warm(const fs::path& input, const std::string& extra = "") const {
    return run("warm " + quote(input.string()) + " --cache " + quote(cache_) + extra);
  }
  std::string cache_;
};

#if DECONVJIT_HAVE_ONNX

// One ConvTranspose node as an ONNX exporter states it.
struct OnnxLayer {
  std::string name;
  std::vector<int64_t> x;  // empty: the input is the previous layer's output, through a Relu
  std::vector<int64_t> w, strides, pads, output_padding, output_shape;
  int64_t group = 1;
  std::string auto_pad;  // empty: the attribute is absent (NOTSET)
  bool bias = false;     // a third input B, which does not change the kernel
};

// What ONNX says the node computes: the output shape, and pads_begin, which decides where every value
// lands (the end pad only crops). Straight from the ConvTranspose-11 doc, dilation 1, total_padding >= 0.
struct OnnxResult {
  std::vector<int64_t> dst, pads_begin;
};

OnnxResult onnx_result(const std::vector<int64_t>& x, const OnnxLayer& l) {
  const size_t n = x.size() - 2;
  const bool same = l.auto_pad == "SAME_UPPER" || l.auto_pad == "SAME_LOWER";
  OnnxResult r{{x[0], l.w[1] * l.group}, {}};
  for (size_t i = 0; i < n; ++i) {
    const int64_t s = l.strides.empty() ? 1 : l.strides[i];
    const int64_t op = l.output_padding.empty() ? 0 : l.output_padding[i];
    const int64_t full = s * (x[i + 2] - 1) + op + l.w[i + 2];
    if (l.output_shape.empty() && !same) {
      const int64_t pb = l.pads.empty() ? 0 : l.pads[i], pe = l.pads.empty() ? 0 : l.pads[i + n];
      r.dst.push_back(full - pb - pe);
      r.pads_begin.push_back(pb);
      continue;
    }
    // SAME_*: "pad the input so that output_shape[i] = input_shape[i] * strides[i]".
    const int64_t y = l.output_shape.empty() ? x[i + 2] * s : l.output_shape[i];
    const int64_t total = full - y;
    r.dst.push_back(y);
    r.pads_begin.push_back(l.auto_pad == "SAME_UPPER" ? total / 2 : total - total / 2);
  }
  return r;
}

void set_ints(onnx::NodeProto& node, const std::string& name, const std::vector<int64_t>& v) {
  if (v.empty()) return;
  onnx::AttributeProto* a = node.add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::INTS);
  for (int64_t e : v) a->add_ints(e);
}

void set_int(onnx::NodeProto& node, const std::string& name, int64_t v) {
  onnx::AttributeProto* a = node.add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::INT);
  a->set_i(v);
}

void set_string(onnx::NodeProto& node, const std::string& name, const std::string& v) {
  if (v.empty()) return;
  onnx::AttributeProto* a = node.add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::STRING);
  a->set_s(v);
}

class ModelBuilder {
 public:
  ModelBuilder() {
    model_.set_ir_version(8);
    model_.set_producer_name("deconvjit_tests");
    for (const char* domain : {"", "com.example"}) {
      onnx::OperatorSetIdProto* opset = model_.add_opset_import();
      opset->set_domain(domain);
      opset->set_version(*domain ? 1 : 13);
    }
    graph()->set_name("deconvolutions");
  }

  // A graph input; a negative dimension becomes the symbolic batch size "N".
  void input(const std::string& name, const std::vector<int64_t>& dims, int type = onnx::TensorProto::FLOAT) {
    onnx::TypeProto_Tensor* t = typed(graph()->add_input(), name, type);
    for (int64_t d : dims) {
      onnx::TensorShapeProto::Dimension* dim = t->mutable_shape()->add_dim();
      if (d < 0) dim->set_dim_param("N");
      else dim->set_dim_value(d);
    }
  }
  // A float initializer of zeros: real data, so that the file has the size and layout of an exported model.
  void initializer(const std::string& name, const std::vector<int64_t>& dims) {
    onnx::TensorProto* t = graph()->add_initializer();
    t->set_name(name);
    t->set_data_type(onnx::TensorProto::FLOAT);
    int64_t elements = 1;
    for (int64_t d : dims) t->add_dims(d), elements *= d;
    t->set_raw_data(std::string(static_cast<size_t>(elements) * 4, '\0'));
  }
  // Makes initializer `name` (zeros) of element type `type`, 2 bytes an element for the 16-bit types.
  void retype_initializer(const std::string& name, int type) {
    for (onnx::TensorProto& t : *graph()->mutable_initializer()) {
      if (t.name() != name) continue;
      const size_t width = type == onnx::TensorProto::FLOAT ? 4 : 2;
      t.set_data_type(type);
      t.set_raw_data(std::string(t.raw_data().size() / 4 * width, '\0'));
    }
  }
  onnx::NodeProto& node(const std::string& op, const std::string& name, const std::vector<std::string>& inputs,
                        const std::string& output, int type = onnx::TensorProto::FLOAT) {
    onnx::NodeProto* n = graph()->add_node();
    n->set_op_type(op);
    n->set_name(name);
    for (const std::string& i : inputs) n->add_input(i);
    n->add_output(output);
    typed(graph()->add_output(), output, type);  // no shape: inference supplies it
    return *n;
  }
  // ConvTranspose `l` reading `x` of element type `type`; returns its output's name.
  std::string conv_transpose(const OnnxLayer& l, const std::string& x, int type = onnx::TensorProto::FLOAT) {
    initializer("w_" + l.name, l.w);
    std::vector<std::string> inputs{x, "w_" + l.name};
    if (l.bias) initializer("b_" + l.name, {l.w[1] * l.group}), inputs.push_back("b_" + l.name);
    onnx::NodeProto& n = node("ConvTranspose", l.name, inputs, "y_" + l.name, type);
    set_ints(n, "strides", l.strides);
    set_ints(n, "pads", l.pads);
    set_ints(n, "output_padding", l.output_padding);
    set_ints(n, "output_shape", l.output_shape);
    set_string(n, "auto_pad", l.auto_pad);
    if (l.group != 1) set_int(n, "group", l.group);
    return n.output(0);
  }
  std::string bytes() const { return model_.SerializeAsString(); }
  void write(const fs::path& path) const { std::ofstream(path, std::ios::binary) << bytes(); }

 private:
  onnx::GraphProto* graph() { return model_.mutable_graph(); }
  static onnx::TypeProto_Tensor* typed(onnx::ValueInfoProto* v, const std::string& name, int type) {
    v->set_name(name);
    onnx::TypeProto_Tensor* t = v->mutable_type()->mutable_tensor_type();
    t->set_elem_type(type);
    return t;
  }
  onnx::ModelProto model_;
};

// The seeds' three examples (semantics.md section 4) in ONNX spelling, a layer fed by another one (its
// shape known only through ONNX shape inference), a grouped layer with asymmetric pads, and then both SAME
// modes and output_shape (NOTSET and SAME_UPPER), each with an odd total_padding, which tells the two ways
// of splitting it apart.
std::vector<OnnxLayer> onnx_layers() {
  std::vector<OnnxLayer> v(9);
  v[0] = {"example1", {1, 20, 224, 224}, {20, 10, 3, 3}, {2, 2}, {1, 1, 1, 1}, {}, {}, 1, "", true};
  v[1] = {"example2", {1, 20, 2, 2}, {20, 10, 3, 3}, {3, 3}, {}, {2, 2}, {}, 1, ""};
  v[2] = {"after_example2", {}, {10, 4, 2, 2}, {2, 2}, {}, {}, {}, 1, ""};
  v[3] = {"example3", {1, 20, 224, 224}, {20, 10, 3, 3}, {1, 1}, {}, {}, {}, 1, "VALID"};
  v[4] = {"grouped", {1, 8, 6, 6}, {8, 3, 3, 3}, {2, 2}, {1, 2, 0, 3}, {}, {}, 2, ""};  // ONNX order: begins, ends
  // Different X sizes, so that a swap of the two SAME modes cannot give the same set of entries.
  v[5] = {"same_upper", {1, 4, 5, 5}, {4, 2, 3, 3}, {2, 2}, {}, {}, {}, 1, "SAME_UPPER"};
  v[6] = {"same_lower", {1, 4, 7, 7}, {4, 2, 3, 3}, {2, 2}, {}, {}, {}, 1, "SAME_LOWER"};
  v[7] = {"output_shape", {1, 20, 224, 224}, {20, 10, 3, 3}, {2, 2}, {}, {}, {448, 448}, 1, ""};
  v[8] = {"same_upper_shape", {1, 4, 6, 6}, {4, 2, 3, 3}, {2, 2}, {}, {}, {12, 12}, 1, "SAME_UPPER"};
  return v;
}

using Summary = std::tuple<std::vector<int64_t>, std::vector<int64_t>, std::vector<int64_t>, std::vector<int64_t>>;

TEST_F(WarmOnnx, ConvTransposeNodesBecomeKernelsWithOnnxShapesAndPads) {
  ModelBuilder model;
  std::set<Summary> want;
  std::vector<int64_t> previous_dst;
  std::string previous_out;
  for (const OnnxLayer& l : onnx_layers()) {
    std::string x = "x_" + l.name;
    std::vector<int64_t> x_shape = l.x;
    if (l.x.empty()) {
      x = model.node("Relu", "relu_" + l.name, {previous_out}, "relu_" + l.name).output(0);
      x_shape = previous_dst;
    } else {
      model.input(x, l.x);
    }
    previous_out = model.conv_transpose(l, x);
    const OnnxResult r = onnx_result(x_shape, l);
    previous_dst = r.dst;
    want.insert({x_shape, l.w, r.dst, r.pads_begin});
  }
  model.write(path("model.onnx"));

  const Result dry = warm(path("model.onnx"), " --dry-run");
  EXPECT_EQ(dry.code, 0) << dry.out << dry.err;
  for (const OnnxLayer& l : onnx_layers())
    EXPECT_NE(dry.out.find("compile  " + path("model.onnx").string() + ":" + l.name), std::string::npos) << dry.out;

  const Result r = warm(path("model.onnx"));
  ASSERT_EQ(r.code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("9 kernels in " + cache_ + ": 9 compiled, 0 already cached, 0 failed"), std::string::npos)
      << r.out;
  std::set<Summary> got;
  for (const DiskCacheEntry& e : disk_cache_entries(cache_)) {
    ASSERT_TRUE(e.valid) << e.path << ": " << e.error;
    const Problem p = resolve(descriptor_from_json(e.descriptor));
    got.insert({p.src_shape, p.weights_shape, p.dst_shape, p.pads_begin});
  }
  EXPECT_EQ(got, want);
  const Result again = warm(path("model.onnx"));
  EXPECT_NE(again.out.find("0 compiled, 9 already cached, 0 failed"), std::string::npos) << again.out;
}

TEST_F(WarmOnnx, NodesThatCannotBeConvertedFailWithTheirReasonsAndExitOne) {
  ModelBuilder model;
  const OnnxLayer fine{"fine", {1, 4, 5, 5}, {4, 2, 3, 3}, {2, 2}, {}, {}, {}, 1, ""};
  model.input("x_fine", fine.x);
  model.conv_transpose(fine, "x_fine");
  OnnxLayer dynamic = fine, mixed = fine, kernel = fine, dbl = fine, unknown = fine;
  dynamic.name = "dynamic", mixed.name = "pads_and_same", kernel.name = "kernel_shape", dbl.name = "double";
  unknown.name = "unknown_shape";
  model.input("x_dynamic", {-1, 4, 5, 5});
  model.conv_transpose(dynamic, "x_dynamic");
  mixed.pads = {1, 1, 1, 1}, mixed.auto_pad = "SAME_UPPER";
  model.conv_transpose(mixed, "x_fine");
  set_ints(model.node("ConvTranspose", "kernel_shape", {"x_fine", "w_fine"}, "y_k"), "kernel_shape", {2, 2});
  model.input("x_double", fine.x, onnx::TensorProto::DOUBLE);
  model.conv_transpose(dbl, "x_double", onnx::TensorProto::DOUBLE);
  // An operator ONNX shape inference does not know, so nothing downstream has a shape.
  model.node("Mystery", "mystery", {"x_fine"}, "x_unknown").set_domain("com.example");
  model.conv_transpose(unknown, "x_unknown");
  model.write(path("bad_nodes.onnx"));

  const Result r = warm(path("bad_nodes.onnx"));
  EXPECT_EQ(r.code, 1) << r.err;
  EXPECT_NE(r.out.find("1 compiled, 0 already cached, 5 failed"), std::string::npos) << r.out;
  const std::string failed = "failed: " + path("bad_nodes.onnx").string() + ":";
  for (const std::string& line :
       {failed + "dynamic: input X 'x_dynamic' has a dynamic dimension 0 ('N'); only static shapes compile",
        failed + "pads_and_same: pads [1,1,1,1] cannot be combined with auto_pad SAME_UPPER",
        failed + "kernel_shape: kernel_shape [2,2] does not match the spatial sizes of W [4,2,3,3]",
        failed + "double: input X has element type DOUBLE",
        failed + "unknown_shape: input X 'x_unknown' has no known shape"})
    EXPECT_NE(r.out.find(line), std::string::npos) << line << "\n" << r.out;
  EXPECT_EQ(r.out.find("shape inference failed"), std::string::npos) << r.out;  // the model is consistent
}

TEST_F(WarmOnnx, ADynamicBatchFailsEveryNodeItReaches) {
  ModelBuilder model;
  model.input("x", {-1, 20, 2, 2});
  const std::string y = model.conv_transpose({"first", {}, {20, 10, 3, 3}, {3, 3}}, "x");
  model.conv_transpose({"second", {}, {10, 4, 2, 2}, {2, 2}}, y);
  model.write(path("dynamic.onnx"));
  const Result r = warm(path("dynamic.onnx"));
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.out.find("0 kernels in " + cache_ + ": 0 compiled, 0 already cached, 2 failed"), std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find(":first: input X 'x' has a dynamic dimension 0 ('N')"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find(":second: input X 'y_first' has a dynamic dimension 0"), std::string::npos) << r.out;
}

// ONNX 1.12 shape inference throws on a declared type it disagrees with; the importer must then still
// convert the nodes whose shapes the model declares, and say why the others have none.
TEST_F(WarmOnnx, WhenShapeInferenceFailsDeclaredShapesStillCompile) {
  ModelBuilder model;
  model.input("x", {1, 20, 2, 2});
  const std::string y = model.conv_transpose({"first", {}, {20, 10, 3, 3}, {3, 3}}, "x", onnx::TensorProto::DOUBLE);
  model.conv_transpose({"second", {}, {10, 4, 2, 2}, {2, 2}}, y);
  model.write(path("inconsistent.onnx"));
  const Result r = warm(path("inconsistent.onnx"));
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.out.find("1 compiled, 0 already cached, 1 failed"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find(":second: input X 'y_first' has no known shape; only static shapes compile ahead of time "
                       "(ONNX shape inference failed: "),
            std::string::npos) << r.out;
}

TEST_F(WarmOnnx, CorruptFilesAreRefusedWithAClearError) {
  ModelBuilder model;
  model.input("x", {1, 20, 2, 2});
  model.conv_transpose({"layer", {}, {20, 10, 3, 3}, {3, 3}}, "x");
  const std::string bytes = model.bytes();
  std::ofstream(path("truncated.onnx"), std::ios::binary) << bytes.substr(0, bytes.size() / 2);
  std::ofstream(path("garbage.onnx"), std::ios::binary) << std::string("\x0a\xff\xff\xff\x7fnot a model", 16);
  std::ofstream(path("empty.onnx"), std::ios::binary) << "";
  for (const char* name : {"truncated.onnx", "garbage.onnx", "empty.onnx"}) {
    const Result r = warm(path(name));
    EXPECT_EQ(r.code, 2) << name << ": " << r.out << r.err;
    EXPECT_EQ(r.err.rfind("error: '" + path(name).string() + "' is not", 0), 0u) << r.err;
    EXPECT_NE(r.err.find("ONNX model"), std::string::npos) << r.err;
    EXPECT_FALSE(fs::exists(cache_)) << name;
  }
  EXPECT_EQ(warm(path("missing.onnx")).code, 2);
}

// FLOAT16 and BFLOAT16 on X and W become the descriptor's dtype; X and W of different types fail as the
// descriptor's mismatch. The dry run shows the canonical descriptors, so this holds before the kernels exist;
// the warmed entries are checked once a kernel for the type compiles.
TEST_F(WarmOnnx, HalfPrecisionNodesBecomeDescriptorsOfTheirType) {
  ModelBuilder model;
  const OnnxLayer f16{"f16", {1, 4, 5, 5}, {4, 2, 3, 3}, {2, 2}, {}, {}, {}, 1, ""};
  OnnxLayer bf16 = f16, mixed = f16;
  bf16.name = "bf16", bf16.x = {1, 4, 6, 6}, mixed.name = "mixed", mixed.x = {1, 4, 7, 7};
  for (auto [l, x_type, w_type] : {std::tuple{f16, onnx::TensorProto::FLOAT16, onnx::TensorProto::FLOAT16},
                                   std::tuple{bf16, onnx::TensorProto::BFLOAT16, onnx::TensorProto::BFLOAT16},
                                   std::tuple{mixed, onnx::TensorProto::FLOAT16, onnx::TensorProto::FLOAT}}) {
    model.input("x_" + l.name, l.x, x_type);
    model.conv_transpose(l, "x_" + l.name, x_type);
    model.retype_initializer("w_" + l.name, w_type);
  }
  model.write(path("half.onnx"));

  const Result dry = warm(path("half.onnx"), " --dry-run");
  EXPECT_EQ(dry.code, 1) << dry.out << dry.err;  // the mixed node
  const std::string label = path("half.onnx").string() + ":";
  for (auto [type, src] : {std::pair{"f16", "[1,4,5,5]"}, std::pair{"bf16", "[1,4,6,6]"}}) {
    const size_t at = dry.out.find("compile  " + label + type + " ");
    ASSERT_NE(at, std::string::npos) << dry.out;
    const std::string line = dry.out.substr(at, dry.out.find('\n', at) - at);
    EXPECT_NE(line.find(std::string("{\"src\":") + src), std::string::npos) << line;
    EXPECT_NE(line.find(std::string("\"dtype\":\"") + type + "\""), std::string::npos) << line;
  }
  EXPECT_NE(dry.out.find("failed: " + label + "mixed: dtype: data dtype (f16) and weights dtype (f32) differ"),
            std::string::npos) << dry.out;

  const Result r = warm(path("half.onnx"));
  if (r.out.find("not supported") != std::string::npos) GTEST_SKIP() << "no 16-bit kernels yet:\n" << r.out;
  EXPECT_NE(r.out.find("2 compiled, 0 already cached, 1 failed"), std::string::npos) << r.out;
  std::set<std::string> types;
  for (const DiskCacheEntry& e : disk_cache_entries(cache_)) types.insert(to_string(resolve(descriptor_from_json(e.descriptor)).dtype));
  EXPECT_EQ(types, (std::set<std::string>{"bf16", "f16"}));
}

#else

TEST_F(WarmOnnx, ThisBuildSaysItHasNoOnnxSupport) {
  std::ofstream(path("model.onnx")) << "x";
  const Result r = warm(path("model.onnx"));
  EXPECT_EQ(r.code, 4);
  EXPECT_NE(r.err.find("no ONNX support"), std::string::npos) << r.err;
}

#endif

}  // namespace
}  // namespace deconvjit::testing
