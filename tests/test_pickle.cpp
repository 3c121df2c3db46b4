// The restricted pickle machine on hand-written opcode streams: every supported opcode, every
// refusal, and every limit.
#include <doctest/doctest.h>

#include <cstring>
#include <string>

#include "gpucache/error.hpp"
#include "pt/pickle.hpp"
#include "pt/pickle_text.hpp"
#include "zip/zip.hpp"

using namespace gpucache;
using namespace gpucache::detail;

namespace {

// Builds an opcode stream byte by byte.
struct Pickle {
  std::string bytes;

  Pickle& op(char code) {
    bytes.push_back(code);
    return *this;
  }
  Pickle& op(unsigned char code) { return op(static_cast<char>(code)); }
  Pickle& raw(std::string_view text) {
    bytes.append(text);
    return *this;
  }
  Pickle& le(std::uint64_t value, int width) {
    for (int i = 0; i < width; ++i) bytes.push_back(static_cast<char>((value >> (8 * i)) & 0xff));
    return *this;
  }
  Pickle& proto(int version = 2) { return op('\x80').le(version, 1); }
  Pickle& str(std::string_view text) { return op('X').le(text.size(), 4).raw(text); }
  Pickle& short_str(std::string_view text) { return op('\x8c').le(text.size(), 1).raw(text); }
  Pickle& integer(std::int32_t value) { return op('J').le(static_cast<std::uint32_t>(value), 4); }
  Pickle& small(std::uint8_t value) { return op('K').le(value, 1); }
  Pickle& global(std::string_view module, std::string_view name) {
    return op('c').raw(module).raw("\n").raw(name).raw("\n");
  }
  Pickle& put(std::uint8_t index) { return op('q').le(index, 1); }
  Pickle& get(std::uint8_t index) { return op('h').le(index, 1); }
  Pickle& stop() { return op('.'); }
  // ('storage', torch.<type>, key, 'cpu', numel) BINPERSID
  Pickle& storage(std::string_view type, std::string_view key, std::uint8_t numel) {
    return op('(')
        .str("storage")
        .global("torch", type)
        .str(key)
        .str("cpu")
        .small(numel)
        .op('t')
        .op('Q');
  }
  // An empty OrderedDict, as torch writes backward_hooks.
  Pickle& ordered_dict() { return global("collections", "OrderedDict").op(')').op('R'); }
  // (n0, n1, ...) from small ints
  Pickle& dims(std::initializer_list<std::uint8_t> values) {
    op('(');
    for (auto value : values) small(value);
    return op('t');
  }
  std::span<const std::byte> span() const {
    return std::as_bytes(std::span(bytes.data(), bytes.size()));
  }
};

PickleOptions options() {
  PickleOptions result;
  result.file = "test.pt";
  result.name = "test.pkl";
  return result;
}

PickleResult run(const Pickle& pickle, const PickleOptions& opts = options()) {
  return unpickle(pickle.span(), opts);
}

std::string error_of(const Pickle& pickle, const PickleOptions& opts = options()) {
  try {
    run(pickle, opts);
  } catch (const Error& error) {
    return error.what();
  }
  return "(no error)";
}

bool contains(const std::string& text, const std::string& part) {
  const bool found = text.find(part) != std::string::npos;
  if (!found) MESSAGE("message was: " << text);
  return found;
}

}  // namespace

TEST_CASE("scalars of every kind") {
  Pickle p;
  p.proto().op('(');
  p.op('N').op('\x88').op('\x89');
  p.integer(-5).small(200).op('M').le(65535, 2);
  p.op('\x8a').le(1, 1).le(0xff, 1);                            // LONG1 -1
  p.op('\x8a').le(9, 1).le(0x05, 1).le(0, 7).le(1, 1);          // LONG1 2^64 + 5
  p.op('\x8a').le(9, 1).le(0xfffffffffffffffe, 8).le(0xff, 1);  // LONG1 -2, padded
  p.op('\x8b').le(2, 4).le(0x0100, 2);                          // LONG4 256
  p.op('G').raw(std::string("\x3f\xf8\0\0\0\0\0\0", 8));        // BINFLOAT 1.5
  p.str("héllo").short_str("short").op('\x8d').le(3, 8).raw("big");
  p.op('U').le(2, 1).raw("py").op('T').le(3, 4).raw("two");
  p.op('t').stop();
  const Value value = run(p).value;
  const auto& items = value.as_list()->items;
  REQUIRE(items.size() == 16);
  CHECK(value.as_list()->is_tuple);
  CHECK(items[0].is_none());
  CHECK(std::get<bool>(items[1].data));
  CHECK_FALSE(std::get<bool>(items[2].data));
  CHECK(*items[3].as_int() == -5);
  CHECK(*items[4].as_int() == 200);
  CHECK(*items[5].as_int() == 65535);
  CHECK(*items[6].as_int() == -1);
  CHECK(*items[7].as_string() == "18446744073709551621");  // wider than 64 bits: decimal text
  CHECK(*items[8].as_int() == -2);
  CHECK(*items[9].as_int() == 256);
  CHECK(*items[10].as_float() == 1.5);
  CHECK(*items[11].as_string() == "héllo");
  CHECK(*items[12].as_string() == "short");
  CHECK(*items[13].as_string() == "big");
  CHECK(*items[14].as_string() == "py");
  CHECK(*items[15].as_string() == "two");
}

