# passepartout_warnings(target): the warning set for our own targets (never for dependencies).
function(passepartout_warnings target)
  target_compile_options(${target} PRIVATE
    -Wall -Wextra -Wpedantic -Wshadow -Wnon-virtual-dtor -Wold-style-cast -Wcast-align
    -Wunused -Woverloaded-virtual -Wconversion -Wsign-conversion -Wnull-dereference
    -Wdouble-promotion -Wformat=2 -Wimplicit-fallthrough
    # GCC 12 at -O3 reports impossible overlaps inside std::string's own
    # operator+ (GCC bug 105651); the warning says nothing about our code.
    $<$<AND:$<CXX_COMPILER_ID:GNU>,$<VERSION_LESS:$<CXX_COMPILER_VERSION>,13>>:-Wno-restrict>
    $<$<BOOL:${PASSEPARTOUT_WERROR}>:-Werror>)
endfunction()
