# passepartout_warnings(target): the warning set for our own targets (never for dependencies).
function(passepartout_warnings target)
  target_compile_options(${target} PRIVATE
    -Wall -Wextra -Wpedantic -Wshadow -Wnon-virtual-dtor -Wold-style-cast -Wcast-align
    -Wunused -Woverloaded-virtual -Wconversion -Wsign-conversion -Wnull-dereference
    -Wdouble-promotion -Wformat=2 -Wimplicit-fallthrough
    $<$<BOOL:${PASSEPARTOUT_WERROR}>:-Werror>)
endfunction()
