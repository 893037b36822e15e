// manifest.json of an artifact (docs/artifact.md): parsed with the strict JSON parser and checked
// completely, so the executor can trust every id, offset and size. Unknown keys are ignored (newer
// writers may add informational ones); missing or ill-typed known keys are errors naming the path,
// e.g. "artifact g.hidet: invalid manifest: tensors[3].dtype: unknown dtype 'float8'".
#include <algorithm>
#include <cctype>
#include <cstring>
#include <limits>
#include <set>

#include "artifact.hpp"
#include "hidet/runtime/error.hpp"
#include "json.hpp"

namespace hidet {
namespace artifact {
namespace {

constexpr uint64_t kMaxBytes = uint64_t(1) << 56;  // no tensor or memory region is larger

const char* storage_name(StorageKind kind) {
  switch (kind) {
    case StorageKind::Input: return "input";
    case StorageKind::Output: return "output";
    case StorageKind::Weight: return "weight";
    case StorageKind::Arena: return "arena";
  }
  return "?";
}

class Reader {
 public:
  // Errors read "<prefix><path>: <what>", e.g. "artifact g.hidet: invalid manifest: tensors[3].dtype: ...".
  explicit Reader(std::string prefix) : prefix_(std::move(prefix)) {}

  [[noreturn]] void fail(const std::string& path, const std::string& what) const {
    throw Error(str_cat(prefix_, path, ": ", what));
  }


  static std::string join(const std::string& path, const char* key) { return path.empty() ? key : path + "." + key; }
  static std::string index(const std::string& path, size_t i) { return str_cat(path, "[", i, "]"); }

  const json::Value& object(const json::Value& v, const std::string& path) const {
    if (!v.is_object()) fail(path, str_cat("expected an object, got ", json::type_name(v.type())));
    return v;
  }
  const std::vector<json::Value>& array(const json::Value& v, const std::string& path) const {
    if (!v.is_array()) fail(path, str_cat("expected an array, got ", json::type_name(v.type())));
    return v.as_array();
  }
  const std::string& string(const json::Value& v, const std::string& path) const {
    if (!v.is_string()) fail(path, str_cat("expected a string, got ", json::type_name(v.type())));
    return v.as_string();
  }
  int64_t integer(const json::Value& v, const std::string& path, int64_t lo = 0,
                  int64_t hi = std::numeric_limits<int64_t>::max()) const {
    if (!v.is_int()) fail(path, str_cat("expected an integer, got ", json::type_name(v.type())));
    int64_t i = v.as_int();
    if (i < lo || i > hi) fail(path, str_cat(i, " is out of range [", lo, ", ", hi, "]"));
    return i;
  }
  // The member `key` of the object at `path` (which must have it).
  const json::Value& field(const json::Value& obj, const char* key, const std::string& path) const {
    const json::Value* v = obj.find(key);
    if (v == nullptr) fail(path.empty() ? "(top level)" : path, str_cat("missing \"", key, "\""));
    return *v;
  }

  // A tensor id in [0, num_tensors).
  int32_t tensor_id(const json::Value& v, const std::string& path, size_t num_tensors) const {
    if (!v.is_int()) fail(path, str_cat("expected a tensor id, got ", json::type_name(v.type())));
    int64_t id = v.as_int();
    if (id < 0 || static_cast<uint64_t>(id) >= num_tensors) {
      fail(path, str_cat("tensor id ", id, " is out of range (the manifest has ", num_tensors, " tensors)"));
    }
    return static_cast<int32_t>(id);
  }

