// What reading and writing graph documents share: the schema parser set up for gpuflow's JSON.
#pragma once

#include <flatbuffers/idl.h>

namespace gf::serialize {

// JSON as gpuflow reads and writes it: strict, indented.
flatbuffers::IDLOptions json_options();
// Loads the built-in graph schema into `parser` (the JSON form is read and printed through it).
void load_schema(flatbuffers::Parser &parser);

}  // namespace gf::serialize