TEST_CASE("containers, memo and protocol 4/5 framing") {
  Pickle p;
  p.proto(4).op('\x95').le(0, 8);  // FRAME
  p.op('}').op('\x94');            // EMPTY_DICT, MEMOIZE as 0
  p.op('(');
  p.short_str("list").op(']').put(1).op('(').small(1).small(2).op('e');  // APPENDS
  p.short_str("again").get(1);                                           // the same list
  p.short_str("tuple").small(1).small(2).small(3).op('\x87');
  p.short_str("pair").small(1).op('\x85').small(2).op('\x86');
  p.short_str("L").op('(').small(9).op('l');                // LIST
  p.short_str("D").op('(').short_str("k").op('N').op('d');  // DICT
  p.short_str("bytes").op('C').le(3, 1).raw("abc");         // SHORT_BINBYTES
  p.short_str("bytearray").op('\x96').le(2, 8).raw("xy");
  p.short_str("popped").op('N').op('N').op('0');  // POP
  p.op('u');                                      // SETITEMS
  p.short_str("one").op('N').op('s');             // SETITEM
  p.op('(').op('N').op('1');                      // POP_MARK
  p.stop();
  const Value value = run(p).value;
  const Dict& dict = *value.as_dict();
  REQUIRE(dict.items.size() == 10);
  const auto& list = *dict.find("list")->as_list();
  CHECK_FALSE(list.is_tuple);
  REQUIRE(list.items.size() == 2);
  CHECK(*list.items[1].as_int() == 2);
  CHECK(dict.find("again")->as_list() == &list);  // memo hits stay shared
  CHECK(dict.find("tuple")->as_list()->items.size() == 3);
  CHECK(dict.find("pair")->as_list()->items[0].as_list()->items.size() == 1);
  CHECK(*dict.find("L")->as_list()->items[0].as_int() == 9);
  CHECK(dict.find("D")->as_dict()->find("k")->is_none());
  const Tensor& bytes = *dict.find("bytes")->as_tensor();  // bytes become u8 tensors
  CHECK(bytes.dtype == DType::u8);
  CHECK(bytes.shape == std::vector<std::int64_t>{3});
  CHECK(std::memcmp(bytes.contiguous_bytes().data(), "abc", 3) == 0);
  CHECK(dict.find("bytearray")->as_tensor()->numel() == 2);
  CHECK(dict.find("popped")->is_none());
  CHECK(dict.find("one")->is_none());
}

TEST_CASE("memo indices: sequential, overwritten, sparse") {
  Pickle p;
  p.proto(4).op('(').small(1).op('\x94').small(2).op('\x94');  // MEMOIZE as 0 and 1
  p.small(3).op('r').le(4000000000u, 4);                       // LONG_BINPUT far away
  p.small(4).op('\x94');                                       // MEMOIZE: len(memo) = 3
  p.small(5).put(0);                                           // overwrite 0
  p.get(0).get(1).op('j').le(4000000000u, 4).op('h').le(3, 1).op('l').stop();
  const Value value = run(p).value;
  const auto& items = value.as_list()->items;
  REQUIRE(items.size() == 9);
  CHECK(*items[5].as_int() == 5);
  CHECK(*items[6].as_int() == 2);
  CHECK(*items[7].as_int() == 3);
  CHECK(*items[8].as_int() == 4);
}