 private:
  std::string prefix_;
};

// A dimension: an integer, a symbol's name, or (an expression) an array of postfix tokens: integers,
// symbol names and the operators "+", "-", "*", "/", "%".
// `symbols`: the manifest's "symbols" (or, in a kernel's signature, its "dims").
Dim read_dim(const Reader& r, const json::Value& v, const std::string& path, const std::vector<std::string>& symbols,
             bool in_manifest = true) {
  auto symbol = [&](const std::string& name, const std::string& at) {
    for (size_t i = 0; i < symbols.size(); ++i) {
      if (symbols[i] == name) return Dim::Token{Dim::Symbol, static_cast<int64_t>(i)};
    }
    if (!in_manifest) r.fail(at, str_cat("unknown dimension '", name, "' (not in \"dims\")"));
    if (symbols.empty()) {
      r.fail(at, str_cat("symbolic dimension '", name, "' needs format version 2 and a \"symbols\" list"));
    }
    r.fail(at, str_cat("unknown symbol '", name, "' (not in \"symbols\")"));
  };
  Dim d;
  if (v.is_int()) {
    d.postfix.push_back({Dim::Const, r.integer(v, path)});
  } else if (v.is_string()) {
    d.postfix.push_back(symbol(v.as_string(), path));
  } else if (v.is_array()) {
    int depth = 0;
    const auto& tokens = v.as_array();
    for (size_t i = 0; i < tokens.size(); ++i) {
      std::string at = Reader::index(path, i);
      if (tokens[i].is_int()) {
        d.postfix.push_back({Dim::Const, tokens[i].as_int()});
        ++depth;
      } else if (tokens[i].is_string()) {
        const std::string& t = tokens[i].as_string();
        if (t.size() == 1 && std::string("+-*/%").find(t[0]) != std::string::npos) {
          if (depth < 2) r.fail(at, str_cat("operator '", t, "' lacks an operand"));
          d.postfix.push_back({Dim::Op, static_cast<int64_t>(t[0])});
          --depth;
        } else {
          d.postfix.push_back(symbol(t, at));
          ++depth;
        }
      } else {
        r.fail(at, str_cat("expected an integer, a symbol or an operator, got ", json::type_name(tokens[i].type())));
      }
    }
    if (depth != 1) r.fail(path, "the postfix expression does not reduce to one value");
  } else {
    r.fail(path, str_cat("expected a dimension (an integer, a symbol or a postfix expression), got ",
                         json::type_name(v.type())));
  }
  return d;
}

TensorSpec read_tensor(const Reader& r, const json::Value& v, const std::string& path,
                       const std::vector<std::string>& symbols) {
  r.object(v, path);
  TensorSpec t;
  t.dtype = r.string(r.field(v, "dtype", path), Reader::join(path, "dtype"));
  uint64_t nbytes = dtype_nbytes(t.dtype);
  if (nbytes == 0) r.fail(Reader::join(path, "dtype"), str_cat("unknown dtype '", t.dtype, "'"));
  t.itemsize = nbytes;
  std::string shape_path = Reader::join(path, "shape");
  const auto& dims = r.array(r.field(v, "shape", path), shape_path);
  for (size_t i = 0; i < dims.size(); ++i) {
    Dim dim = read_dim(r, dims[i], Reader::index(shape_path, i), symbols);
    t.dim_texts.push_back(dim.text(symbols));
    if (!dim.is_static()) {
      t.symbolic = true;
      t.shape.push_back(-1);
      t.dims.push_back(std::move(dim));
      continue;
    }
    int64_t d = dim.postfix[0].value;
    if (d < 0) r.fail(Reader::index(shape_path, i), str_cat(d, " is negative"));
    t.shape.push_back(d);
    t.dims.push_back(std::move(dim));
    if (d != 0 && nbytes > kMaxBytes / static_cast<uint64_t>(d)) r.fail(shape_path, "the tensor is too large");
    nbytes *= static_cast<uint64_t>(d);
  }
  if (t.symbolic) nbytes = 0;
  t.nbytes = nbytes;
  const std::string& storage = r.string(r.field(v, "storage", path), Reader::join(path, "storage"));
  if (storage == "input") t.storage = StorageKind::Input;
  else if (storage == "output") t.storage = StorageKind::Output;
  else if (storage == "weight") t.storage = StorageKind::Weight;
  else if (storage == "arena") t.storage = StorageKind::Arena;
  else r.fail(Reader::join(path, "storage"), str_cat("unknown storage '", storage, "' (expected input, output, weight or arena)"));
  if (t.symbolic && t.storage == StorageKind::Weight) r.fail(shape_path, "a weight cannot have symbolic dimensions");
  if (t.storage == StorageKind::Weight || (t.storage == StorageKind::Arena && symbols.empty())) {
    uint64_t align = t.storage == StorageKind::Weight ? kWeightAlignment : kArenaAlignment;
    t.offset = static_cast<uint64_t>(r.integer(r.field(v, "offset", path), Reader::join(path, "offset"), 0, kMaxBytes));
    if (t.offset % align != 0) r.fail(Reader::join(path, "offset"), str_cat(t.offset, " is not a multiple of ", align));
  }
  return t;
}

std::vector<IoSpec> read_io(const Reader& r, const json::Value& root, const char* key, StorageKind kind,
                            const std::vector<TensorSpec>& tensors) {
  std::vector<IoSpec> result;
  std::set<int32_t> seen;
  const auto& items = r.array(r.field(root, key, ""), key);
  for (size_t i = 0; i < items.size(); ++i) {
    std::string path = Reader::index(key, i);
    r.object(items[i], path);
    IoSpec io;
    io.name = r.string(r.field(items[i], "name", path), Reader::join(path, "name"));
    io.tensor = r.tensor_id(r.field(items[i], "tensor", path), Reader::join(path, "tensor"), tensors.size());
    if (tensors[io.tensor].storage != kind) {
      r.fail(path, str_cat("tensor ", io.tensor, " has storage '", storage_name(tensors[io.tensor].storage),
                           "', expected '", storage_name(kind), "'"));
    }
    if (!seen.insert(io.tensor).second) r.fail(path, str_cat("tensor ", io.tensor, " is listed twice"));
    result.push_back(io);
  }
  for (size_t t = 0; t < tensors.size(); ++t) {
    if (tensors[t].storage == kind && !seen.count(static_cast<int32_t>(t))) {
      r.fail(Reader::index("tensors", t), str_cat("has storage '", storage_name(kind), "' but is not listed in \"", key, "\""));
    }
  }
  return result;
}

std::vector<int32_t> read_ids(const Reader& r, const json::Value& obj, const char* key, const std::string& path,
                              size_t num_tensors) {
  std::string ids_path = Reader::join(path, key);
  std::vector<int32_t> ids;
  const auto& items = r.array(r.field(obj, key, path), ids_path);
  for (size_t i = 0; i < items.size(); ++i) ids.push_back(r.tensor_id(items[i], Reader::index(ids_path, i), num_tensors));
  return ids;
}

Instruction read_instruction(const Reader& r, const json::Value& v, const std::string& path, const Manifest& m) {
  r.object(v, path);
  Instruction inst;
  size_t n = m.tensors.size();
  if (const json::Value* k = v.find("kernel")) {
    inst.kernel = static_cast<int32_t>(
        r.integer(*k, Reader::join(path, "kernel"), 0, static_cast<int64_t>(m.kernels.size()) - 1));
    inst.inputs = read_ids(r, v, "inputs", path, n);
    inst.outputs = read_ids(r, v, "outputs", path, n);
    if (const json::Value* d = v.find("dims")) {
      std::string dims_path = Reader::join(path, "dims");
      const auto& items = r.array(*d, dims_path);
      for (size_t i = 0; i < items.size(); ++i) {
        inst.dims.push_back(static_cast<int32_t>(
            r.integer(items[i], Reader::index(dims_path, i), 0, static_cast<int64_t>(m.symbols.size()) - 1)));
      }
    }
  } else if (const json::Value* c = v.find("copy")) {
    inst.inputs = {r.tensor_id(*c, Reader::join(path, "copy"), n)};
    inst.outputs = {r.tensor_id(r.field(v, "to", path), Reader::join(path, "to"), n)};
    const TensorSpec& src = m.tensors[inst.inputs[0]];
    const TensorSpec& dst = m.tensors[inst.outputs[0]];
    if (!src.symbolic && !dst.symbolic && src.nbytes != dst.nbytes) {
      r.fail(path, str_cat("copies tensor ", inst.inputs[0], " (", m.tensors[inst.inputs[0]].nbytes,
                           " bytes) into tensor ", inst.outputs[0], " (", m.tensors[inst.outputs[0]].nbytes, " bytes)"));
    }
  } else {
    r.fail(path, "expected a \"kernel\" or a \"copy\" instruction");
  }
  for (int32_t t : inst.outputs) {
    StorageKind s = m.tensors[t].storage;
    if (s != StorageKind::Output && s != StorageKind::Arena) {
      r.fail(path, str_cat("writes tensor ", t, ", which has storage '", storage_name(s), "' (read-only)"));
    }
  }
  return inst;
}

}  // namespace

Manifest read_manifest(const Container& container) {
  const std::string& source = container.source();
  const Entry* entry = container.find("manifest.json");
  HIDET_CHECK(entry != nullptr, "artifact ", source, " has no manifest.json entry");
  json::Value root;
  try {
    root = json::parse(reinterpret_cast<const char*>(entry->data), entry->size);
  } catch (const json::ParseError& e) {
    throw Error(str_cat("artifact ", source, ": manifest.json is not valid JSON: ", e.what()));
  }
  Reader r(str_cat("artifact ", source, ": invalid manifest: "));
  HIDET_CHECK(root.is_object(), "artifact ", source, ": invalid manifest: expected a JSON object, got ",
              json::type_name(root.type()));

  // The version first: a newer format may differ anywhere else.
  Manifest m;
  m.json.assign(reinterpret_cast<const char*>(entry->data), entry->size);
  const json::Value& version = r.field(root, "format_version", "");
  m.format_version = r.integer(version, "format_version", std::numeric_limits<int64_t>::min());
  HIDET_CHECK(m.format_version >= kMinFormatVersion && m.format_version <= kFormatVersion, "artifact ", source,
              " was written by format version ", m.format_version, "; this runtime reads versions ", kMinFormatVersion,
              " to ", kFormatVersion);
  if (const json::Value* v = root.find("symbols")) {
    if (m.format_version < 2) r.fail("symbols", "symbolic dimensions need format version 2");
    const auto& names = r.array(*v, "symbols");
    std::set<std::string> seen;
    for (size_t i = 0; i < names.size(); ++i) {
      std::string path = Reader::index("symbols", i);
      const std::string& name = r.string(names[i], path);
      bool identifier = !name.empty() && !std::isdigit(static_cast<unsigned char>(name[0]));
      for (char c : name) identifier = identifier && (std::isalnum(static_cast<unsigned char>(c)) || c == '_');
      if (!identifier) r.fail(path, str_cat("'", name, "' is not a name (letters, digits and _)"));
      if (!seen.insert(name).second) r.fail(path, str_cat("'", name, "' is listed twice"));
      m.symbols.push_back(name);
    }
  }
  if (const json::Value* v = root.find("hidet_version")) m.hidet_version = r.string(*v, "hidet_version");
  m.target = r.string(r.field(root, "target", ""), "target");
  if (m.target != "cpu" && m.target != "cuda") r.fail("target", str_cat("unknown target '", m.target, "' (expected cpu or cuda)"));
  m.arch = r.string(r.field(root, "arch", ""), "arch");
  m.arena_nbytes = static_cast<uint64_t>(r.integer(r.field(root, "arena_nbytes", ""), "arena_nbytes", 0, kMaxBytes));
  m.weights_nbytes = static_cast<uint64_t>(r.integer(r.field(root, "weights_nbytes", ""), "weights_nbytes", 0, kMaxBytes));

  const auto& tensors = r.array(r.field(root, "tensors", ""), "tensors");
  for (size_t i = 0; i < tensors.size(); ++i) {
    std::string path = Reader::index("tensors", i);
    TensorSpec t = read_tensor(r, tensors[i], path, m.symbols);
    // Both operands are below 2^57, so the sums cannot overflow.
    if (t.storage == StorageKind::Weight && t.offset + t.nbytes > m.weights_nbytes) {
      r.fail(path, str_cat("weight bytes [", t.offset, ", ", t.offset + t.nbytes, ") lie outside weights_nbytes (",
                           m.weights_nbytes, ")"));
    }
    if (t.storage == StorageKind::Arena && !m.symbolic() && t.offset + t.nbytes > m.arena_nbytes) {
      r.fail(path, str_cat("arena bytes [", t.offset, ", ", t.offset + t.nbytes, ") lie outside arena_nbytes (",
                           m.arena_nbytes, ")"));
    }
    m.tensors.push_back(std::move(t));
  }
  // A static arena is no larger than its tensors need (as the builder plans it: each at least one alignment
  // unit): a manifest cannot make the loader allocate memory it does not justify.
  if (!m.symbolic()) {
    uint64_t needed = 0;
    for (const TensorSpec& t : m.tensors) {
      if (t.storage != StorageKind::Arena) continue;
      uint64_t rounded = (t.nbytes + kArenaAlignment - 1) / kArenaAlignment * kArenaAlignment;
      uint64_t size = std::max<uint64_t>(kArenaAlignment, rounded);
      needed = std::max(needed, t.offset + size);  // both below 2^57: no overflow
    }
    if (m.arena_nbytes > needed) {
      r.fail("arena_nbytes", str_cat(m.arena_nbytes, " is more than the arena tensors need (", needed, " bytes)"));
    }
  }
  const Entry* weights = container.find("weights.bin");
  uint64_t weights_size = weights ? weights->size : 0;
  HIDET_CHECK(weights_size == m.weights_nbytes, "artifact ", source, ": weights.bin has ", weights_size,
              " bytes but the manifest's weights_nbytes is ", m.weights_nbytes);

  m.inputs = read_io(r, root, "inputs", StorageKind::Input, m.tensors);
  m.outputs = read_io(r, root, "outputs", StorageKind::Output, m.tensors);

  const auto& kernels = r.array(r.field(root, "kernels", ""), "kernels");
  for (size_t i = 0; i < kernels.size(); ++i) {
    std::string path = Reader::index("kernels", i);
    r.object(kernels[i], path);
    KernelSpec k;
    k.library = r.string(r.field(kernels[i], "library", path), Reader::join(path, "library"));
    k.function = r.string(r.field(kernels[i], "function", path), Reader::join(path, "function"));
    k.name = k.function;
    if (const json::Value* v = kernels[i].find("name")) k.name = r.string(*v, Reader::join(path, "name"));
    if (container.find(k.library) == nullptr) r.fail(path, str_cat("library ", k.library, " is not in the artifact"));
    if (k.function.empty()) r.fail(Reader::join(path, "function"), "empty function name");
    m.kernels.push_back(std::move(k));
  }

  const auto& instructions = r.array(r.field(root, "instructions", ""), "instructions");
  std::set<int32_t> written;
  for (size_t i = 0; i < instructions.size(); ++i) {
    std::string path = Reader::index("instructions", i);
    m.instructions.push_back(read_instruction(r, instructions[i], path, m));
    // Written before read: an arena or output tensor an instruction reads must have been written by an
    // earlier one (else a kernel reads uninitialised memory, or, symbolic, an arena slot never planned).
    // Static empty tensors are exempt: the builder leaves out the instructions that would write them.
    const Instruction& inst = m.instructions.back();
    for (size_t k = 0; k < inst.inputs.size(); ++k) {
      int32_t t = inst.inputs[k];
      const TensorSpec& spec = m.tensors[t];
      bool readable = spec.storage == StorageKind::Input || spec.storage == StorageKind::Weight ||
                      written.count(t) || (!spec.symbolic && spec.nbytes == 0);
      if (!readable) {
        r.fail(inst.kernel < 0 ? Reader::join(path, "copy") : Reader::index(Reader::join(path, "inputs"), k),
               str_cat("reads tensor ", t, " (storage '", storage_name(spec.storage),
                       "') before any instruction writes it"));
      }
    }
    for (int32_t t : inst.outputs) written.insert(t);
  }
  for (size_t i = 0; i < m.outputs.size(); ++i) {
    int32_t t = m.outputs[i].tensor;
    if ((m.tensors[t].symbolic || m.tensors[t].nbytes > 0) && !written.count(t)) {
      r.fail(Reader::index("outputs", i), str_cat("output '", m.outputs[i].name, "' (tensor ", t, ") is never written"));
    }
  }
  return m;
}

KernelSignature read_signature(const char* text, const std::string& what) {
  json::Value root;
  try {
    root = json::parse(text, std::strlen(text));
  } catch (const json::ParseError& e) {
    throw Error(str_cat(what, ": its signature is not valid JSON: ", e.what()));
  }
  Reader r(str_cat(what, ": invalid signature: "));
  r.object(root, "(top level)");
  KernelSignature sig;
  const auto& dims = r.array(r.field(root, "dims", ""), "dims");
  for (size_t i = 0; i < dims.size(); ++i) sig.dims.push_back(r.string(dims[i], Reader::index("dims", i)));
  const auto& buffers = r.array(r.field(root, "buffers", ""), "buffers");
  for (size_t i = 0; i < buffers.size(); ++i) {
    std::string path = Reader::index("buffers", i);
    r.object(buffers[i], path);
    KernelSignature::Buffer b;
    b.dtype = r.string(r.field(buffers[i], "dtype", path), Reader::join(path, "dtype"));
    if (dtype_nbytes(b.dtype) == 0) r.fail(Reader::join(path, "dtype"), str_cat("unknown dtype '", b.dtype, "'"));
    const json::Value& shape = r.field(buffers[i], "shape", path);
    b.has_shape = !shape.is_null();
    if (b.has_shape) {
      std::string shape_path = Reader::join(path, "shape");
      const auto& items = r.array(shape, shape_path);
      for (size_t k = 0; k < items.size(); ++k) b.shape.push_back(read_dim(r, items[k], Reader::index(shape_path, k), sig.dims, false));
    }
    sig.buffers.push_back(std::move(b));
  }
  return sig;
}

int64_t Dim::eval(const std::vector<int64_t>& symbols) const {
  std::vector<int64_t> stack;
  for (const Token& t : postfix) {
    if (t.kind == Const) {
      stack.push_back(t.value);
    } else if (t.kind == Symbol) {
      stack.push_back(symbols.at(static_cast<size_t>(t.value)));
    } else {
      int64_t b = stack.back();
      stack.pop_back();
      int64_t& a = stack.back();
      char op = static_cast<char>(t.value);
      // checked: a manifest's arithmetic must not overflow (undefined behaviour) or trap (INT64_MIN / -1)
      bool overflow = false;
      switch (op) {
        case '+': overflow = __builtin_add_overflow(a, b, &a); break;
        case '-': overflow = __builtin_sub_overflow(a, b, &a); break;
        case '*': overflow = __builtin_mul_overflow(a, b, &a); break;
        default:
          HIDET_CHECK(b != 0, "a shape divides by zero");
          overflow = a == INT64_MIN && b == -1;
          if (!overflow) a = op == '/' ? a / b : a % b;
          break;
      }
      HIDET_CHECK(!overflow, "a shape's arithmetic overflows 64 bits ('", op, "')");
    }
  }
  return stack.back();
}

std::string Dim::text(const std::vector<std::string>& symbols) const {
  std::string s;
  for (const Token& t : postfix) {
    if (!s.empty()) s += ' ';
    if (t.kind == Const) s += std::to_string(t.value);
    else if (t.kind == Symbol) s += symbols.at(static_cast<size_t>(t.value));
    else s += static_cast<char>(t.value);
  }
  return s;
}

std::vector<int64_t> TensorSpec::shape_at(const std::vector<int64_t>& symbols) const {
  if (!symbolic) return shape;
  std::vector<int64_t> out;
  for (const Dim& d : dims) out.push_back(d.eval(symbols));
  return out;
}

uint64_t TensorSpec::nbytes_at(const std::vector<int64_t>& symbols) const {
  if (!symbolic) return nbytes;
  uint64_t n = itemsize;
  for (int64_t d : shape_at(symbols)) {
    HIDET_CHECK(d >= 0, "a shape evaluates to a negative dimension (", d, ")");
    HIDET_CHECK(d == 0 || n <= kMaxBytes / static_cast<uint64_t>(d), "a shape evaluates to a tensor that is too large");
    n *= static_cast<uint64_t>(d);
  }
  return n;
}

}  // namespace artifact
}  // namespace hidet
