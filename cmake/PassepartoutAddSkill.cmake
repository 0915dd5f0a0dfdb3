# passepartout_add_skill(<name> SOURCES <src>... [OUTPUT_DIRECTORY <dir>])
#
# Builds the skill <name> as the loader expects it: a MODULE library named
# lib<name>.so, linked only against Passepartout::sdk, with hidden visibility
# (only the entry symbol is exported), -fno-gnu-unique on GCC (so the library
# can really be unloaded on hot swap) and -Wl,-z,defs (an undefined symbol is a
# link error here, not a dlopen error on the operator's machine).
# Installed with the SDK and used both in tree and out of tree.
function(passepartout_add_skill name)
  cmake_parse_arguments(PARSE_ARGV 1 ARG "" "OUTPUT_DIRECTORY" "SOURCES")
  if(NOT ARG_SOURCES)
    message(FATAL_ERROR "passepartout_add_skill(${name}): SOURCES is required")
  endif()
  if(ARG_UNPARSED_ARGUMENTS)
    message(FATAL_ERROR "passepartout_add_skill(${name}): unknown arguments ${ARG_UNPARSED_ARGUMENTS}")
  endif()

  add_library(${name} MODULE ${ARG_SOURCES})
  target_link_libraries(${name} PRIVATE Passepartout::sdk)
  set_target_properties(${name} PROPERTIES
    PREFIX "lib"
    SUFFIX ".so"
    C_VISIBILITY_PRESET hidden
    CXX_VISIBILITY_PRESET hidden
    VISIBILITY_INLINES_HIDDEN ON)
  if(CMAKE_CXX_COMPILER_ID STREQUAL "GNU")
    target_compile_options(${name} PRIVATE -fno-gnu-unique)
  endif()
  target_link_options(${name} PRIVATE "LINKER:-z,defs")
  if(ARG_OUTPUT_DIRECTORY)
    set_target_properties(${name} PROPERTIES LIBRARY_OUTPUT_DIRECTORY "${ARG_OUTPUT_DIRECTORY}")
  endif()
endfunction()