TEST_CASE("dict keys that are not strings are stored as their Python repr") {
  Pickle p;
  p.proto().op('}').op('(');
  p.small(7).small(0);
  p.op('\x8a').le(9, 1).le(0, 8).le(1, 1).small(1);                            // 2^64
  p.op('G').raw(std::string("\x3f\xb9\x99\x99\x99\x99\x99\x9a", 8)).small(2);  // 0.1
  p.op('\x88').small(3);
  p.op('N').small(4);
  p.small(1).str("a").op('\x86').small(5);
  p.small(1).op('\x85').small(6);
  p.op('u').stop();
  const Value value = run(p).value;
  std::vector<std::string> keys;
  for (const auto& [key, item] : value.as_dict()->items) keys.push_back(key);
  CHECK(keys == std::vector<std::string>{"7", "18446744073709551616", "0.1", "True", "None",
                                         "(1, 'a')", "(1,)"});
  CHECK(contains(
      error_of(Pickle().proto().op('}').small(1).op('N').op('s').small(1).op('N').op('s').stop()),
      "dict key '1' appears twice"));
  CHECK(contains(error_of(Pickle().proto().op('}').op(']').op('N').op('s').stop()),
                 "dict keys of type list are not supported"));
}

TEST_CASE("python float repr and wide integers as text") {
  using pickle::python_float_repr;
  CHECK(python_float_repr(1.0) == "1.0");
  CHECK(python_float_repr(-0.0) == "-0.0");
  CHECK(python_float_repr(0.1) == "0.1");
  CHECK(python_float_repr(1e16) == "1e+16");
  CHECK(python_float_repr(1e15) == "1000000000000000.0");
  CHECK(python_float_repr(0.0001) == "0.0001");
  CHECK(python_float_repr(1e-05) == "1e-05");
  CHECK(python_float_repr(123.456) == "123.456");
  CHECK(python_float_repr(1.5e300) == "1.5e+300");
  CHECK(python_float_repr(-2.5e-7) == "-2.5e-07");
  using pickle::signed_le_decimal;
  CHECK(signed_le_decimal("") == "0");
  CHECK(signed_le_decimal(std::string("\xff", 1)) == "-1");
  CHECK(signed_le_decimal(std::string("\0\0\0\0\0\0\0\0\x80", 9)) == "-2361183241434822606848");
  CHECK(signed_le_decimal(std::string("\x6c\xfc\x9c\x46\xf9\x20\x6a\xa8\x50\x19", 10)) ==
        "119547037146038801333356");
  CHECK(pickle::is_valid_utf8("plain ✓"));
  CHECK_FALSE(pickle::is_valid_utf8("\xc0\xaf"));  // overlong
  CHECK_FALSE(pickle::is_valid_utf8("\xe2\x9c"));  // cut short
}

TEST_CASE("a tensor is rebuilt from its persistent id without touching data") {
  Pickle p;
  p.proto().global("torch._utils", "_rebuild_tensor_v2").op('(');
  p.storage("FloatStorage", "0", 6).small(1).dims({2, 2}).dims({1, 2}).op('\x89').ordered_dict();
  p.op('t').op('R').stop();
  PickleResult result = run(p, options());
  REQUIRE(result.storages.size() == 1);
  CHECK(result.storages[0].key == "0");
  CHECK(result.storages[0].dtype == DType::f32);
  CHECK(result.storages[0].nbytes == 24);
  CHECK(result.storages[0].storage->bytes.empty());  // filled later by the container reader
  const Tensor& tensor = *result.value.as_tensor();
  CHECK(tensor.shape == std::vector<std::int64_t>{2, 2});
  CHECK(tensor.strides == std::vector<std::int64_t>{1, 2});
  CHECK(tensor.storage_offset == 1);
  CHECK_FALSE(tensor.big_endian);  // the container's byte order is applied by its reader
  REQUIRE(result.storage_tensors.size() == 1);
  CHECK(result.storage_tensors[0].get() == &tensor);
  CHECK(result.end == p.bytes.size());
}

TEST_CASE("_rebuild_tensor_v3 takes its dtype from a torch dtype global") {
  Pickle p;
  p.proto().global("torch._utils", "_rebuild_tensor_v3").op('(');
  p.op('(')
      .str("storage")
      .global("torch.storage", "UntypedStorage")
      .str("k")
      .str("cpu")
      .small(8)
      .op('t')
      .op('Q');
  p.small(0)
      .dims({4})
      .dims({1})
      .op('\x89')
      .ordered_dict()
      .global("torch", "uint16")
      .op('t')
      .op('R')
      .stop();
  PickleResult result = run(p);
  CHECK(result.storages[0].dtype == DType::u8);
  CHECK(result.storages[0].nbytes == 8);
  CHECK(result.value.as_tensor()->dtype == DType::u16);
}

TEST_CASE("a storage named twice with different types is refused") {
  Pickle p;
  p.proto().op('(').storage("FloatStorage", "0", 4).storage("LongStorage", "0", 4).op('t').stop();
  CHECK(contains(error_of(p), "storage '0' is declared twice with different types or sizes"));
}

