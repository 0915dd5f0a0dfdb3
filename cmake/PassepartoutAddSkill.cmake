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
  # A skill written only in C links as C: the SDK target's C++17 requirement
  # would otherwise pull in the C++ runtime it never uses.
  set(cxx_sources ${ARG_SOURCES})
  list(FILTER cxx_sources INCLUDE REGEX "\\.(cc|cpp|cxx|c\\+\\+|C)$")
  if(NOT cxx_sources)
    set_target_properties(${name} PROPERTIES LINKER_LANGUAGE C)
  endif()
  set_target_properties(${name} PROPERTIES
    PREFIX "lib"
    SUFFIX ".so"
    C_VISIBILITY_PRESET hidden
    CXX_VISIBILITY_PRESET hidden
    VISIBILITY_INLINES_HIDDEN ON)
  # Per source language, so a skill written in C (or a C-only project) works too.
  target_compile_options(${name} PRIVATE $<$<COMPILE_LANG_AND_ID:CXX,GNU>:-fno-gnu-unique>)
  target_link_options(${name} PRIVATE "LINKER:-z,defs")
  if(ARG_OUTPUT_DIRECTORY)
    # The generator expression stops multi-config generators from appending
    # a per-configuration subfolder: the library lands exactly there.
    set_target_properties(${name} PROPERTIES LIBRARY_OUTPUT_DIRECTORY "$<1:${ARG_OUTPUT_DIRECTORY}>")
  endif()
endfunction()
