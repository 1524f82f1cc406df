#include "gridfeed/python/microbatch_binding.h"

#include <pybind11/stl.h>

namespace gridfeed::python {
namespace py = pybind11;

void RegisterMicroBatch(py::module_& m) {
  py::class_<PyMicroBatch>(m, "MicroBatch", R"doc(
What one rank received for one micro-batch: a read-only mapping of the field names its
pipeline declares (Megatron's get_batch keys: tokens, position_ids, attention_mask, labels,
loss_mask; only those this rank's pipeline stage gets) to NumPy views [micro_batch_size,
local_seq_length] (attention_mask bool [micro_batch_size, 1, local_seq_length, seq_length]) over
the payload this object owns: no copy; each view's base is the MicroBatch, which lives as long
as any view or tensor made from one.
dict(mb) gives a plain dict of the same views. seq_length is this micro-batch's: a mixture stage
with its own seq_length changes it between global batches.

Packed micro-batches (--sft, sft=True; mb.packed is True on every pipeline stage)
are what Megatron's get_batch leaves for --sft: tokens, labels, loss_mask and position_ids are
one flattened row [1, micro_batch_size * local_seq_length] (this CP rank's THD slice of the
micro-batch's samples laid end to end), mb.cu_seqlens (int32 [K], also mb["cu_seqlens"]) holds
the micro-batch's merged sequence boundaries (the whole micro-batch's, the same on every CP
rank) and mb.max_seqlen its longest sequence (mb["max_seqlen"]: int32 [1]). Otherwise packed is False, cu_seqlens is empty
and max_seqlen is 0. Middle pipeline stages of a packed order get cu_seqlens and max_seqlen alone
(as Megatron's get_batch for --sft); of other orders, nothing.)doc")
      .def("__getitem__",
           [](py::object self, const std::string& key) {
             auto a = self.cast<const PyMicroBatch&>().Field(self, key);
             if (!a) throw py::key_error(key);
             return *a;
           })
      .def(
          "get",
          [](py::object self, const std::string& key, py::object dflt) -> py::object {
            auto a = self.cast<const PyMicroBatch&>().Field(self, key);
            return a ? py::object(*a) : dflt;
          },
          py::arg("key"), py::arg("default") = py::none())
      .def("__contains__",
           [](const PyMicroBatch& b, const std::string& key) {
             for (const char* k : b.Keys()) {
               if (key == k) return true;
             }
             return false;
           })
      .def("__len__", [](const PyMicroBatch& b) { return b.Keys().size(); })
      .def("keys", [](const PyMicroBatch& b) { return py::cast(b.Keys()); })
      .def("__iter__", [](const PyMicroBatch& b) { return py::iter(py::cast(b.Keys())); })
      .def("values",
           [](py::object self) {
             py::list out;
             const auto& b = self.cast<const PyMicroBatch&>();
             for (const char* k : b.Keys()) out.append(*b.Field(self, k));
             return out;
           })
      .def("items",
           [](py::object self) {
             py::list out;
             const auto& b = self.cast<const PyMicroBatch&>();
             for (const char* k : b.Keys()) out.append(py::make_tuple(k, *b.Field(self, k)));
             return out;
           })
      .def_property_readonly(
          "sample_indices",
          [](py::object self) { return self.cast<const PyMicroBatch&>().SampleIndices(self); },
          "int64 [micro_batch_size]: the order's sample index of each sample (Megatron's "
          "top-level dataset index, OLMo's instance index; empty on middle pipeline stages that "
          "get no "
          "field)")
      .def_property_readonly(
          "sample_positions",
          [](py::object self) { return self.cast<const PyMicroBatch&>().SamplePositions(self); },
          "int64 [micro_batch_size]: each sample's global position in the split's read order "
          "(what resumes and ledgers count; equal to sample_indices for Megatron's order)")
      .def_property_readonly(
          "source_ids",
          [](py::object self) { return self.cast<const PyMicroBatch&>().SourceIds(self); },
          "int64 [micro_batch_size]: each sample's blend source (0 without a blend)")
      .def_property_readonly(
          "packed", [](const PyMicroBatch& b) { return b.mb().packed; },
          "whether this is a packed micro-batch (--sft): the sequence fields are one flattened "
          "row [1, micro_batch_size * local_seq_length] and cu_seqlens/max_seqlen are set")
      .def_property_readonly(
          "cu_seqlens",
          [](py::object self) { return self.cast<const PyMicroBatch&>().CuSeqlens(self); },
          "int32 [K]: a packed micro-batch's merged cumulative sequence lengths over the "
          "micro-batch's micro_batch_size * seq_length tokens (Megatron's flattened cu_seqlens, "
          "the same on every CP rank); empty when not packed")
      .def_property_readonly(
          "max_seqlen", [](const PyMicroBatch& b) { return b.mb().max_seqlen(); },
          "a packed micro-batch's longest sequence (Megatron's max_seqlen); 0 when not packed")
      .def_property_readonly("micro_batch_size",
                             [](const PyMicroBatch& b) { return b.mb().micro_batch_size; })
      .def_property_readonly(
          "seq_length", [](const PyMicroBatch& b) { return b.mb().seq_length; },
          "tokens per sample of this micro-batch (a mixture stage may set its own)")
      .def_property_readonly("local_seq_length",
                             [](const PyMicroBatch& b) { return b.mb().local_seq_length; })
      .def_property_readonly("has_inputs", [](const PyMicroBatch& b) { return b.mb().has_inputs; })
      .def_property_readonly("has_targets",
                             [](const PyMicroBatch& b) { return b.mb().has_targets; })
      .def("__repr__", [](const PyMicroBatch& b) {
        std::string keys;
        for (const char* k : b.Keys()) keys += std::string(keys.empty() ? "" : ", ") + k;
        if (b.mb().packed) {
          return "<gridfeed.MicroBatch packed [1 x " +
                 std::to_string(b.mb().micro_batch_size * b.mb().local_seq_length) + "] " + keys +
                 ", " + std::to_string(b.mb().cu_seqlens().size()) + " cu_seqlens>";
        }
        return "<gridfeed.MicroBatch [" + std::to_string(b.mb().micro_batch_size) + " x " +
               std::to_string(b.mb().local_seq_length) + "] " + keys + ">";
      });
  py::module_::import("collections.abc").attr("Mapping").attr("register")(m.attr("MicroBatch"));
}

}  // namespace gridfeed::python