TEST_CASE("storages named again are shared, whatever their keys look like") {
  // Decimal keys (as torch writes them), a huge number (hashed: too far out for the numbered
  // slots), the same number once it is within reach, leading zeros and text: each key names one
  // storage however often it appears.
  const std::vector<std::string> keys = {"0",     "1", "99999", "007", "7", "abc", "1",
                                         "99999", "0", "007",   "abc", "7", "2"};
  Pickle p;
  p.proto().op('(');
  for (const auto& key : keys) p.storage("FloatStorage", key, 4);
  p.op('t').stop();
  PickleResult result = run(p);
  std::vector<std::string> stored;
  for (const auto& storage : result.storages) stored.push_back(storage.key);
  CHECK(stored == std::vector<std::string>{"0", "1", "99999", "007", "7", "abc", "2"});
  const List& tensors = *result.value.as_list();
  REQUIRE(tensors.items.size() == keys.size());
  for (std::size_t i = 0; i < keys.size(); ++i)
    for (std::size_t j = 0; j < keys.size(); ++j) {
      CAPTURE(keys[i]);
      CAPTURE(keys[j]);
      CHECK((tensors.items[i].as_tensor()->storage == tensors.items[j].as_tensor()->storage) ==
            (keys[i] == keys[j]));
    }

  // A number first seen beyond the slots' reach stays the same storage once they reach it.
  Pickle far;
  far.proto().op('(').storage("FloatStorage", "5000", 2);
  for (int k = 0; k < 300; ++k) far.storage("FloatStorage", std::to_string(k), 2);
  far.storage("FloatStorage", "5000", 2).op('t').stop();
  PickleResult grown = run(far);
  CHECK(grown.storages.size() == 301);
  const List& all = *grown.value.as_list();
  CHECK(all.items.front().as_tensor()->storage == all.items.back().as_tensor()->storage);
}

TEST_CASE("a bare storage becomes a 1-D tensor over all of it") {
  Pickle p;
  p.proto().storage("HalfStorage", "3", 5).stop();
  PickleResult result = run(p);
  const Tensor& tensor = *result.value.as_tensor();
  CHECK(tensor.dtype == DType::f16);
  CHECK(tensor.shape == std::vector<std::int64_t>{5});
  CHECK(result.storage_tensors.size() == 1);
}

TEST_CASE("numpy arrays inside a pickle become tensors") {
  // numpy.core.multiarray._reconstruct(numpy.ndarray, (0,), b'b') then BUILD with its state.
  Pickle p;
  p.proto().global("numpy.core.multiarray", "_reconstruct").global("numpy", "ndarray");
  p.small(0).op('\x85').op('C').le(1, 1).raw("b").op('\x87').op('R');
  p.op('(').small(1).small(2).small(2).op('\x86');
  p.global("numpy", "dtype").str("i2").op('\x89').op('\x88').op('\x87').op('R');
  p.op('(').small(3).str(">").op('N').op('N').op('N').integer(-1).integer(-1).small(0).op('t').op(
      'b');
  p.op('\x88').op('C').le(8, 1).raw(std::string("\0\1\0\2\0\3\0\4", 8)).op('t').op('b').stop();
  const Value value = run(p).value;
  const Tensor& tensor = *value.as_tensor();
  CHECK(tensor.dtype == DType::i16);
  CHECK(tensor.big_endian);
  CHECK(tensor.strides == std::vector<std::int64_t>{1, 2});  // Fortran order
  std::vector<std::int16_t> out(4);
  tensor.copy_row_major(0, std::as_writable_bytes(std::span(out)));
  CHECK(out == std::vector<std::int16_t>{1, 3, 2, 4});
}

TEST_CASE("_codecs.encode turns latin-1 text into bytes") {
  Pickle p;
  p.proto().global("_codecs", "encode").str("\xc3\xbf\x01").str("latin1").op('\x86').op('R').stop();
  const PickleResult result = run(p);
  const Tensor& tensor = *result.value.as_tensor();
  REQUIRE(tensor.numel() == 2);
  CHECK(tensor.contiguous_bytes()[0] == std::byte{0xff});
  Pickle wide;
  wide.proto()
      .global("_codecs", "encode")
      .str("\xe2\x9c\x93")
      .str("latin1")
      .op('\x86')
      .op('R')
      .stop();
  CHECK(contains(error_of(wide), "characters outside latin-1"));
  Pickle other;
  other.proto().global("_codecs", "encode").str("x").str("rot13").op('\x86').op('R').stop();
  CHECK(contains(error_of(other), "encoding 'rot13' is not supported"));
}

