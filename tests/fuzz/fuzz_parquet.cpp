// Fuzz target: the Parquet reader (footer Thrift, schema, page headers, codecs, encodings, level
// assembly). Small limits keep each input's memory and time bounded; every row is read.
#include "core/io/parquet.h"
#include "tests/fuzz/fuzz_target.h"

FUZZ_BODY({
  grpo::io::ParquetOptions options;
  options.limits.max_footer_bytes = 1u << 20;
  options.limits.max_page_bytes = 4u << 20;
  options.limits.max_row_group_bytes = 16u << 20;
  auto f = grpo::io::ParquetFile::from_bytes(input, "fuzz.parquet", options);
  for (const auto& name : f.field_names()) (void)f.field_type(name);
  size_t rows = 0;
  f.for_each_row([&](grpo::io::ParquetRow&& row) {
    rows += row.dump().size() > 0;  // every value must serialise (valid UTF-8 strings)
    return true;
  });
  (void)rows;
})
