// Instructions against the kernels' declared signatures (kernel_contract.hpp).
#include "kernel_contract.hpp"

#include <set>

#include "hidet/runtime/error.hpp"

namespace hidet {
namespace artifact {
namespace {

// Buffer b of instruction `inst`: its tensor id and its field in the manifest ("inputs[1]", "outputs[0]").
std::pair<int32_t, std::string> buffer_of(const Instruction& inst, size_t b) {
  if (b < inst.inputs.size()) return {inst.inputs[b], str_cat("inputs[", b, "]")};
  size_t o = b - inst.inputs.size();
  return {inst.outputs[o], str_cat("outputs[", o, "]")};
}

std::string shape_text(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

std::string shape_text(const std::vector<Dim>& dims, const std::vector<std::string>& symbols) {
  std::string s = "[";
  for (size_t i = 0; i < dims.size(); ++i) s += (i ? ", " : "") + dims[i].text(symbols);
  return s + "]";
}

}  // namespace

DeclaredShapes bind_kernels(const Manifest& m, const std::vector<KernelSignature>& signatures,
                            const std::string& source) {
  DeclaredShapes declared(m.instructions.size());
  for (size_t i = 0; i < m.instructions.size(); ++i) {
    const Instruction& inst = m.instructions[i];
    if (inst.kernel < 0) continue;
    const KernelSignature& sig = signatures.at(static_cast<size_t>(inst.kernel));
    std::string at = str_cat("artifact ", source, ": instructions[", i, "] (kernel ", inst.kernel, " '",
                             m.kernels[inst.kernel].name, "')");
    size_t n = inst.inputs.size() + inst.outputs.size();
    HIDET_CHECK(sig.buffers.size() == n, at, ": the kernel takes ", sig.buffers.size(),
                " buffers (inputs and outputs), the instruction passes ", n);
    HIDET_CHECK(inst.dims.size() == sig.dims.size(), at, ": the kernel takes ", sig.dims.size(),
                " symbolic dimension(s), the instruction binds ", inst.dims.size());
    for (size_t j = 0; j < inst.dims.size(); ++j) {
      const std::string& bound = m.symbols.at(static_cast<size_t>(inst.dims[j]));
      HIDET_CHECK(bound == sig.dims[j], at, ": dims[", j, "] binds symbol '", bound, "' to the kernel's dimension '",
                  sig.dims[j], "'");
    }
    std::set<int32_t> written;
    for (int32_t t : inst.outputs) {
      HIDET_CHECK(written.insert(t).second, at, ": writes tensor ", t, " twice");
    }
    for (int32_t t : inst.inputs) {
      HIDET_CHECK(!written.count(t), at, ": reads and writes tensor ", t, " (kernels do not work in place)");
    }
    for (size_t b = 0; b < n; ++b) {
      auto [t, field] = buffer_of(inst, b);
      const TensorSpec& spec = m.tensors[t];
      const KernelSignature::Buffer& want = sig.buffers[b];
      HIDET_CHECK(spec.dtype == want.dtype, at, ".", field, ": tensor ", t, " is ", spec.dtype,
                  ", the kernel's buffer ", b, " is ", want.dtype);
      HIDET_CHECK(want.has_shape, at, ": the kernel does not declare the shape of its buffer ", b,
                  " (a graph's kernels must)");
      HIDET_CHECK(want.shape.size() == spec.dims.size(), at, ".", field, ": tensor ", t, " has ", spec.dims.size(),
                  " dimension(s) ", shape_text(spec.dims, m.symbols), ", the kernel's buffer ", b, " has ",
                  want.shape.size(), " ", shape_text(want.shape, sig.dims));
      std::vector<Dim> dims;
      for (const Dim& d : want.shape) {
        Dim renamed = d;
        for (Dim::Token& token : renamed.postfix) {
          if (token.kind == Dim::Symbol) token.value = inst.dims[static_cast<size_t>(token.value)];
        }
        dims.push_back(std::move(renamed));
      }
      for (size_t k = 0; k < dims.size(); ++k) {
        HIDET_CHECK(!dims[k].is_static() || !spec.dims[k].is_static() ||
                        dims[k].postfix[0].value == spec.dims[k].postfix[0].value,
                    at, ".", field, ": tensor ", t, " has shape ", shape_text(spec.dims, m.symbols),
                    ", the kernel's buffer ", b, " is ", shape_text(dims, m.symbols));
      }
      declared[i].push_back(std::move(dims));
    }
  }
  return declared;
}

void check_shapes(const Manifest& m, const DeclaredShapes& declared, const std::vector<int64_t>& symbols,
                  const std::string& source) {
  auto values = [&] {
    std::string s;
    for (size_t j = 0; j < symbols.size(); ++j) s += str_cat(j ? ", " : "", m.symbols[j], "=", symbols[j]);
    return s;
  };
  for (size_t i = 0; i < declared.size(); ++i) {
    const Instruction& inst = m.instructions[i];
    for (size_t b = 0; b < declared[i].size(); ++b) {
      auto [t, field] = buffer_of(inst, b);
      std::vector<int64_t> want, have = m.tensors[t].shape_at(symbols);
      for (const Dim& d : declared[i][b]) want.push_back(d.eval(symbols));
      HIDET_CHECK(want == have, "artifact ", source, ": instructions[", i, "] (kernel ", inst.kernel, " '",
                  m.kernels[inst.kernel].name, "').", field, ": tensor ", t, " has shape ", shape_text(have),
                  symbols.empty() ? "" : str_cat(" at ", values()), ", the kernel's buffer ", b, " is ",
                  shape_text(want));
    }
  }
}

}  // namespace artifact
}  // namespace hidet