TEST_CASE("globals outside the allowlist are refused by name and position") {
  CHECK(error_of(Pickle().proto().global("os", "system").stop()) ==
        "test.pt: refusing global 'os.system' in test.pkl at byte 2");
  CHECK(error_of(Pickle().proto(4).short_str("builtins").short_str("eval").op('\x93').stop()) ==
        "test.pt: refusing global 'builtins.eval' in test.pkl at byte 18");
  CHECK(contains(error_of(Pickle().proto().global("torch", "load").stop()),
                 "refusing global 'torch.load'"));
  CHECK(contains(error_of(Pickle().proto().global("collections", "OrderedDic").stop()),
                 "refusing global 'collections.OrderedDic'"));
  CHECK(contains(error_of(Pickle().proto().global("torch\x01", "x").stop()),
                 "refusing global 'torch\\x01.x'"));
  PickleOptions legacy = options();
  legacy.base_offset = 1000;  // legacy pickles report file offsets
  CHECK(contains(error_of(Pickle().proto().global("os", "system").stop(), legacy), "at byte 1002"));
}

TEST_CASE("allowed globals are only called the way torch calls them") {
  auto reduce = [](auto&& build_args) {
    Pickle p;
    p.proto();
    build_args(p);
    return error_of(p.op('R').stop());
  };
  CHECK(contains(reduce([](Pickle& p) { p.global("torch", "FloatStorage").op(')'); }),
                 "'torch.FloatStorage' cannot be called"));
  CHECK(contains(reduce([](Pickle& p) { p.str("not callable").op(')'); }),
                 "REDUCE needs a global to call, not str"));
  CHECK(contains(reduce([](Pickle& p) { p.global("collections", "OrderedDict").op(']'); }),
                 "REDUCE arguments must be a tuple, not list"));
  CHECK(contains(
      reduce([](Pickle& p) { p.global("collections", "OrderedDict").small(1).op('\x85'); }),
      "collections.OrderedDict takes 0 arguments, got 1"));
  CHECK(contains(
      reduce([](Pickle& p) { p.global("torch._utils", "_rebuild_tensor_v2").small(1).op('\x85'); }),
      "takes 6 to 7 arguments"));
  CHECK(contains(reduce([](Pickle& p) {
                   p.global("torch._utils", "_rebuild_tensor_v2")
                       .op('(')
                       .small(0)
                       .small(0)
                       .dims({1})
                       .dims({1});
                   p.op('\x89').ordered_dict().op('t');
                 }),
                 "tensor storage must come from a persistent id, not int"));
  CHECK(contains(
      reduce([](Pickle& p) {
        p.global("torch._utils", "_rebuild_tensor_v2").op('(').storage("FloatStorage", "0", 2);
        p.small(0).dims({2, 2}).dims({1}).op('\x89').ordered_dict().op('t');
      }),
      "tensor size has 2 entries but stride 1"));
  CHECK(contains(
      reduce([](Pickle& p) {
        p.global("torch._utils", "_rebuild_tensor_v2").op('(').storage("FloatStorage", "0", 2);
        p.small(0).dims({2}).op('(').integer(-1).op('t').op('\x89').ordered_dict().op('t');
      }),
      "tensor stride has a negative entry"));
  CHECK(contains(
      reduce([](Pickle& p) {
        p.global("torch._utils", "_rebuild_tensor_v2").op('(').storage("FloatStorage", "0", 2);
        p.small(0).dims({2}).dims({1}).op('\x89').ordered_dict();
        p.op('}').str("neg").op('\x88').op('s').op('t');
      }),
      "tensor metadata (conjugate or negative views) is not supported"));
  CHECK(contains(reduce([](Pickle& p) {
                   p.global("numpy.core.multiarray", "_reconstruct").global("torch", "Size");
                   p.small(0).op('\x85').op('C').le(1, 1).raw("b").op('\x87');
                 }),
                 "_reconstruct is only supported for numpy.ndarray"));
  CHECK(contains(reduce([](Pickle& p) { p.global("numpy", "dtype").str("O8").op('\x85'); }),
                 "numpy object arrays (dtype 'O8')"));
  CHECK(contains(reduce([](Pickle& p) { p.global("numpy", "dtype").str("c16").op('\x85'); }),
                 "numpy dtype 'c16' is not supported"));
  // NEWOBJ only makes Parameter, as in torch.load(weights_only=True): torch.Size and OrderedDict
  // pickle through REDUCE, so a NEWOBJ of them is not what torch wrote.
  CHECK(contains(
      error_of(Pickle().proto().global("numpy", "dtype").str("f4").op('\x85').op('\x81').stop()),
      "NEWOBJ is only supported for torch.nn.Parameter"));
  Pickle size;
  size.proto().global("torch", "Size").small(3).small(4).op('\x86').op('\x85').op('\x81').stop();
  CHECK(contains(error_of(size), "NEWOBJ is only supported for torch.nn.Parameter"));
  Pickle reduced_size;
  reduced_size.proto().global("torch", "Size").small(3).small(4).op('\x86').op('\x85');
  CHECK(run(reduced_size.op('R').stop()).value.as_list()->items.size() == 2);
}

