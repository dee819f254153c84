# SPDX-License-Identifier: Apache-2.0
# The curated warning set, applied to project targets only (never to generated or system code).
option(KUBERDMA_WERROR "Treat warnings as errors" OFF)
set(KUBERDMA_SANITIZE "" CACHE STRING "Sanitizers to build with (address,undefined | thread)")
option(KUBERDMA_LIBFUZZER "Build the fuzz targets with libFuzzer's main (clang; the fuzz preset)" OFF)

function(kuberdma_target_defaults target)
  target_compile_features(${target} PUBLIC cxx_std_20)
  target_compile_options(${target} PRIVATE
    -Wall -Wextra -Wshadow -Wconversion -Wsign-conversion -Wnon-virtual-dtor -Wold-style-cast
    -Woverloaded-virtual -Wimplicit-fallthrough -Wformat=2
    # Designated initialisers that leave defaulted members out are the idiom, not a mistake.
    -Wno-missing-field-initializers)
  if(KUBERDMA_WERROR)
    target_compile_options(${target} PRIVATE -Werror)
  endif()
  if(KUBERDMA_SANITIZE)
    target_compile_options(${target} PRIVATE -fsanitize=${KUBERDMA_SANITIZE} -fno-omit-frame-pointer)
    target_link_options(${target} PRIVATE -fsanitize=${KUBERDMA_SANITIZE})
    # libFuzzer's coverage feedback needs the parsers instrumented, not only the target.
    if(KUBERDMA_LIBFUZZER)
      target_compile_options(${target} PRIVATE -fsanitize=fuzzer-no-link)
    endif()
    # Undefined behaviour fails the test that hit it, instead of a line on stderr.
    if(KUBERDMA_SANITIZE MATCHES "undefined")
      target_compile_options(${target} PRIVATE -fno-sanitize-recover=undefined)
    endif()
  endif()
endfunction()

# kuberdma_library(<name> SOURCES ... DEPS ...): one library per folder, kuberdma_<name> with an
# ALIAS kuberdma::<name> that every other target uses.
function(kuberdma_library name)
  cmake_parse_arguments(ARG "" "" "SOURCES;DEPS;PRIVATE_DEPS" ${ARGN})
  add_library(kuberdma_${name} STATIC ${ARG_SOURCES})
  add_library(kuberdma::${name} ALIAS kuberdma_${name})
  target_link_libraries(kuberdma_${name} PUBLIC ${ARG_DEPS} PRIVATE ${ARG_PRIVATE_DEPS})
  set_target_properties(kuberdma_${name} PROPERTIES POSITION_INDEPENDENT_CODE ON)
  kuberdma_target_defaults(kuberdma_${name})
endfunction()
