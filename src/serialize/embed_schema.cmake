# cmake -DIN=graph.fbs -DOUT=graph_schema.hpp -P embed_schema.cmake: the schema text as a C++
# string, for the JSON parser and printer (flatbuffers::Parser needs the schema at run time).
file(READ "${IN}" schema)
file(WRITE "${OUT}.tmp"
  "// Generated from graph.fbs at build time; do not edit.\n#pragma once\n\n"
  "namespace gf::serialize {\ninline constexpr const char kGraphSchema[] = R\"gfschema(${schema})gfschema\";\n}\n")
file(COPY_FILE "${OUT}.tmp" "${OUT}" ONLY_IF_DIFFERENT)
file(REMOVE "${OUT}.tmp")