TEST_CASE("BUILD only applies to OrderedDict, numpy dtypes and numpy arrays") {
  Pickle ordered;
  ordered.proto().ordered_dict().op('}').str("_metadata").op('}').op('s').op('b').stop();
  CHECK(run(ordered).value.as_dict()->items.empty());  // instance attributes are dropped
  CHECK(contains(error_of(Pickle().proto().op('}').op('}').op('b').stop()),
                 "BUILD on a plain dict is not supported"));
  CHECK(contains(error_of(Pickle().proto().op(']').op('}').op('b').stop()),
                 "BUILD on list is not supported"));
  Pickle twice;
  twice.proto().global("numpy", "dtype").str("f4").op('\x85').op('R');
  twice.op('(')
      .small(3)
      .str("<")
      .op('N')
      .op('N')
      .op('N')
      .op('t')
      .put(0)
      .op('b')
      .get(0)
      .op('b')
      .stop();
  CHECK(contains(error_of(twice), "numpy.dtype is built twice"));
  Pickle objects;
  objects.proto().global("numpy.core.multiarray", "_reconstruct").global("numpy", "ndarray");
  objects.small(0).op('\x85').op('C').le(1, 1).raw("b").op('\x87').op('R');
  objects.op('(')
      .small(1)
      .small(1)
      .op('\x85')
      .global("numpy", "dtype")
      .str("f4")
      .op('\x85')
      .op('R');
  objects.op('\x89').op(']').op('t').op('b').stop();
  CHECK(contains(error_of(objects), "numpy object arrays hold pickled Python objects"));
  Pickle unbuilt;
  unbuilt.proto().global("numpy.core.multiarray", "_reconstruct").global("numpy", "ndarray");
  unbuilt.small(0).op('\x85').op('C').le(1, 1).raw("b").op('\x87').op('R').stop();
  CHECK(contains(error_of(unbuilt), "numpy array was never given its state"));
}

TEST_CASE("persistent ids must be storage tuples") {
  CHECK(contains(error_of(Pickle().proto().small(1).op('Q').stop()),
                 "persistent id must be a tuple, not int"));
  CHECK(contains(error_of(Pickle()
                              .proto()
                              .op('(')
                              .str("module")
                              .global("torch", "FloatStorage")
                              .str("0")
                              .str("cpu")
                              .small(1)
                              .op('t')
                              .op('Q')
                              .stop()),
                 "persistent id must start with 'storage'"));
  CHECK(contains(error_of(Pickle()
                              .proto()
                              .op('(')
                              .str("storage")
                              .global("collections", "OrderedDict")
                              .str("0")
                              .str("cpu")
                              .small(1)
                              .op('t')
                              .op('Q')
                              .stop()),
                 "storage type must be a torch storage class"));
  CHECK(contains(error_of(Pickle().proto().op('(').str("storage").op('t').op('Q').stop()),
                 "persistent id must be ('storage', type, key, location, numel)"));
  CHECK(contains(error_of(Pickle()
                              .proto()
                              .op('(')
                              .str("storage")
                              .global("torch", "FloatStorage")
                              .str("0")
                              .str("cpu")
                              .integer(-1)
                              .op('t')
                              .op('Q')
                              .stop()),
                 "storage size is negative"));
  CHECK(contains(error_of(Pickle()
                              .proto()
                              .op('(')
                              .str("storage")
                              .global("torch", "FloatStorage")
                              .str("0")
                              .str("cpu")
                              .small(1)
                              .small(1)
                              .op('t')
                              .op('Q')
                              .stop()),
                 "storage views in legacy files are not supported"));
}

