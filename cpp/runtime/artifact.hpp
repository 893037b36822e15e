// Reading compiled-graph artifacts (docs/artifact.md): the container (entries with FNV-1a-64
// hashes) and the manifest, both validated completely before anything runs. Every error is a
// hidet::Error whose message starts with "artifact <source> " (the file path, or "<memory>").
// Internal to libhidet_runtime.so.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "hidet/dlpack.h"

namespace hidet {
namespace artifact {

constexpr char kMagic[8] = {'H', 'I', 'D', 'E', 'T', 'A', 'R', 'T'};
constexpr uint32_t kContainerVersion = 1;
constexpr int64_t kFormatVersion = 2;     // written for graphs with symbolic dimensions
constexpr int64_t kMinFormatVersion = 1;  // static graphs are still written as version 1
constexpr uint64_t kEntryAlignment = 64;
constexpr uint64_t kWeightAlignment = 64;
constexpr uint64_t kArenaAlignment = 256;

struct Entry {
  std::string name;
  const uint8_t* data = nullptr;  // into the container's bytes
  uint64_t size = 0;
  uint64_t hash = 0;  // FNV-1a-64 of the bytes (checked)
};

// The checked entries of a container. Its bytes are mapped from a file (kept mapped while the
// Container lives) or borrowed from the caller's buffer (which must outlive the Container).
class Container {
 public:
  // Read and check a file / a buffer: magic, container version, entry table, bounds, hashes.
  // `pinned_sha256` (64 hex digits, or nullptr for none): the whole file's pinned SHA-256, checked before
  // anything else is read (docs/runtime.md, "Trust").
  static std::unique_ptr<Container> open_file(const std::string& path, const char* pinned_sha256 = nullptr);
  // `check_hashes` false: the entries' hashes are neither read nor checked (bytes the caller's process has just
  // written with none: hidet_graph_load_built); everything else is checked as always.
  static std::unique_ptr<Container> from_memory(const void* data, uint64_t size, std::string source = "<memory>",
                                                const char* pinned_sha256 = nullptr, bool check_hashes = true);
  ~Container();
  Container(const Container&) = delete;
  Container& operator=(const Container&) = delete;

  const std::string& source() const { return source_; }
  const std::vector<Entry>& entries() const { return entries_; }
  const Entry* find(const std::string& name) const;  // nullptr when absent

 private:
  Container() = default;
  void parse(const uint8_t* data, uint64_t size, bool check_hashes = true);
  std::string source_;
  std::vector<Entry> entries_;
  void* mapping_ = nullptr;  // munmap'ed by the destructor
  uint64_t mapping_size_ = 0;
};

enum class StorageKind { Input, Output, Weight, Arena };

// One dimension of a shape: a constant, or (format version 2) an expression over the manifest's
// symbols in postfix form, e.g. batch * 8 as [symbol 0, const 8, op '*']. Division and modulo
// truncate, as C does (the kernels compute shapes the same way).
struct Dim {
  enum Kind : uint8_t { Const, Symbol, Op };
  struct Token {
    Kind kind;
    int64_t value;  // Const: the value; Symbol: its index in Manifest::symbols; Op: '+', '-', '*', '/' or '%'
  };
  std::vector<Token> postfix;

  bool is_static() const { return postfix.size() == 1 && postfix[0].kind == Const; }
  // The tokens separated by spaces, symbols by name: "16", "batch", "batch 8 *".
  std::string text(const std::vector<std::string>& symbols) const;
  // The value for symbol values `symbols`; throws hidet::Error on a division by zero.
  int64_t eval(const std::vector<int64_t>& symbols) const;
};

struct TensorSpec {
  std::string dtype;
  std::vector<int64_t> shape;  // -1 where a dimension is symbolic
  std::vector<Dim> dims;       // every dimension, static or not
  std::vector<std::string> dim_texts;  // each as Dim::text gives it (hidet_graph_dim_expr)
  bool symbolic = false;       // some dimension depends on symbols
  StorageKind storage = StorageKind::Arena;
  uint64_t offset = 0;  // weight: in weights.bin; arena (static graphs): in the arena
  uint64_t nbytes = 0;  // static tensors; symbolic ones: nbytes_at(symbols)
  uint64_t itemsize = 0;

  std::vector<int64_t> shape_at(const std::vector<int64_t>& symbols) const;
  uint64_t nbytes_at(const std::vector<int64_t>& symbols) const;  // throws for negative or huge shapes
};

struct IoSpec {
  std::string name;
  int32_t tensor = 0;
};

struct KernelSpec {
  std::string library;   // entry name, e.g. "kernels/0.so"
  std::string function;  // exported symbol, e.g. "launch"
  std::string name;      // for messages, e.g. "fused_matmul_add" (defaults to `function`)
};

// A kernel instruction (kernel >= 0) reads `inputs` and writes `outputs`; a copy instruction
// (kernel == -1) copies tensor inputs[0] into outputs[0].
struct Instruction {
  int32_t kernel = -1;
  std::vector<int32_t> inputs;
  std::vector<int32_t> outputs;
  std::vector<int32_t> dims;  // the kernel's `dims` argument: these symbols' values (indices into symbols)
};

struct Manifest {
  int64_t format_version = 0;
  std::string hidet_version;
  std::string target;  // "cpu" | "cuda"
  std::string arch;    // "sm_90" | "x86-64"
  std::vector<IoSpec> inputs, outputs;
  std::vector<TensorSpec> tensors;
  std::vector<KernelSpec> kernels;
  std::vector<Instruction> instructions;
  std::vector<std::string> symbols;  // names of the symbolic dimensions (format version 2)
  uint64_t arena_nbytes = 0;         // static graphs; symbolic ones plan their arena per set of symbol values
  uint64_t weights_nbytes = 0;
  std::string json;                  // manifest.json's text, as validated (for inspection: hidet_graph_describe)

  bool symbolic() const { return !symbols.empty(); }
};

// Bytes of one element of a dtype named as hidet names it; 0 for an unknown name.
// hidet's dtype names ("float16", "bool", ...): their DLPack type (false for an unknown name), the name
// of a DLPack type (nullptr for one hidet does not have) and the size in bytes (0 for an unknown name).
bool dtype_to_dl(const std::string& dtype, DLDataType* out);
const char* dtype_from_dl(DLDataType t);
uint64_t dtype_nbytes(const std::string& dtype);

// Parse manifest.json and check it against itself and the container (tensor ids in range, known
// dtypes and storages, weights and arena tensors within their memory, every input and output
// listed once, kernel libraries present).
Manifest read_manifest(const Container& container);

// What a kernel declared (kernel_abi.h: hidet_signature_<name>): each buffer's dtype and shape, the
// shape's symbols indexing `dims`, the kernel's own symbolic dimensions.
struct KernelSignature {
  struct Buffer {
    std::string dtype;
    bool has_shape = false;  // false: a pointer whose extent the kernel does not fix
    std::vector<Dim> shape;
  };
  std::vector<Buffer> buffers;
  std::vector<std::string> dims;
};

// Parse a kernel's signature text; errors start with `what` (e.g. "artifact g.hidet: kernel 0 ('matmul')").
KernelSignature read_signature(const char* text, const std::string& what);

}  // namespace artifact
}  // namespace hidet
