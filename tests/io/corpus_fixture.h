// Tiny corpora for io tests, written with the builder.
#pragma once

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "gridfeed/io/indexed_dataset_builder.h"

namespace gridfeed::testing {

// documents[d] = sequences of document d.
inline void WriteCorpus(const std::string& prefix, io::DType dtype,
                        const std::vector<std::vector<std::vector<int64_t>>>& documents) {
  auto b = io::IndexedDatasetBuilder::Create(prefix, dtype);
  ASSERT_TRUE(b.ok()) << b.status().ToString();
  for (const auto& doc : documents) {
    for (const auto& seq : doc) ASSERT_TRUE(b->AddItem(seq).ok());
    b->EndDocument();
  }
  ASSERT_TRUE(b->Finalize().ok());
}

}  // namespace gridfeed::testing