TEST_CASE("malformed opcode streams are errors, never crashes") {
  CHECK(error_of(Pickle().proto().op('\xff')) ==
        "test.pt: unknown opcode 0xff in test.pkl at byte 2");
  CHECK(contains(error_of(Pickle().proto().op('i')),
                 "unsupported opcode INST (0x69) in test.pkl at byte 2"));
  CHECK(contains(error_of(Pickle().proto().op('\x8f')), "unsupported opcode EMPTY_SET"));
  CHECK(contains(error_of(Pickle().proto().op('\x97')), "unsupported opcode NEXT_BUFFER"));
  CHECK(contains(error_of(Pickle().proto(6)), "unsupported pickle protocol 6"));
  CHECK(contains(error_of(Pickle().proto().get(5).stop()), "memo index 5 is not defined"));
  CHECK(contains(error_of(Pickle().proto().op('j').le(0xffffffff, 4).stop()),
                 "memo index 4294967295 is not defined"));
  CHECK(contains(error_of(Pickle().proto().put(0)), "stack underflow"));
  CHECK(contains(error_of(Pickle().proto().op('a')), "stack underflow"));
  CHECK(contains(error_of(Pickle().proto().small(1).op('(').op('a')),
                 "stack underflow"));  // not below a MARK
  CHECK(contains(error_of(Pickle().proto().op('\x87')), "stack underflow"));
  CHECK(contains(error_of(Pickle().proto().op('t')), "no MARK to pop to"));
  CHECK(contains(error_of(Pickle().proto().small(1).small(2).stop()),
                 "STOP with 2 objects on the stack, expected 1"));
  CHECK(contains(error_of(Pickle().proto().small(1).op('(').stop()), "STOP with an open MARK"));
  CHECK(contains(error_of(Pickle().proto().small(1)), "pickle ends without a STOP opcode"));
  CHECK(contains(error_of(Pickle()), "pickle ends without a STOP opcode in test.pkl at byte 0"));
  CHECK(contains(error_of(Pickle().proto().op('X').le(1000, 4).raw("abc")),
                 "BINUNICODE needs 1000 bytes but only 3 remain"));
  CHECK(contains(error_of(Pickle().proto().op('\x8d').le(~std::uint64_t{0}, 8)),
                 "BINUNICODE8 needs 18446744073709551615 bytes"));
  CHECK(
      contains(error_of(Pickle().proto().op('\x8e').le(~std::uint64_t{0}, 8)), "BINBYTES8 needs"));
  CHECK(contains(error_of(Pickle().proto().op('\x95').le(1 << 20, 8)),
                 "FRAME of 1048576 bytes runs past the end"));
  CHECK(contains(error_of(Pickle().proto().op('T').le(0x80000000u, 4)),
                 "BINSTRING length is negative"));
  CHECK(contains(error_of(Pickle().proto().op('\x8b').le(0x7fffffff, 4)),
                 "LONG4 of 2147483647 bytes is out of range"));
  CHECK(contains(error_of(Pickle().proto().op('J').le(1, 2)),
                 "BININT needs 4 bytes but only 2 remain"));
  CHECK(contains(error_of(Pickle().proto().str("\xff\xfe").stop()), "string is not valid UTF-8"));
  CHECK(contains(error_of(Pickle().proto().op('c').raw(std::string(300, 'a'))),
                 "GLOBAL module is not a line of at most 256 bytes"));
  CHECK(contains(error_of(Pickle().proto().small(1).op('e')), "no MARK to pop to"));
  CHECK(contains(error_of(Pickle().proto().small(1).op('(').small(2).op('e')),
                 "APPENDS needs a list, not int"));
  CHECK(contains(error_of(Pickle().proto().op(')').small(1).op('a')),
                 "APPEND needs a list, not tuple"));
  CHECK(contains(error_of(Pickle().proto().op(']').op('(').small(1).op('u')),
                 "SETITEMS needs key/value pairs"));
  CHECK(contains(error_of(Pickle().proto().small(1).op('\x93')), "stack underflow"));
  CHECK(contains(error_of(Pickle().proto().small(1).small(2).op('\x93')),
                 "STACK_GLOBAL needs two strings"));
}

TEST_CASE("nesting is bounded and recursive structures are refused") {
  Pickle deep;
  deep.proto();
  for (int i = 0; i < 300; ++i) deep.op(']');
  for (int i = 0; i < 299; ++i) deep.op('a');
  deep.stop();
  CHECK(contains(error_of(deep), "objects nest deeper than 256"));

  Pickle tuples;
  tuples.proto().op('N');
  for (int i = 0; i < 300; ++i) tuples.op('\x85');
  tuples.stop();
  CHECK(contains(error_of(tuples), "objects nest deeper than 256"));

  Pickle ok;
  ok.proto();
  for (int i = 0; i < 200; ++i) ok.op(']');
  for (int i = 0; i < 199; ++i) ok.op('a');
  ok.stop();
  CHECK(run(ok).value.as_list()->items.size() == 1);

  // l = []; l.append(l)
  CHECK(contains(error_of(Pickle().proto().op(']').put(0).get(0).op('a').stop()),
                 "recursive objects are not supported"));
  // inner is nested in outer, then changed through the memo: would let depth grow unseen.
  Pickle later;
  later.proto().op(']').put(0).op(']').put(1).op('a').op('0').get(1).small(1).op('a').stop();
  CHECK(contains(error_of(later), "modifies a container already nested in another"));
  Pickle dict_later;
  dict_later.proto().op(']').op('}').put(1).op('a').get(1).str("k").op('N').op('s').stop();
  CHECK(contains(error_of(dict_later), "SETITEM modifies a container already nested"));
}

