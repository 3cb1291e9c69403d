#include "serialize/schema.hpp"

#include "core/error.hpp"
#include "serialize/graph_schema.hpp"

namespace gf::serialize {

flatbuffers::IDLOptions json_options() {
  flatbuffers::IDLOptions opts;
  opts.strict_json = true;
  opts.indent_step = 2;
  return opts;
}

void load_schema(flatbuffers::Parser &parser) {
  if (!parser.Parse(kGraphSchema)) {
    fail(GF_ERR_INTERNAL, "the built-in graph schema does not parse: " + parser.error_);
  }
}

}  // namespace gf::serialize
