// The contract between a graph's instructions and the kernels they call: each kernel instruction
// passes exactly the tensors its kernel declared (kernel_abi.h: hidet_signature_<name>) — as many,
// of the declared dtypes and shapes, its symbolic dimensions bound to the symbols of the same names.
// Checked when a graph loads (static shapes) and when a set of symbol values is first planned
// (symbolic ones), so no kernel is ever given a buffer smaller or other than it was built for.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "artifact.hpp"

namespace hidet {
namespace artifact {

// Per instruction, the shape each of its buffers (inputs, then outputs) must have, over the manifest's
// symbols (the kernel's own dims renamed through the instruction's "dims"); empty for copy instructions.
using DeclaredShapes = std::vector<std::vector<std::vector<Dim>>>;

// Check every kernel instruction against its kernel's signature (`signatures[k]` for manifest kernel k):
// buffer count, dtypes, ranks, the binding of dims (count and names), static dimensions, and that no
// tensor is written twice or both read and written by one instruction. Throws hidet::Error naming the
// artifact, the instruction and the field.
DeclaredShapes bind_kernels(const Manifest& m, const std::vector<KernelSignature>& signatures,
                            const std::string& source);

// The declared shapes at symbol values `symbols` equal the tensors' shapes there (throws naming the
// instruction, the buffer and both shapes).
void check_shapes(const Manifest& m, const DeclaredShapes& declared, const std::vector<int64_t>& symbols,
                  const std::string& source);

}  // namespace artifact
}  // namespace hidet