TEST_CASE("resource limits") {
  PickleOptions small = options();
  small.limits.max_stack = 4;
  Pickle many;
  many.proto().op('(');
  for (int i = 0; i < 5; ++i) many.small(1);
  many.op('t').stop();
  CHECK(contains(error_of(many, small), "stack holds more than 4 objects"));

  small = options();
  small.limits.max_memo = 2;
  CHECK(contains(error_of(Pickle().proto().op('N').put(0).put(1).put(2).stop(), small),
                 "memo holds more than 2 objects"));
  CHECK_NOTHROW(
      run(Pickle().proto().op('N').put(0).put(1).put(1).stop(), small));  // overwrite is not growth

  small = options();
  small.limits.max_objects = 3;
  CHECK(contains(
      error_of(Pickle().proto().op('N').op('0').op('N').op('0').op('N').op('0').op('N').stop(),
               small),
      "pickle creates more than 3 objects"));

  small = options();
  small.limits.max_long_bytes = 16;
  CHECK(contains(
      error_of(Pickle().proto().op('\x8b').le(17, 4).raw(std::string(17, '\1')).stop(), small),
      "LONG4 of 17 bytes is out of range"));

  // (v, v) nested 70 times through the memo: 2^70 nodes when walked, from a few hundred bytes.
  Pickle doubling;
  doubling.proto().op('N');
  for (int i = 0; i < 70; ++i) doubling.put(0).get(0).op('\x86');
  doubling.stop();
  CHECK(contains(error_of(doubling), "the object tree expands to more than 134217728 values"));

  // One long string repeated through the memo.
  small = options();
  small.limits.max_text_bytes = 5000;
  Pickle repeated;
  repeated.proto().op('(').str(std::string(1000, 'x')).put(0);
  for (int i = 0; i < 9; ++i) repeated.get(0);
  repeated.op('l').stop();
  CHECK(contains(error_of(repeated, small), "more than 5000 bytes of text"));

  // Lists made and dropped in a loop: their memory is only taken back at the end, so it counts
  // (the cap: 4096 + 2 x 404 pickle bytes).
  small = options();
  small.limits.object_bytes_base = 4096;
  small.limits.object_bytes_per_pickle_byte = 2;
  Pickle dropped;
  dropped.proto();
  for (int i = 0; i < 200; ++i) dropped.op(']').op('0');
  dropped.op('N').stop();
  CHECK(contains(error_of(dropped, small), "lists, tuples and dicts take more than 4904 bytes"));
  CHECK_NOTHROW(run(dropped));  // within the default limits
}

// Random byte changes to real torch pickles: each must unpickle or raise gpucache::Error, never
// crash (run under -DGPUCACHE_SANITIZE=ON to also catch out-of-bounds reads).
TEST_CASE("mutated real pickles never crash") {
  std::uint64_t state = 0x9e3779b97f4a7c15;
  auto next = [&state] {
    state ^= state << 13;
    state ^= state >> 7;
    state ^= state << 17;
    return state;
  };
  std::size_t loaded = 0, refused = 0;
  for (const char* name :
       {"nested", "numpy_inside", "numpy_protocol5", "parameter", "dialogue_list"}) {
    const ZipArchive archive(
        MappedFile::open(std::string(GPUCACHE_TEST_DATA) + "/pt/" + name + ".pt"));
    const ZipMember* member = archive.find(std::string(name) + "/data.pkl");
    REQUIRE(member != nullptr);
    const Storage original = archive.read(*member);
    for (int round = 0; round < 4000; ++round) {
      std::vector<std::byte> bytes(original.bytes.begin(), original.bytes.end());
      const int changes = 1 + static_cast<int>(next() % 3);
      for (int i = 0; i < changes; ++i)
        bytes[next() % bytes.size()] = static_cast<std::byte>(next() & 0xff);
      try {
        unpickle(bytes, options());
        ++loaded;
      } catch (const Error&) {
        ++refused;
      }
    }
  }
  CHECK(loaded + refused == 20000);
  CHECK(refused > 0);
}
